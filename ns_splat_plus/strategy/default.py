"""splatfacto's densification (gsplat's DefaultStrategy), instrumented: :class:`InstrumentedDefaultStrategy`.

The same decisions as gsplat 1.4.0's ``DefaultStrategy`` (built by :func:`ns_splat_plus.strategy.build_strategy`),
plus a ``refine`` record per refine (duplicated / split / pruned counts, Gaussians before and after,
the accumulated 2D-gradient statistics behind the decision), an ``opacity_reset`` record per reset,
the per-step gradient monitor, statistics summed across ranks before every decision, and random
draws seeded by (run seed, step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from gsplat.strategy import DefaultStrategy
from gsplat.strategy import ops as gsplat_ops

from ns_splat_plus import upstream
from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy.monitor import GradientMonitor, maybe_empty_cache, seeded_rng
from ns_splat_plus.strategy.stats import dense_norms, grad2d_statistics


@dataclass
class InstrumentedDefaultStrategy(GradientMonitor, DefaultStrategy):
    """gsplat's DefaultStrategy (same decisions), with records, gradient watch and rank consistency.

    Hooks (nerfstudio's model calls them with one camera per step, or B cameras batched):
    ``step_pre_backward`` (gsplat's: keeps ``info["means2d"]``'s gradient) and
    ``step_post_backward(params, optimizers, state, step, info)`` where ``params`` are the Gaussian
    parameters (``means`` [N, 3] ...), ``state`` the plain dict of :meth:`initialize_state`
    (``grad2d`` [N], ``count`` [N], ``radii`` [N]) and ``info`` gsplat's rasterization info
    (``means2d`` [C, N, 2], ``radii`` [C, N], ``width``, ``height``, ``n_cameras``).
    """

    def _update_state(self, params, state, info, packed: bool = False):
        """gsplat's accumulation of the screen-space gradients, bitwise the same for nerfstudio's one
        camera per step, but dense (``torch.where`` over the [C, N] visibility instead of gsplat's
        boolean index): no host sync in the training step. Keeps this step's (sum, max, count) of
        the visible norms for the statistics."""
        for key in ["width", "height", "n_cameras", "radii", "gaussian_ids", self.key_for_gradient]:
            assert key in info, f"{key} is required but missing."
        out = dense_norms(info, self.key_for_gradient, self.absgrad, packed)
        if out is None:
            self._step_grads = None
            return  # no gradient this step (gsplat would crash on None.clone()); the monitor counts it
        norms, where = out
        self._step_grads = (norms, where, packed)
        n_gaussian = len(list(params.values())[0])
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            if state[key] is None:
                state[key] = torch.zeros(n_gaussian, device=norms.device)
        if packed:  # where: the Gaussian id of each projected entry
            state["grad2d"].index_add_(0, where, norms)
            state["count"].index_add_(0, where, torch.ones_like(norms))
            if self.refine_scale2d_stop_iter > 0:
                radii = info["radii"] / float(max(info["width"], info["height"]))
                state["radii"][where] = torch.maximum(state["radii"][where], radii)
            return
        if norms.shape[0] == 1:  # nerfstudio's one camera: the sum over cameras is the row itself
            state["grad2d"].add_(norms[0])  # zero where not visible: x + 0 == x
            state["count"].add_(where[0])
        else:
            state["grad2d"].add_(norms.sum(dim=0))
            state["count"].add_(where.sum(dim=0).to(state["count"].dtype))
        if self.refine_scale2d_stop_iter > 0:
            # gsplat keeps the visible entries only; the others have radii 0 (or below), and the running
            # maximum starts at 0, so taking them too changes no bit and needs no mask
            radii = info["radii"] / float(max(info["width"], info["height"]))
            torch.maximum(state["radii"], radii[0] if radii.shape[0] == 1 else radii.amax(dim=0), out=state["radii"])

    def refines_at(self, step: int) -> bool:
        """Whether ``step`` densifies and prunes (gsplat's condition; also the start-up note of a short run)."""
        return (
            step < self.refine_stop_iter
            and step > self.refine_start_iter
            and step % self.refine_every == 0
            and step % self.reset_every >= self.pause_refine_after_reset
        )

    def step_post_backward(self, params, optimizers, state, step, info, packed: bool = False):
        device = params["means"].device
        self._step_grads = None
        sampled = self._samples_step(step, self.refine_stop_iter)
        if step < self.refine_stop_iter:
            self._update_state(params, state, info, packed=packed)
            if self.refines_at(step):
                self._refine(params, optimizers, state, step)
            if step % self.reset_every == 0:
                gsplat_ops.reset_opa(params=params, optimizers=optimizers, state=state, value=self.prune_opa * 2.0)
                if self.instrumentation:
                    self.log.emit(
                        {
                            "step": step,
                            "event": "opacity_reset",
                            "value": self.prune_opa * 2.0,
                            "num_gaussians": len(params["means"]),
                        }
                    )
        elif self.instrumentation and sampled:
            out = dense_norms(info, self.key_for_gradient, self.absgrad, packed)
            self._step_grads = None if out is None else (*out, packed)
        if self.instrumentation and sampled:
            self._observe_step(step, device, self._step_grads)
        elif self.instrumentation:
            self._close_step(step)  # refinement is over: statistics every stats_every_after_refine steps
        self._step_grads = None

    def _reduce_statistics(self, params, state) -> None:
        """The accumulated statistics (``grad2d``, ``count`` [N], ``radii`` [N]) summed (radii: max) over
        the ranks, so every rank decides the same; zeros where this rank saw no Gaussian since the last refine."""
        n = len(params["means"])
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            if state.get(key) is None:
                state[key] = torch.zeros(n, device=params["means"].device)
        collectives.all_reduce(state["grad2d"], "SUM")
        collectives.all_reduce(state["count"], "SUM")
        if self.refine_scale2d_stop_iter > 0:
            collectives.all_reduce(state["radii"], "MAX")

    def _refine(self, params, optimizers, state, step: int) -> None:
        device = params["means"].device
        n = len(params["means"])
        self._reduce_statistics(params, state)  # the same statistics on every rank before anyone decides
        stats = grad2d_statistics(state["grad2d"], state["count"], self.grow_grad2d) if self.instrumentation else None
        if stats is not None and step < self.refine_scale2d_stop_iter:
            # gsplat also splits Gaussians that were large on screen, whatever their gradient
            stats["screen_size_threshold"] = self.grow_scale2d
            stats["num_over_screen_size"] = int((state["radii"] > self.grow_scale2d).sum().item())
        with seeded_rng(self.rng_seed, step, device, numpy_too=True):  # split draws torch.randn
            n_dupli, n_split = upstream.grow_gs(self, params, optimizers, state, step)
        n_prune = upstream.prune_gs(self, params, optimizers, state, step)
        state["grad2d"].zero_()
        state["count"].zero_()
        if self.refine_scale2d_stop_iter > 0:
            state["radii"].zero_()
        maybe_empty_cache(device, self.empty_cache_after_refine)
        if self.instrumentation:
            self.log.emit(
                {
                    "step": step,
                    "event": "refine",
                    "strategy": "default",
                    "duplicated": int(n_dupli),
                    "split": int(n_split),
                    "pruned": int(n_prune),
                    "num_gaussians_before": n,
                    "num_gaussians": len(params["means"]),
                    "grad2d": stats,
                    "absgrad": self.absgrad,
                    "world_size": collectives.get_world_size(),
                }
            )
            self._after_refine_checks(step, stats)
