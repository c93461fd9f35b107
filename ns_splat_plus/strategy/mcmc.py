"""gsplat's MCMC densification, instrumented and runnable on the CPU: :class:`InstrumentedMCMCStrategy`.

Same decisions as gsplat 1.4.0's ``MCMCStrategy`` (relocate Gaussians at or below ``min_opacity``,
add 5 % per refine up to ``cap_max``, position noise every step), plus ``refine`` records
(relocated / added, opacity and 2D-gradient statistics), the per-step gradient monitor, rank-consistent
draws, and the pure-PyTorch kernels of :mod:`ns_splat_plus.strategy.mcmc_torch` on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch
from gsplat.strategy import MCMCStrategy
from gsplat.strategy import ops as gsplat_ops
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import upstream
from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy.mcmc_torch import inject_noise_torch, relocate_torch, sample_add_torch
from ns_splat_plus.strategy.monitor import GradientMonitor, maybe_empty_cache, seeded_rng
from ns_splat_plus.strategy.stats import dense_norms, grad2d_statistics, opacity_statistics


@dataclass
class InstrumentedMCMCStrategy(GradientMonitor, MCMCStrategy):
    """gsplat's MCMCStrategy (same decisions), instrumented, rank-consistent, and runnable on the CPU.

    Takes nerfstudio's call (no ``lr``: the means' current learning rate is read from its optimizer)."""

    def initialize_state(self, scene_scale: float = 1.0) -> Dict[str, Any]:
        return super().initialize_state()

    def check_cap(self, state: Dict[str, Any], num_gaussians: int) -> None:
        """Say once (rank 0, at start-up) where the cap is below the ``num_gaussians`` the run starts from: MCMC
        relocates and adds, never removes, so the run keeps them all and adds none. Not refused: splatfacto-mcmc
        trains such a scene (a point cloud over the default cap of a million) the same way."""
        if self.cap_max < num_gaussians and collectives.get_rank() == 0:
            CONSOLE.print(
                f"--pipeline.model.max-gs-num {self.cap_max} is below the {num_gaussians} Gaussians this run starts "
                f"from: MCMC never removes Gaussians, so it keeps all {num_gaussians} and adds none (raise it to let "
                "MCMC add Gaussians)",
                soft_wrap=True,
                markup=False,
            )

    def step_pre_backward(self, params, optimizers, state, step, info) -> None:
        means2d = info.get("means2d")
        if self.instrumentation and means2d is not None and means2d.requires_grad:
            means2d.retain_grad()  # only for the gradient statistics: MCMC decides on opacities

    def refines_at(self, step: int) -> bool:
        """Whether ``step`` relocates and adds Gaussians (gsplat's condition; also the start-up note of a short run)."""
        return step < self.refine_stop_iter and step > self.refine_start_iter and step % self.refine_every == 0

    def step_post_backward(
        self, params, optimizers, state, step, info, packed: bool = False, lr: Optional[float] = None
    ):
        if lr is None:
            lr = float(optimizers["means"].param_groups[0]["lr"])
        device = params["means"].device
        state["binoms"] = state["binoms"].to(device)
        mon = self._mon
        if self.instrumentation and not self._samples_step(step, self.refine_stop_iter):
            self._close_step(step)  # refinement is over: statistics every stats_every_after_refine steps
        elif self.instrumentation:
            # no boolean index here (upstream MCMC has no per-step host sync; neither do we)
            out = dense_norms(info, "means2d", False, packed) if "radii" in info else None
            n = len(params["means"])
            if mon.acc_grad2d is None or mon.acc_grad2d.shape[0] != n or mon.acc_grad2d.device != device:
                mon.acc_grad2d = torch.zeros(n, device=device)
                mon.acc_count = torch.zeros(n, device=device)
            assert mon.acc_count is not None  # made with acc_grad2d just above
            if step < self.refine_stop_iter:  # the statistics a refine reports: none is left after the stop
                if out is not None and packed:
                    mon.acc_grad2d.index_add_(0, out[1], out[0])
                    mon.acc_count.index_add_(0, out[1], torch.ones_like(out[0]))
                elif out is not None:
                    mon.acc_grad2d.add_(out[0].sum(dim=0))
                    mon.acc_count.add_(out[1].sum(dim=0).to(mon.acc_count.dtype))
            self._observe_step(step, device, None if out is None else (*out, packed))
        refine = self.refines_at(step)
        with seeded_rng(self.rng_seed, step, device, numpy_too=refine):
            if refine:
                self._refine(params, optimizers, state, step)
            # gsplat's per-step position noise, drawn from the seeded generator
            if params["means"].is_cuda:
                gsplat_ops.inject_noise_to_position(
                    params=params, optimizers=optimizers, state={}, scaler=lr * self.noise_lr
                )
            else:
                inject_noise_torch(params, lr * self.noise_lr)

    def _refine(self, params, optimizers, state, step: int) -> None:
        binoms = state["binoms"]
        n_before = len(params["means"])
        mon = self._mon
        grad_stats = opa_stats = None
        if self.instrumentation:
            assert mon.acc_grad2d is not None and mon.acc_count is not None  # accumulated by step_post_backward
            collectives.all_reduce(mon.acc_grad2d, "SUM")
            collectives.all_reduce(mon.acc_count, "SUM")
            grad_stats = grad2d_statistics(mon.acc_grad2d, mon.acc_count, None)
            opa_stats = opacity_statistics(params["opacities"], self.min_opacity)
        n_relocated = self._relocate(params, optimizers, binoms)
        n_added = self._add(params, optimizers, binoms)
        maybe_empty_cache(params["means"].device, self.empty_cache_after_refine)
        if self.instrumentation:
            n_after = len(params["means"])
            mon.acc_grad2d = torch.zeros(n_after, device=params["means"].device)
            mon.acc_count = torch.zeros(n_after, device=params["means"].device)
            self.log.emit(
                {
                    "step": step,
                    "event": "refine",
                    "strategy": "mcmc",
                    "relocated": int(n_relocated),
                    "added": int(n_added),
                    "num_gaussians_before": n_before,
                    "num_gaussians": n_after,
                    "cap_max": self.cap_max,
                    "opacity": opa_stats,
                    "grad2d": grad_stats,
                    "world_size": collectives.get_world_size(),
                }
            )
            self._after_refine_checks(step, grad_stats)

    @torch.no_grad()
    def _relocate(self, params, optimizers, binoms) -> int:
        if params["means"].is_cuda:
            return upstream.relocate_gs(self, params, optimizers, binoms)
        dead_mask = torch.sigmoid(params["opacities"].flatten()) <= self.min_opacity
        n_gs = int(dead_mask.sum().item())
        if n_gs > 0:
            relocate_torch(params, optimizers, dead_mask, binoms, self.min_opacity)
        return n_gs

    @torch.no_grad()
    def _add(self, params, optimizers, binoms) -> int:
        if params["means"].is_cuda:
            return upstream.add_new_gs(self, params, optimizers, binoms)
        current = len(params["means"])
        n_gs = max(0, min(self.cap_max, int(1.05 * current)) - current)
        if n_gs > 0:
            sample_add_torch(params, optimizers, n_gs, binoms, self.min_opacity)
        return n_gs
