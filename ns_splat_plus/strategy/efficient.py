"""A Gaussian-efficient densification (FastGS + DashGaussian's budget), instrumented: :class:`InstrumentedEfficientStrategy`.

splatfacto's densification grows every Gaussian whose accumulated 2D gradient is high. This
strategy, in gsplat's strategy shape and built by :func:`ns_splat_plus.strategy.build_strategy`
(``--pipeline.model.strategy efficient``), refines with the multi-view scores of
:mod:`ns_splat_plus.strategy.multiview` (FastGS, "multi-view consistent densification"):

* grow (gsplat's duplicate if small, split if large) only the Gaussians whose 2D gradient is over
  ``grow_grad2d`` *and* whose blend-weighted coverage of high-error pixels, averaged over the
  sampled views, is over ``densify_score``;
* within a budget that grows with the resolution schedule (DashGaussian): ``n0 + (cap - n0) /
  d^(2 - step / refine_stop_iter)`` Gaussians at downscale ``d``, the cap from ``max_gaussians``
  (0: ``(1 + budget_growth) x n0``, DashGaussian's default), at most ``max_growth_per_refine`` of
  the count per refine; over budget, the candidates with the highest scores grow;
* prune, as FastGS, ``prune_fraction`` (half) of gsplat's candidates (transparent, too large): those
  with the highest loss-weighted score (FastGS's pruning score, min-max normalised), so that no refine
  empties the scene; and every ``score_prune_every`` refines, every Gaussian whose score is over
  ``prune_score``. Pruning comes first, so that the freed budget can grow;
* optionally (``late_prunes``, off by default), after densification stops, FastGS's final pruning: every
  ``late_prune_every`` steps (a step count of the schedule, scaled with it), ``late_prunes`` times, every
  Gaussian whose opacity is under ``late_prune_opacity`` or whose score is over ``prune_score`` (FastGS: at
  18k, 21k, 24k and 27k of 30k iterations, after densifying until 15k; splatfacto's schedule gives the same
  steps, splat-plus-lite's 10k-step one 6k, 7k, 8k and 9k).

Everything else is :class:`~ns_splat_plus.strategy.default.InstrumentedDefaultStrategy`'s: the
accumulated 2D gradients (reduced across ranks), opacity resets, the gradient monitor and its
alarms, seeded draws. Each refine writes a ``refine`` record with the new scores and the budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch
from gsplat.strategy import ops as gsplat_ops

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy.default import InstrumentedDefaultStrategy
from ns_splat_plus.strategy.monitor import maybe_empty_cache, seeded_rng
from ns_splat_plus.strategy.multiview import RefineViewSource, multiview_scores, sample_views
from ns_splat_plus.strategy.options import Range, option
from ns_splat_plus.strategy.stats import grad2d_statistics

EFFICIENT_PREFIX = "efficient_"
"""The model config's (and the command line's) name of an option of this strategy is this prefix + its field's name:
``num_views`` is ``--pipeline.model.efficient-num-views``."""

INITIAL_COUNT = "initial_num_gaussians"
"""Strategy-state key: the Gaussian count when training started (the budget's starting point; saved
in checkpoints with the rest of the state, so a resumed run has the same budget)."""


def gaussian_budget(step: int, initial: int, cap: int, downscale: int, refine_stop_iter: int, refine_every: int) -> int:
    """DashGaussian's primitive budget: ``initial + (cap - initial) / d^(2 - step / refine_stop_iter)``
    at downscale ``d`` of the resolution schedule, ``cap`` from the last refine on (or at full resolution)."""
    if step + refine_every >= refine_stop_iter or downscale <= 1:
        return int(cap)
    exponent = 2.0 - step / max(1, refine_stop_iter)
    return int(initial + (cap - initial) / float(downscale) ** exponent)


@dataclass
class InstrumentedEfficientStrategy(InstrumentedDefaultStrategy):
    """Multi-view error-guided densify and prune under a growing budget (module docstring).

    Hooks as :class:`InstrumentedDefaultStrategy`'s; at a refine it renders training views through
    ``views`` (the model sets it when training starts: :class:`~ns_splat_plus.strategy.multiview.RefineViewSource`).
    ``state`` adds :data:`INITIAL_COUNT` to gsplat's (``grad2d`` [N], ``count`` [N], ``radii`` [N]).
    """

    num_views: int = option(
        10, "Training views rendered at each refine to score the Gaussians (FastGS: 10).", Range(low=1, integer=True)
    )
    loss_thresh: float = option(
        0.1,
        "A pixel is high-error where its L1 error, min-max normalised over the view, is over this (FastGS: 0.1).",
        Range(low=0, high=1, high_open=True),
    )
    densify_score: float = option(
        1.0,
        "Grow only Gaussians (with a high 2D gradient) whose blend-weighted coverage of high-error pixels, averaged "
        "over the views, is over this many full-resolution pixels.",
        Range(low=0),
    )
    prune_score: float = option(
        0.9,
        "Score pruning removes Gaussians whose loss-weighted score, normalised to [0, 1], is over this (FastGS: 0.9).",
        Range(low=0, high=1),
    )
    score_prune_every: int = option(10, "Score pruning every this many refines (0: never).", Range(low=0, integer=True))
    prune_fraction: float = option(
        0.5,
        "The fraction of the transparent / too large Gaussians pruned per refine, those with the highest "
        "loss-weighted score first (FastGS: 0.5; 1.0: all of them, as the default strategy).",
        Range(low=0, high=1),
    )
    max_gaussians: int = option(
        0,
        "The Gaussian budget's cap, at least the initial count (start-up refuses less); "
        "0: (1 + efficient-budget-growth) x the initial count.",
        Range(low=0, integer=True),
    )
    budget_growth: float = option(
        5.0,
        "With efficient-max-gaussians 0, the cap is (1 + this) x the initial count (DashGaussian's 5).",
        Range(low=0),
    )
    max_growth_per_refine: float = option(
        0.2,
        "At most this fraction of the Gaussians is added per refine (DashGaussian: 0.2; 0: no limit).",
        Range(low=0),
    )
    late_prunes: int = option(
        0,
        "Prunes after densification stops, as FastGS's final pruning (FastGS: 4): every efficient-late-prune-every "
        "steps after the last refine, the Gaussians whose opacity is under efficient-late-prune-opacity "
        "or whose loss-weighted score is over efficient-prune-score. 0: none.",
        Range(low=0, integer=True),
    )
    late_prune_every: int = option(
        3000,
        "Steps between two late prunes, scaled with the schedule as stop-split-at is (FastGS: 3,000 of 30,000; "
        "splat-plus-lite's 10,000-step schedule: 1,000).",
        Range(low=1, integer=True),
    )
    late_prune_opacity: float = option(
        0.1, "A late prune removes the Gaussians whose opacity is under this (FastGS: 0.1).", Range(low=0, high=1)
    )
    views: Optional[RefineViewSource] = field(default=None, repr=False, compare=False)

    def initialize_state(self, scene_scale: float = 1.0) -> Dict[str, Any]:
        state = super().initialize_state(scene_scale=scene_scale)
        state[INITIAL_COUNT] = None  # set at the first step: the model's count then
        return state

    def step_post_backward(self, params, optimizers, state, step, info, packed: bool = False):
        if state.get(INITIAL_COUNT) is None:
            state[INITIAL_COUNT] = len(params["means"])
        super().step_post_backward(params, optimizers, state, step, info, packed=packed)
        if self.late_prunes_at(step):
            self._late_prune(params, optimizers, state, step)

    def late_prune_steps(self) -> List[int]:
        """The ``late_prunes`` steps ``k x late_prune_every`` after ``refine_stop_iter`` (k = 1, 2, ...)."""
        return [self.refine_stop_iter + k * self.late_prune_every for k in range(1, self.late_prunes + 1)]

    def late_prunes_at(self, step: int) -> bool:
        """Whether ``step`` is one of :meth:`late_prune_steps` (at most ``late_prunes``, 0 by default, listed)."""
        return self.late_prunes > 0 and step in self.late_prune_steps()

    def check_cap(self, state: Dict[str, Any], num_gaussians: int) -> None:
        """Refuse (at start-up) a cap below the initial count (``state``'s, on a resumed run; else the
        ``num_gaussians`` of the model now): the budget would never let a Gaussian grow, and nothing prunes
        down to the cap, so the run would hold more Gaussians than the cap it was given."""
        initial = int(state[INITIAL_COUNT] if state.get(INITIAL_COUNT) is not None else num_gaussians)
        if 0 < self.max_gaussians < initial:
            option = f"--pipeline.model.{EFFICIENT_PREFIX}max-gaussians".replace("_", "-")
            raise UserInputError(
                f"{option} {self.max_gaussians} is below the {initial} Gaussians this run starts from: "
                "no Gaussian could ever grow, and none is pruned to meet the cap",
                f"pass {option} {initial} or more, or 0 for (1 + efficient-budget-growth) x the initial count",
            )

    def cap(self, initial: int) -> int:
        """The budget's cap for ``initial`` Gaussians at the start."""
        if self.max_gaussians > 0:
            return int(self.max_gaussians)
        return int(math.ceil((1.0 + self.budget_growth) * initial))

    def _scored_views(self, n: int, device: torch.device, step: int):
        """This step's sampled training views and the multi-view scores of its ``n`` Gaussians (a refine's, a late
        prune's): ``(views, MultiViewScores)``."""
        if self.views is None:
            raise RuntimeError(
                "the efficient strategy renders training views at its refines and late prunes, and none were "
                "attached: the model attaches them when training starts (SplatPlusModel.get_training_callbacks)"
            )
        views = sample_views(self.views.num_views(), self.num_views, self.rng_seed, step)
        return views, multiview_scores(self.views, views, self.loss_thresh, n, device)

    @torch.no_grad()
    def _refine(self, params, optimizers, state, step: int) -> None:
        started = time.perf_counter()
        device = params["means"].device
        n = len(params["means"])
        self._reduce_statistics(params, state)  # the same statistics and scores on every rank before anyone decides
        views, scores = self._scored_views(n, device, step)
        per_view = scores.per_view_coverage()

        # prune: gsplat's DefaultStrategy tests, and FastGS's loss-weighted score every few refines
        max_scale = torch.exp(params["scales"]).max(dim=-1).values
        is_prune = torch.sigmoid(params["opacities"].flatten()) < self.prune_opa
        if step > self.reset_every:  # as gsplat's _prune_gs: the size tests only after the first opacity reset
            is_prune |= max_scale > self.prune_scale3d * state["scene_scale"]
            if step < self.refine_scale2d_stop_iter:
                is_prune |= state["radii"] > self.prune_scale2d
        pruning = scores.pruning_score()
        n_prune_candidates = int(is_prune.sum().item())
        quota = int(self.prune_fraction * n_prune_candidates)
        if quota < n_prune_candidates:  # FastGS removes a part of them per refine: the highest scores
            priority = torch.where(is_prune, pruning, torch.full_like(pruning, -1.0))
            chosen = torch.argsort(priority, descending=True, stable=True)[:quota]
            is_prune = torch.zeros_like(is_prune).index_fill_(0, chosen, True) & is_prune
        score_prune = self.score_prune_every > 0 and (step // self.refine_every) % self.score_prune_every == 0
        by_score = torch.zeros_like(is_prune)
        if score_prune:
            by_score = (pruning > self.prune_score) & ~is_prune
            is_prune |= by_score

        # grow: high 2D gradient and high multi-view score, within the budget
        grads = state["grad2d"] / state["count"].clamp_min(1)
        is_grow = (grads > self.grow_grad2d) & (per_view > self.densify_score) & ~is_prune
        n_prune, n_by_score, n_candidates = (
            int(v) for v in torch.stack((is_prune.sum(), by_score.sum(), is_grow.sum())).tolist()
        )
        scored = time.perf_counter()  # the read above waited for the views' renders and scores
        initial = int(state[INITIAL_COUNT] if state.get(INITIAL_COUNT) is not None else n)
        assert self.views is not None  # _scored_views refused a strategy without them
        downscale = int(self.views.downscale())
        budget = gaussian_budget(step, initial, self.cap(initial), downscale, self.refine_stop_iter, self.refine_every)
        kept = n - n_prune
        allowed = budget - kept
        if self.max_growth_per_refine > 0:
            allowed = min(allowed, int(math.ceil(self.max_growth_per_refine * kept)))
        allowed = max(0, allowed)
        if n_candidates > allowed:  # over budget: the highest scores grow (stable order: the same on every rank)
            priority = torch.where(is_grow, per_view, torch.full_like(per_view, -1.0))
            chosen = torch.argsort(priority, descending=True, stable=True)[:allowed]
            is_grow = torch.zeros_like(is_grow).index_fill_(0, chosen, True) & is_grow
        is_small = max_scale <= self.grow_scale3d * state["scene_scale"]
        is_dupli, is_split = is_grow & is_small, is_grow & ~is_small
        n_dupli, n_split = (int(v) for v in torch.stack((is_dupli.sum(), is_split.sum())).tolist())
        stats = grad2d_statistics(state["grad2d"], state["count"], self.grow_grad2d) if self.instrumentation else None

        if n_prune > 0:
            keep = ~is_prune
            gsplat_ops.remove(params=params, optimizers=optimizers, state=state, mask=is_prune)
            is_dupli, is_split = is_dupli[keep], is_split[keep]
        if n_dupli > 0:
            gsplat_ops.duplicate(params=params, optimizers=optimizers, state=state, mask=is_dupli)
            is_split = torch.cat((is_split, torch.zeros(n_dupli, dtype=torch.bool, device=device)))
        if n_split > 0:
            with seeded_rng(self.rng_seed, step, device):  # split draws torch.randn
                gsplat_ops.split(
                    params=params,
                    optimizers=optimizers,
                    state=state,
                    mask=is_split,
                    revised_opacity=self.revised_opacity,
                )
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            state[key].zero_()
        maybe_empty_cache(device, self.empty_cache_after_refine)
        if self.instrumentation:
            coverage = grad2d_statistics(per_view, (scores.coverage > 0).to(per_view.dtype), self.densify_score)
            coverage["loss_thresh"] = self.loss_thresh
            coverage["high_error_pixels"] = scores.high_pixels.tolist()
            self.log.emit(
                {
                    "step": step,
                    "event": "refine",
                    "strategy": "efficient",
                    "duplicated": n_dupli,
                    "split": n_split,
                    "pruned": n_prune,
                    "pruned_by_score": n_by_score,
                    "prune_candidates": n_prune_candidates,
                    "num_gaussians_before": n,
                    "num_gaussians": len(params["means"]),
                    "budget": budget,
                    "budget_cap": self.cap(initial),
                    "downscale": downscale,
                    "num_candidates": n_candidates,
                    "views": views,
                    "view_losses": scores.losses.tolist(),
                    "coverage": coverage,
                    "score_prune": {"applied": score_prune, "threshold": self.prune_score, "pruned": n_by_score},
                    "grad2d": stats,
                    "absgrad": self.absgrad,
                    "world_size": collectives.get_world_size(),
                    # host clock, to the last read that waits for the GPU (the counts above)
                    "seconds": {"scoring": scored - started, "total": time.perf_counter() - started},
                }
            )
            self._after_refine_checks(step, stats)

    @torch.no_grad()
    def _late_prune(self, params, optimizers, state, step: int) -> None:
        """FastGS's final pruning (``final_prune_fastgs``): the Gaussians under ``late_prune_opacity`` and those whose
        loss-weighted score is over ``prune_score``, scored on views as at a refine. A prune that would remove every
        Gaussian is skipped with a warning."""
        started = time.perf_counter()
        n = len(params["means"])
        views, scores = self._scored_views(n, params["means"].device, step)
        transparent = torch.sigmoid(params["opacities"].flatten()) < self.late_prune_opacity
        by_score = (scores.pruning_score() > self.prune_score) & ~transparent
        is_prune = transparent | by_score
        n_transparent, n_by_score = (int(v) for v in torch.stack((transparent.sum(), by_score.sum())).tolist())
        n_prune = n_transparent + n_by_score
        emptied = n_prune == n
        if 0 < n_prune and not emptied:
            gsplat_ops.remove(params=params, optimizers=optimizers, state=state, mask=is_prune)
            maybe_empty_cache(params["means"].device, self.empty_cache_after_refine)
        if not self.instrumentation:
            return
        if emptied:
            self.log.emit(
                {
                    "step": step,
                    "event": "warning",
                    "message": f"late prune at step {step} skipped: it would remove all {n} Gaussians "
                    f"(opacity under --pipeline.model.efficient-late-prune-opacity {self.late_prune_opacity})",
                }
            )
            return
        self.log.emit(
            {
                "step": step,
                "event": "refine",
                "strategy": "efficient",
                "late_prune": True,
                "duplicated": 0,
                "split": 0,
                "pruned": n_prune,
                "pruned_by_score": n_by_score,
                "prune_candidates": n_transparent,
                "num_gaussians_before": n,
                "num_gaussians": len(params["means"]),
                "views": views,
                "view_losses": scores.losses.tolist(),
                "score_prune": {"applied": True, "threshold": self.prune_score, "pruned": n_by_score},
                "late_prune_opacity": self.late_prune_opacity,
                "world_size": collectives.get_world_size(),
                "seconds": {"total": time.perf_counter() - started},
            }
        )
