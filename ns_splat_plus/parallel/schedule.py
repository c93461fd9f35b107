"""The scaling rule for W ranks and B cameras per step: :func:`scale_schedule`, :func:`effective_batch`.

W ranks with B cameras each (``--pipeline.datamanager.cameras-per-step``) do the one-camera run's
work in 1/(W x B) of the steps: step counts are divided by W x B, learning rates multiplied by
sqrt(W x B) and Adam's betas raised to the power W x B (Grendel-GS). See README, "Several GPUs".
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import List

import torch

from ns_splat_plus.parallel.config import AdamWithBetasOptimizerConfig, DataParallelConfig
from ns_splat_plus.parallel.devices import DeviceResolutionError


MODEL_STEP_FIELDS = (
    "warmup_length",
    "refine_every",
    "stop_split_at",
    "stop_screen_size_at",
    "sh_degree_interval",
    "resolution_schedule",
    "refine_start_iter",
    "refine_stop_iter",
)
TRAINER_STEP_FIELDS = ("max_num_iterations", "steps_per_eval_image", "steps_per_eval_all_images", "steps_per_save", "steps_per_eval_batch")
SCHEDULER_STEP_FIELDS = ("max_steps", "warmup_steps")


def scaled_steps(steps: int, world_size: int) -> int:
    """ceil(steps / W), at least 1 for a positive count (0 stays 0: "never")."""
    if steps <= 0:
        return steps
    return max(1, math.ceil(steps / world_size))


def lr_factor(world_size: int, rule: str) -> float:
    if rule == "sqrt":
        return math.sqrt(world_size)
    if rule == "linear":
        return float(world_size)
    if rule == "none":
        return 1.0
    raise ValueError(f"unknown lr scaling rule {rule!r} (sqrt, linear or none)")


def effective_batch(config, world_size: int) -> int:
    """Cameras per optimizer step: W ranks x B cameras each (``config``: a SplatPlusTrainerConfig)."""
    return world_size * max(1, int(getattr(config.pipeline.datamanager, "cameras_per_step", 1)))


def scale_schedule(config, world_size: int, dp: DataParallelConfig) -> List[str]:
    """Scale ``config`` (a SplatPlusTrainerConfig) in place for an effective batch of ``world_size``
    cameras per step (W ranks x B cameras per rank: pass :func:`effective_batch`); returns what changed.

    The rule: each step processes W x B cameras, so it does the one-camera run's work in 1/(W x B)
    of the steps (below, W stands for the effective batch W x B). Every step count is divided by W (rounded up): total steps, refine interval,
    refine start (warmup_length) and stop, screen-size stop, SH-degree interval, resolution schedule,
    LR-scheduler max/warmup steps, eval and checkpoint intervals (the opacity reset is counted in
    refine intervals, so it follows). Gradients are averaged over W cameras, so learning rates are
    multiplied by sqrt(W) (``lr_scaling``) and Adam's betas raised to the power W
    (``scale_adam_betas``), as Grendel-GS does for batched training. Applied once per config.
    """
    if world_size <= 1 or not dp.scale_schedule:
        return []
    if dp.scaled_for_world_size:
        if dp.scaled_for_world_size != world_size:
            raise DeviceResolutionError(
                f"this config's schedule was already scaled for {dp.scaled_for_world_size} cameras per step (ranks x "
                f"--pipeline.datamanager.cameras-per-step), but this run has {world_size}; start from the method's "
                "defaults (not --load-config) to rescale"
            )
        return []
    changes: List[str] = []

    def scale_attr(obj, name: str, label: str) -> None:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            new = scaled_steps(value, world_size)
            setattr(obj, name, new)
            changes.append(f"{label} {value}->{new}")

    for name in TRAINER_STEP_FIELDS:
        scale_attr(config, name, name)
    model = config.pipeline.model
    for name in MODEL_STEP_FIELDS:
        scale_attr(model, name, name)

    factor = lr_factor(world_size, dp.lr_scaling)
    optimizers = dict(config.optimizers)
    for group, entry in optimizers.items():
        entry = dict(entry)
        opt = entry.get("optimizer")
        if opt is not None:
            if factor != 1.0:
                opt.lr = opt.lr * factor
            if dp.scale_adam_betas and opt._target is torch.optim.Adam:
                if not isinstance(opt, AdamWithBetasOptimizerConfig):
                    values = {f.name: getattr(opt, f.name) for f in fields(opt) if f.name != "_target"}
                    opt = AdamWithBetasOptimizerConfig(**values)
                opt.betas = (opt.betas[0] ** world_size, opt.betas[1] ** world_size)
                entry["optimizer"] = opt
        sched = entry.get("scheduler")
        if sched is not None:
            for name in SCHEDULER_STEP_FIELDS:
                scale_attr(sched, name, f"{group}.{name}")
            if factor != 1.0:
                for name in ("lr_final", "lr_pre_warmup"):
                    if getattr(sched, name, None) is not None:
                        setattr(sched, name, getattr(sched, name) * factor)
        optimizers[group] = entry
    config.optimizers = optimizers
    if factor != 1.0:
        changes.append(f"learning rates x{factor:.3g} ({dp.lr_scaling}(W))")
    if dp.scale_adam_betas:
        changes.append(f"Adam betas ^{world_size}")
    dp.scaled_for_world_size = world_size
    return changes

