"""Where the time of one training step goes: per-section host timers on a built trainer.

Entry point: :func:`install_sections` (the probe calls it in ``setup`` when ``sections_out`` is set,
see ``scripts/profile_step.py``), :func:`write_report` and :meth:`SectionTimer.restore` (at the end of
``train``). What it changes, and for how long:

* the trainer's, pipeline's, model's, optimizers' and strategy's instance attributes and the training
  callbacks are wrapped with host timers (these objects belong to the probed run and end with it);
* module-level functions are patched: nerfstudio's writer functions (``put_time``, ``put_scalar``,
  ``put_dict``, ``write_out_storage`` of ``nerfstudio.utils.writer``, as the trainer module sees them) and
  splat-plus's ``average_gradients``, plus a callback in Python's garbage collector. They stay patched
  for the duration of the probed run; :meth:`SectionTimer.restore` puts the originals back.

Without ``sync`` a section's time is what the host spends launching it; with ``sync`` it includes the
GPU work. Steps before ``skip`` are not counted.
"""

from __future__ import annotations

import functools
import gc
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import torch


class SectionTimer:
    """Accumulates host time per named section while ``counting`` is on."""

    def __init__(self, sync_device: Any = None) -> None:
        self.sync_device = sync_device
        self.totals: Dict[str, float] = defaultdict(float)
        self.calls: Dict[str, int] = defaultdict(int)
        self.counting = False
        self.steps = 0  # whole loop periods counted (begin to next begin)
        self.iterations = 0  # iterations counted: one more than the periods (the last has no next begin)
        self.gc_s = 0.0
        self.gc_collections = 0
        self._gc_started = None
        self._patched: List[Tuple[Any, str, Any]] = []  # (module, attribute, original): what restore() puts back

    def _sync(self) -> None:
        if self.sync_device is not None:
            torch.cuda.synchronize(self.sync_device)

    def wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if not self.counting:
                return fn(*args, **kwargs)
            self._sync()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._sync()
                self.totals[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed

    def wrap_attr(self, obj: Any, attr: str, name: str) -> None:
        if obj is not None and hasattr(obj, attr):
            setattr(obj, attr, self.wrap(name, getattr(obj, attr)))

    def patch(self, module: Any, attr: str, name: str) -> None:
        """Time ``module.attr`` (a module-level function, shared beyond this run) until :meth:`restore`."""
        original = getattr(module, attr)
        self._patched.append((module, attr, original))
        setattr(module, attr, self.wrap(name, original))

    def restore(self) -> None:
        """Put back every function :meth:`patch` replaced and remove the garbage-collector callback."""
        for module, attr, original in reversed(self._patched):
            setattr(module, attr, original)
        self._patched.clear()
        if self.gc_callback in gc.callbacks:
            gc.callbacks.remove(self.gc_callback)

    def gc_callback(self, phase: str, info: Dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            if self.counting:
                self.gc_s += time.perf_counter() - self._gc_started
                self.gc_collections += 1
            self._gc_started = None


def install_sections(trainer, skip: int, sync: bool, gc_freeze: bool) -> SectionTimer:
    """Wrap the pieces of an iteration of the set-up ``trainer``; returns the timer (call its
    :meth:`~SectionTimer.restore` when the run ends: module-level functions stay patched until then)."""
    from nerfstudio.engine import trainer as ns_trainer_module
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    device = torch.device(trainer.device)
    timer = SectionTimer(device if (sync and device.type == "cuda") else None)
    pipeline, model = trainer.pipeline, trainer.pipeline.model
    timer.wrap_attr(trainer, "train_iteration", "iteration: train_iteration")
    timer.wrap_attr(pipeline.datamanager, "next_train", "  datamanager.next_train")
    timer.wrap_attr(model, "get_outputs", "  model.get_outputs")
    timer.wrap_attr(model, "get_metrics_dict", "  model.get_metrics_dict")
    timer.wrap_attr(model, "get_loss_dict", "  model.get_loss_dict")
    timer.wrap_attr(trainer.optimizers, "zero_grad_some", "  optimizers.zero_grad_some")
    timer.wrap_attr(trainer.optimizers, "optimizer_scaler_step_some", "  optimizers.step (all below)")
    timer.wrap_attr(trainer.optimizers, "check_step", "    finite check")
    timer.wrap_attr(trainer.optimizers, "scheduler_step_all", "  optimizers.scheduler_step_all")
    strategy = getattr(model, "strategy", None)
    if strategy is not None:  # splat-plus: its strategy and its gradient averaging
        from splatbench.runtime import gradient_averaging

        timer.patch(gradient_averaging, "average_gradients", "    average_gradients")
        for attr in ("step_pre_backward", "step_post_backward", "_update_state", "_observe_step", "_flush", "_refine"):
            timer.wrap_attr(strategy, attr, f"    strategy.{attr}")
    for callback in trainer.callbacks:
        func = callback.func
        label = getattr(func, "__qualname__", repr(func))
        callback.func = timer.wrap(f"  callback {label}", func)
    # between iterations: nerfstudio's writer module functions as the trainer module sees them (restored after)
    writer = ns_trainer_module.writer
    for attr in ("put_time", "put_scalar", "put_dict", "write_out_storage"):
        timer.patch(writer, attr, f"between: writer.{attr}")
    timer.wrap_attr(trainer, "_update_viewer_state", "between: _update_viewer_state")
    timer.wrap_attr(trainer, "eval_iteration", "between: eval_iteration")
    timer.wrap_attr(trainer, "save_checkpoint", "between: save_checkpoint")

    state = {"last_begin": None}

    def begin(step: int) -> None:
        now = time.perf_counter()
        if timer.counting and state["last_begin"] is not None:
            timer.totals["whole loop period"] += now - state["last_begin"]
            timer.steps += 1
        timer.counting = step >= skip
        timer.iterations += int(timer.counting)
        state["last_begin"] = now if timer.counting else None

    trainer.callbacks.insert(0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], begin))
    gc.callbacks.append(timer.gc_callback)
    if gc_freeze:
        gc.collect()
        gc.freeze()
    return timer


def write_report(timer: SectionTimer, out: Path, rank: int, meta: Dict[str, Any]) -> Dict[str, Any]:
    """OUT/profile.rank<k>.json and a table on stdout (ms per counted step)."""
    # the loop period per counted period; every section per counted iteration (the sections of the
    # last iteration are counted, its period is not: one denominator for both overstated the sections)
    periods, iterations = max(1, timer.steps), max(1, timer.iterations)
    rows = {
        name: {"ms_per_step": 1e3 * total / (periods if name == "whole loop period" else iterations), "calls": timer.calls[name]}
        for name, total in timer.totals.items()
    }  # fmt: skip
    rows["gc (python garbage collector)"] = {
        "ms_per_step": 1e3 * timer.gc_s / iterations,
        "calls": timer.gc_collections,
    }
    payload = {
        "rank": rank, "steps_counted": timer.steps, "iterations_counted": timer.iterations,
        "sync": timer.sync_device is not None, **meta, "sections": rows,
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / f"profile.rank{rank}.json").write_text(json.dumps(payload, indent=2))
    lines = [f"rank {rank}: {timer.steps} steps counted, sync={payload['sync']}, ms per step"]
    order = lambda kv: (not kv[0].startswith("whole"), kv[0].startswith("between"), -kv[1]["ms_per_step"])  # noqa: E731
    for name, row in sorted(rows.items(), key=order):
        lines.append(f"  {row['ms_per_step']:9.3f}  {name}  ({row['calls']} calls)")
    print("\n".join(lines), flush=True)
    return payload
