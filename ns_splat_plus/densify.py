"""Densification strategies for splat-plus (gsplat's DefaultStrategy / MCMCStrategy)."""

from __future__ import annotations

from gsplat.strategy import DefaultStrategy


def build_strategy(config, num_train_data: int):
    """The strategy a model config asks for, with splatfacto's settings."""
    return DefaultStrategy(
        prune_opa=config.cull_alpha_thresh,
        grow_grad2d=config.densify_grad_thresh,
        grow_scale3d=config.densify_size_thresh,
        grow_scale2d=config.split_screen_size,
        prune_scale3d=config.cull_scale_thresh,
        prune_scale2d=config.cull_screen_size,
        refine_scale2d_stop_iter=config.stop_screen_size_at,
        refine_start_iter=config.warmup_length,
        refine_stop_iter=config.stop_split_at,
        reset_every=config.reset_alpha_every * config.refine_every,
        refine_every=config.refine_every,
        pause_refine_after_reset=num_train_data + config.refine_every,
        absgrad=config.use_absgrad,
        revised_opacity=False,
        verbose=False,
    )
