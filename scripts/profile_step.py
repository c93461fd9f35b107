#!/usr/bin/env python3
"""Where the time of one training step goes: a per-section breakdown of real ns-train runs.

    python scripts/profile_step.py --out /tmp/prof/on -- splat-plus --max-num-iterations 3000 \\
        --vis tensorboard --data ../shared/data/fox instant-ngp-data
    torchrun --nproc-per-node 2 scripts/profile_step.py --out /tmp/prof/w2 -- splat-plus ...
    python scripts/profile_step.py --sync ...    # synchronise the GPU around every section

Everything after ``--`` is parsed exactly like ``ns-train`` arguments. The run is nerfstudio's own
loop; this wraps, on the built trainer's instances (nothing in nerfstudio is patched), the pieces of
an iteration with host timers: the data loader, model forward, losses, optimizer step (gradient
averaging and finiteness check inside), every training callback (densification included), and the
writer / viewer work between iterations, plus Python's garbage collector. Without ``--sync`` a
section's time is what the host spends launching it (waiting only where the code itself
synchronises); with ``--sync`` it includes the GPU work. Steps before ``--skip`` are not counted.

Writes OUT/profile.rank<k>.json and prints a table (ms per counted step) on every rank.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch


class SectionTimer:
    """Accumulates host time per named section while ``counting`` is on."""

    def __init__(self, sync_device: Any = None) -> None:
        self.sync_device = sync_device
        self.totals: Dict[str, float] = defaultdict(float)
        self.calls: Dict[str, int] = defaultdict(int)
        self.counting = False
        self.steps = 0
        self.gc_s = 0.0
        self.gc_collections = 0
        self._gc_started = None

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

    def gc_callback(self, phase: str, info: Dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            if self.counting:
                self.gc_s += time.perf_counter() - self._gc_started
                self.gc_collections += 1
            self._gc_started = None


def _install(trainer, timer: SectionTimer, skip: int) -> None:
    from nerfstudio.engine import trainer as ns_trainer_module
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    import ns_splat_plus.distributed as distributed

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
    distributed.average_gradients = timer.wrap("    average_gradients", distributed.average_gradients)
    strategy = getattr(model, "strategy", None)
    if strategy is not None:
        for attr in ("step_pre_backward", "step_post_backward", "_update_state", "_observe_step", "_flush", "_refine"):
            timer.wrap_attr(strategy, attr, f"    strategy.{attr}")
    for callback in trainer.callbacks:
        func = callback.func
        label = getattr(func, "__qualname__", repr(func))
        callback.func = timer.wrap(f"  callback {label}", func)
    # between iterations: nerfstudio's writer module functions as the trainer module sees them
    writer = ns_trainer_module.writer
    for attr in ("put_time", "put_scalar", "put_dict", "write_out_storage"):
        setattr(writer, attr, timer.wrap(f"between: writer.{attr}", getattr(writer, attr)))
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
        state["last_begin"] = now if timer.counting else None

    trainer.callbacks.insert(0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], begin))


def _report(timer: SectionTimer, out: Path, rank: int, meta: Dict[str, Any]) -> None:
    steps = max(1, timer.steps)
    rows = {name: {"ms_per_step": 1e3 * total / steps, "calls": timer.calls[name]} for name, total in timer.totals.items()}
    rows["gc (python garbage collector)"] = {"ms_per_step": 1e3 * timer.gc_s / steps, "calls": timer.gc_collections}
    payload = {"rank": rank, "steps_counted": timer.steps, "sync": timer.sync_device is not None, **meta, "sections": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"profile.rank{rank}.json").write_text(json.dumps(payload, indent=2))
    lines = [f"rank {rank}: {timer.steps} steps counted, sync={payload['sync']}, ms per step"]
    for name, row in sorted(rows.items(), key=lambda kv: (not kv[0].startswith("whole"), kv[0].startswith("between"), -kv[1]["ms_per_step"])):
        lines.append(f"  {row['ms_per_step']:9.3f}  {name}  ({row['calls']} calls)")
    print("\n".join(lines), flush=True)


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__)
        raise SystemExit(2)
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip", type=int, default=200, help="first steps left out")
    parser.add_argument("--sync", action="store_true", help="synchronise the GPU around every section")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() before training (what-if)")
    args = parser.parse_args(argv[:split])

    import tyro
    from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion
    from nerfstudio.scripts import train as ns_train

    config = tyro.cli(AnnotatedBaseConfigUnion, args=argv[split + 1 :])
    base_target = config._target

    class ProfiledTrainerFactory:
        def __call__(self, *a, **kw):
            trainer = base_target(*a, **kw)
            original_setup = trainer.setup

            def setup(*sa, **skw):
                original_setup(*sa, **skw)
                device = torch.device(trainer.device)
                timer = SectionTimer(device if (args.sync and device.type == "cuda") else None)
                _install(trainer, timer, args.skip)
                gc.callbacks.append(timer.gc_callback)
                if args.gc_freeze:
                    gc.collect()
                    gc.freeze()
                original_train = trainer.train

                def train():
                    started = time.perf_counter()
                    try:
                        original_train()
                    finally:
                        rank = int(os.environ.get("RANK", getattr(trainer, "rank", 0) or 0))
                        meta = {"train_s": time.perf_counter() - started, "args": argv[split + 1 :], "gc_freeze": args.gc_freeze}
                        _report(timer, args.out, rank, meta)

                trainer.train = train

            trainer.setup = setup
            return trainer

    config._target = ProfiledTrainerFactory()
    ns_train.main(config)


if __name__ == "__main__":
    main()
