"""What the trainer probe measures, and how a parent process tells it: environment variables.

Entry point: :meth:`ProbeOptions.from_env` (the probe, in the training process) and
:meth:`ProbeOptions.env` (the benchmark, for its child processes). No torch, no nerfstudio here, so
the benchmark's parent process can import it cheaply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

PROBE_OUT_ENV = "NS_SPLAT_PLUS_BENCH_OUT"
"""The probe's JSON output (rank k > 0 adds ``.rankK`` before the suffix)."""
SAFE_PATH_ENV = {"PYTHONSAFEPATH": "1"}
"""Every probe process gets this. A probe stands in for ns-train, whose console script never puts the working
directory on sys.path; ``python -m`` does, so a probe started from a checkout would train (and hash) the
checkout's ns_splat_plus rather than the installed one the benchmark measures. Python >= 3.11 honours it."""
TOGGLE_ENV = "NS_SPLAT_PLUS_TOGGLE_INSTRUMENTATION"
"""N > 0: splat-plus's instrumentation is switched on for N steps, off for N steps, and so on, in
one run (each step's mode is recorded): its cost measured on one training trajectory."""
GPU_BUSY_STEPS_ENV = "NS_SPLAT_PLUS_BENCH_GPU_BUSY_STEPS"
"""N > 0: torch.profiler (CUDA activity only) over N training steps: GPU busy time per step."""
GPU_BUSY_START_ENV = "NS_SPLAT_PLUS_BENCH_GPU_BUSY_START"
"""First profiled step (default: the window centred on the timed steps, never before the skip)."""
GPU_BUSY_AT_ENV = "NS_SPLAT_PLUS_BENCH_GPU_BUSY_AT"
"""0 <= F < 1 (instead of a start step): the window starts at F x the run's own step count, after any
schedule scaling (``splat-plus-fast`` trains a quarter of the steps): comparable phases of runs of
different lengths."""
GPU_BUSY_EVERY_ENV = "NS_SPLAT_PLUS_BENCH_GPU_BUSY_EVERY"
"""N > 0 (with GPU_BUSY_STEPS): a profiled window every N steps instead of one: GPU busy time along
the run, each window with the Gaussian count it saw (scripts/gaussian_scaling.py)."""
SKIP_ENV = "NS_SPLAT_PLUS_BENCH_SKIP_STEPS"
"""Steps the benchmark leaves out of its statistics (the GPU-busy window starts after them)."""
EVAL_MEMORY_ENV = "NS_SPLAT_PLUS_BENCH_EVAL_MEMORY"
"""1: peak device memory of training and of in-training evaluation in separate windows
(splat-plus's memory tracker; used by scripts/measure_eval_memory.py)."""
STOP_AFTER_STEPS_ENV = "NS_SPLAT_PLUS_BENCH_STOP_AFTER_STEPS"
"""N > 0: the process ends right after its N-th training step, writing nothing more (the benchmark's
--warm-caches runs: start-up, warmup at every image size and the first steps compile what later runs load
from disk)."""
PROGRESS_PREFIX = "[bench]"
OPTION_ENVS = (
    TOGGLE_ENV,
    GPU_BUSY_STEPS_ENV,
    GPU_BUSY_START_ENV,
    GPU_BUSY_AT_ENV,
    GPU_BUSY_EVERY_ENV,
    SKIP_ENV,
    EVAL_MEMORY_ENV,
    STOP_AFTER_STEPS_ENV,
)


def _int_env(name: str, default: int = 0) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


@dataclass
class ProbeOptions:
    """Optional measurements of the probe trainer (all off by default: step times, memory, Gaussians only)."""

    toggle_every: int = 0
    gpu_busy_steps: int = 0
    gpu_busy_start: Optional[int] = None
    gpu_busy_at: Optional[float] = None  # fraction of the run's steps where the window starts
    gpu_busy_every: int = 0
    skip_steps: int = 0
    eval_memory: bool = False
    stop_after_steps: int = 0
    # per-section host timers (scripts/profile_step.py): the folder for profile.rank<k>.json, or None
    sections_out: Optional[str] = None
    sections_skip: int = 200
    sections_sync: bool = False
    gc_freeze: bool = False
    train_args: List[str] = field(default_factory=list)

    def window_start(self, max_steps: int) -> Optional[int]:
        """The first profiled step for a run of ``max_steps``: the start step, else the fraction, else None."""
        if self.gpu_busy_start is not None:
            return self.gpu_busy_start
        if self.gpu_busy_at is not None:
            return int(self.gpu_busy_at * max_steps)
        return None

    @classmethod
    def from_env(cls) -> "ProbeOptions":
        start = os.environ.get(GPU_BUSY_START_ENV, "").strip()
        at = os.environ.get(GPU_BUSY_AT_ENV, "").strip()
        return cls(
            toggle_every=_int_env(TOGGLE_ENV),
            gpu_busy_steps=_int_env(GPU_BUSY_STEPS_ENV),
            gpu_busy_start=int(start) if start else None,
            gpu_busy_at=float(at) if at else None,
            gpu_busy_every=_int_env(GPU_BUSY_EVERY_ENV),
            skip_steps=_int_env(SKIP_ENV),
            eval_memory=_int_env(EVAL_MEMORY_ENV) > 0,
            stop_after_steps=_int_env(STOP_AFTER_STEPS_ENV),
        )

    def env(self) -> Dict[str, str]:
        """The environment variables that make a child probe use these options (not the sections)."""
        out = {}
        if self.toggle_every:
            out[TOGGLE_ENV] = str(self.toggle_every)
        if self.gpu_busy_steps:
            out[GPU_BUSY_STEPS_ENV] = str(self.gpu_busy_steps)
        if self.gpu_busy_start is not None:
            out[GPU_BUSY_START_ENV] = str(self.gpu_busy_start)
        if self.gpu_busy_at is not None:
            out[GPU_BUSY_AT_ENV] = repr(float(self.gpu_busy_at))
        if self.gpu_busy_every:
            out[GPU_BUSY_EVERY_ENV] = str(self.gpu_busy_every)
        if self.skip_steps:
            out[SKIP_ENV] = str(self.skip_steps)
        if self.eval_memory:
            out[EVAL_MEMORY_ENV] = "1"
        if self.stop_after_steps:
            out[STOP_AFTER_STEPS_ENV] = str(self.stop_after_steps)
        return out
