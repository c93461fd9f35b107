"""The per-step gradient monitor shared by both instrumented strategies.

:class:`GradientMonitor` is a dataclass mixin (gsplat's strategies are dataclasses): every step it
keeps (sum, max, count) of the visible means2d gradient norms on the device, reads them every few
steps, writes ``gradient_summary`` records, stops training (:class:`TrainingHealthError`) when the
gradients are missing or zero for ``zero_grad_patience`` steps, and warns when nothing crosses the
densify threshold. :func:`seeded_rng` makes every random draw of a refine a function of
(run seed, step), so all ranks decide alike.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from ns_splat_plus.errors import TrainingHealthError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy.records import DensificationLog, fmt_number
from ns_splat_plus.strategy.stats import StepGradients, write_step_stats


def step_seed(run_seed: int, step: int) -> int:
    """The seed of every draw made at ``step`` of a run seeded ``run_seed`` (the same on every rank)."""
    return (int(run_seed) * 1_000_003 + int(step) * 7_919 + 0x5EED) % (2**63 - 1)


@contextmanager
def seeded_rng(run_seed: int, step: int, device: torch.device, numpy_too: bool = False) -> Iterator[None]:
    """Every draw inside comes from generators seeded by (run seed, step): the same on every rank
    and in every run; the global generators continue afterwards as if nothing was drawn."""
    cuda_index = None
    if device.type == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    seed = step_seed(run_seed, step)
    with torch.random.fork_rng(devices=[] if cuda_index is None else [cuda_index]):
        torch.default_generator.manual_seed(seed)
        if cuda_index is not None:
            torch.cuda.default_generators[cuda_index].manual_seed(seed)
        np_state = np.random.get_state() if numpy_too else None
        if numpy_too:
            np.random.seed(seed % (2**32))
        try:
            yield
        finally:
            if np_state is not None:
                np.random.set_state(np_state)


# --- the shared instrumentation ---------------------------------------------------------------------


@dataclass
class _MonitorState:
    """Host + device bookkeeping of the per-step gradient statistics (not per Gaussian)."""

    rows: Optional[Tensor] = None  # [cap, 3] per-step (sum, max, count) of the visible gradient norms, on the device
    row_steps: List[int] = field(default_factory=list)
    row_present: List[int] = field(default_factory=list)
    window: List[Tuple[int, float, float, int, int]] = field(default_factory=list)  # step, sum, max, visible, present
    window_start: Optional[int] = None  # the first step the next summary covers (sampled or not)
    zero_run: int = 0  # steps from the first of the current all-zero samples to the last one, inclusive
    zero_run_start: Optional[int] = None
    zero_run_rows: int = 0  # samples in the current all-zero run
    zero_run_missing: int = 0
    zero_run_visible: int = 0
    refines: int = 0
    over_threshold_total: int = 0
    warned_no_densify: bool = False
    acc_grad2d: Optional[Tensor] = None  # MCMC only: the statistics gsplat's DefaultStrategy would keep
    acc_count: Optional[Tensor] = None


EXPANDABLE_SEGMENTS = "expandable_segments:true"


def maybe_empty_cache(device: torch.device, switch: bool) -> bool:
    """Return cached blocks to the driver after a refine (the Gaussian count just changed, so the
    old-sized blocks are unlikely to be reused) unless ``switch`` is off or the allocator runs with
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, which grows and shrinks segments in place
    and makes the (synchronising, slow) empty_cache unnecessary. True when it emptied the cache."""
    import os

    if device.type != "cuda" or not switch:
        return False
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").replace(" ", "").lower()
    if EXPANDABLE_SEGMENTS in conf.split(","):
        return False
    torch.cuda.empty_cache()
    return True


@dataclass
class GradientMonitor:
    """Fields and per-step hooks shared by both instrumented strategies (a dataclass mixin)."""

    instrumentation: bool = True
    """Record statistics and watch gradients; False: gsplat's behaviour (kept: rank consistency)."""
    grad_summary_every: int = 100
    zero_grad_patience: int = 100
    stats_every_after_refine: int = 10
    """Once refinement has stopped, take the gradient statistics every this many steps instead of
    every step: no decision needs them any more. The zero-gradient watch goes on, counted in steps
    (1: every step)."""
    warn_no_densify_after: int = 3
    rng_seed: int = 0
    empty_cache_after_refine: bool = True
    """torch.cuda.empty_cache() after each refine (see :func:`maybe_empty_cache`)."""
    log: DensificationLog = field(default_factory=DensificationLog, repr=False, compare=False)
    _mon: _MonitorState = field(default_factory=_MonitorState, init=False, repr=False, compare=False)

    # -- state for warmup / checkpoints ------------------------------------------------------------

    def instrumentation_state(self) -> _MonitorState:
        """A deep copy of the instrumentation bookkeeping (restore with :meth:`load_instrumentation_state`)."""
        return copy.deepcopy(self._mon)

    def load_instrumentation_state(self, state: _MonitorState) -> None:
        self._mon = copy.deepcopy(state)

    def monitor_state_dict(self) -> Dict[str, Any]:
        """The bookkeeping as plain data for a checkpoint (tensors on the CPU, loadable with
        ``weights_only=True``): refine count, warned flag, zero-gradient run, the summary window and the
        rows not read yet, so that a resumed run writes the records and stops where the whole run would."""
        mon = self._mon
        state: Dict[str, Any] = {
            k: copy.deepcopy(getattr(mon, k))
            for k in (
                "row_steps",
                "row_present",
                "window_start",
                "zero_run",
                "zero_run_start",
                "zero_run_rows",
                "zero_run_missing",
                "zero_run_visible",
                "refines",
                "over_threshold_total",
                "warned_no_densify",
            )
        }
        state["window"] = [list(row) for row in mon.window]
        pending = len(mon.row_steps)
        state["rows"] = None if mon.rows is None or pending == 0 else mon.rows[:pending].detach().cpu().clone()
        for key in ("acc_grad2d", "acc_count"):
            value = getattr(mon, key)
            state[key] = None if value is None else value.detach().cpu().clone()
        return state

    def load_monitor_state_dict(self, state: Dict[str, Any], device: torch.device) -> None:
        """The inverse of :meth:`monitor_state_dict`, on ``device`` (the model's)."""
        mon = _MonitorState()
        for key, value in state.items():
            if key in ("rows", "window", "acc_grad2d", "acc_count") or not hasattr(mon, key):
                continue
            setattr(mon, key, copy.deepcopy(value))
        mon.window = [(int(r[0]), float(r[1]), float(r[2]), int(r[3]), int(r[4])) for r in state.get("window", [])]
        for key in ("acc_grad2d", "acc_count"):
            value = state.get(key)
            setattr(mon, key, None if value is None else value.to(device))
        rows = state.get("rows")
        if rows is not None:
            # the buffer _observe_step expects (its size decides when the host reads it), holding the unread rows
            mon.rows = torch.zeros((max(self._flush_every(device), rows.shape[0] + 1), 3), device=device)
            mon.rows[: rows.shape[0]] = rows.to(device)
        self._mon = mon

    # -- per step ------------------------------------------------------------------------------------

    def _flush_every(self, device: torch.device) -> int:
        """How many steps of statistics stay on the device before the host reads them (one sync)."""
        if device.type != "cuda":
            return 1  # reading a CPU tensor costs no sync
        if self.zero_grad_patience <= 0:  # no zero-gradient check: read only for the summaries
            return max(1, self.grad_summary_every)
        return max(1, min(self.zero_grad_patience // 4, self.grad_summary_every))

    def _samples_step(self, step: int, refine_stop: int) -> bool:
        """Whether this step's gradient statistics are taken: every step until ``refine_stop``, then
        every ``stats_every_after_refine`` steps (from ``refine_stop`` on)."""
        every = max(1, self.stats_every_after_refine)
        return step < refine_stop or (step - refine_stop) % every == 0

    def _observe_step(self, step: int, device: torch.device, grads: Optional[StepGradients]) -> None:
        """Record this step's (sum, max, count) of the visible gradient norms, kept on the device;
        the host reads them every few steps. None: no gradient reached means2d this step."""
        mon = self._mon
        cap = self._flush_every(device)
        if mon.rows is None or mon.rows.shape[0] < cap or mon.rows.device != device:  # larger: restored rows
            mon.rows = torch.zeros((cap, 3), device=device)
        write_step_stats(mon.rows[len(mon.row_steps)], grads)
        mon.row_steps.append(step)
        mon.row_present.append(0 if grads is None else 1)
        # read every `cap` steps; the rows (one per sampled step) span at least as many steps as they
        # are, so this also keeps them within the buffer
        if step - mon.row_steps[0] + 1 >= cap:
            self._flush(step)
        self._close_step(step)

    def _close_step(self, step: int) -> None:
        """What every step ends with, its statistics sampled or not: the summary that falls due."""
        mon = self._mon
        if mon.window_start is None:
            mon.window_start = step
        if (step + 1) % self.grad_summary_every == 0:
            self._flush(step)
            self._emit_summary(step)

    def _flush(self, step: int) -> None:
        mon = self._mon
        n = len(mon.row_steps)
        if n == 0:
            return
        assert mon.rows is not None  # made with the first sampled row
        device = mon.rows.device
        rows = mon.rows[:n]
        present = torch.tensor(mon.row_present, dtype=rows.dtype).to(device)
        sums = torch.cat(
            (rows[:, 0:1], rows[:, 2:3], present[:, None]), dim=1
        )  # sum, visible, present: summed over ranks
        maxes = rows[:, 1].clone()  # max: max over ranks
        collectives.all_reduce(sums, "SUM")
        collectives.all_reduce(maxes, "MAX")
        sums_host, maxes_host = sums.tolist(), maxes.tolist()
        for i, row_step in enumerate(mon.row_steps):
            total, visible, present = sums_host[i]
            row = (row_step, total, maxes_host[i], int(visible), int(present))
            mon.window.append(row)
            if maxes_host[i] == 0.0:  # missing gradients count as zero
                if mon.zero_run_rows == 0:
                    mon.zero_run_start = row_step
                mon.zero_run_rows += 1
                assert mon.zero_run_start is not None  # set at the run's first row
                mon.zero_run = row_step - mon.zero_run_start + 1  # in steps: samples may be several steps apart
                mon.zero_run_missing += int(present == 0)
                mon.zero_run_visible = max(mon.zero_run_visible, int(visible))
            else:
                mon.zero_run, mon.zero_run_start, mon.zero_run_rows, mon.zero_run_missing, mon.zero_run_visible = (
                    0,
                    None,
                    0,
                    0,
                    0,
                )
        mon.row_steps.clear()
        mon.row_present.clear()
        if self.zero_grad_patience > 0 and mon.zero_run >= self.zero_grad_patience:
            self._fail_zero_gradients(step)

    def _emit_summary(self, step: int) -> None:
        mon = self._mon
        first_step, mon.window_start = mon.window_start, None
        if not mon.window:
            return
        steps = [r[0] for r in mon.window]
        per_step_mean = [r[1] / r[3] for r in mon.window if r[3] > 0]
        per_step_max = [r[2] for r in mon.window]
        record = {
            "step": step,
            "event": "gradient_summary",
            "first_step": steps[0] if first_step is None else first_step,
            "num_steps": step - (steps[0] if first_step is None else first_step) + 1,
            "sampled_steps": len(steps),  # fewer than num_steps once refinement has stopped
            "norm_mean": float(np.mean(per_step_mean)) if per_step_mean else 0.0,
            "norm_max": float(np.max(per_step_max)),
            "norm_max_median": float(np.median(per_step_max)),
            "norm_max_min": float(np.min(per_step_max)),
            "zero_steps": sum(1 for m in per_step_max if m == 0.0),
            "missing_steps": sum(1 for r in mon.window if r[4] == 0),
            "visible_mean": float(np.mean([r[3] for r in mon.window])),
            "world_size": collectives.get_world_size(),
        }
        mon.window.clear()
        self.log.emit(record)

    def _fail_zero_gradients(self, step: int) -> None:
        mon = self._mon
        k = mon.zero_run
        start = mon.zero_run_start
        if mon.zero_run_missing == mon.zero_run_rows:
            what = "received no gradient at all (means2d.grad is None)"
            causes = [
                "the loss does not depend on the rendered image: it was detached (.detach(), torch.no_grad, "
                "a loss computed from the ground truth only)",
                "the rasterizer output was replaced or copied outside autograd",
            ]
        else:
            what = "had gradients that were all exactly zero"
            causes = []
            if mon.zero_run_visible == 0:
                causes.append(
                    "no Gaussian is inside any camera view (0 visible on those steps): check the camera poses, "
                    "the scene scale / dataparser scaling, and the near plane"
                )
            causes += [
                "the loss is detached from the Gaussians (only a term without the rendered image reaches backward)",
                "every Gaussian is transparent (opacities ~0) or hidden behind the near plane",
                "learning rates of 0 on a degenerate initialisation, or a loss weight of 0",
            ]
        message = (
            f"Training stopped at step {step}: the 2D means (means2d) {what} for {k} consecutive steps "
            f"(since step {start}; --pipeline.model.zero-grad-patience {self.zero_grad_patience}). "
            "Densification can never happen and the Gaussians stop learning. Likely causes:\n  - "
            + "\n  - ".join(causes)
        )
        self.log.emit({"step": step, "event": "error", "kind": "zero_gradient", "message": message})
        raise TrainingHealthError(message)

    def _after_refine_checks(self, step: int, stats: Optional[Dict[str, Any]]) -> None:
        """Warn once when no Gaussian crossed the densify threshold by the N-th refine."""
        mon = self._mon
        mon.refines += 1
        if stats is None or stats.get("threshold") is None:
            return
        mon.over_threshold_total += int(stats["num_over_threshold"] or 0)
        if mon.warned_no_densify or self.warn_no_densify_after <= 0 or mon.refines < self.warn_no_densify_after:
            return
        if mon.over_threshold_total == 0:
            mon.warned_no_densify = True
            message = (
                f"Densification: no Gaussian has crossed the densify threshold in {mon.refines} refines "
                f"(step {step}). Accumulated 2D gradient over {stats['num_visible']} visible Gaussians: "
                f"median {fmt_number(stats['median'])}, p90 {fmt_number(stats['p90'])}, p99 {fmt_number(stats['p99'])}, "
                f"max {fmt_number(stats['max'])} vs threshold {fmt_number(stats['threshold'])}. The scene will not grow: "
                f"lower --pipeline.model.densify-grad-thresh (about {fmt_number(stats['p99'])} densifies ~1%), or check "
                "that the loss reaches the Gaussians."
            )
            self.log.emit(
                {"step": step, "event": "warning", "kind": "no_densification", "message": message, "grad2d": stats}
            )
