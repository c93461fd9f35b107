"""Measure one nerfstudio training or evaluation run from inside its own process.

    python -m ns_splat_plus.bench_probe train METHOD [ns-train arguments...]
    python -m ns_splat_plus.bench_probe eval --load-config CONFIG --output-path OUT.json
    torchrun --nproc-per-node W -m ns_splat_plus.bench_probe train splat-plus ...

``train`` parses its arguments exactly like ``ns-train`` (tyro over nerfstudio's
``AnnotatedBaseConfigUnion``) and calls nerfstudio's own ``ns-train`` main, with one change: the
config's trainer target becomes a subclass of the method's own trainer class that records, around
each training iteration (from the first before-iteration callback to the last after-iteration
callback, so densification is inside and in-training evaluation, checkpoints and logging are
outside), the host time, CUDA events (no synchronisation inside the loop), the peak device memory
(reset before, read after) and the Gaussian count. ``eval`` runs nerfstudio's ``ns-eval`` main
(``ComputePSNR``) with the device memory peak reset before loading and read after. Nothing in
nerfstudio is patched, so any nerfstudio method (splatfacto included) is measured the same way.

The measurements go to the JSON file named by ``$NS_SPLAT_PLUS_BENCH_OUT`` (rank k > 0 adds
``.rankK`` before the suffix); without it, to ``benchmark_probe_{train,eval}.json`` in the run
directory (train) or beside the ns-eval output (eval).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

PROBE_OUT_ENV = "NS_SPLAT_PLUS_BENCH_OUT"
TOGGLE_ENV = "NS_SPLAT_PLUS_TOGGLE_INSTRUMENTATION"
"""N > 0: splat-plus's instrumentation is switched on for N steps, off for N steps, and so on, in
one run (each step's mode is recorded): its cost measured on one training trajectory."""
PROGRESS_PREFIX = "[bench]"


def environment_info(device: Optional[torch.device] = None) -> Dict[str, Any]:
    """Versions and the accelerator this process runs on (for the report header)."""

    def version(dist: str) -> Optional[str]:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    info: Dict[str, Any] = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nerfstudio": version("nerfstudio"),
        "gsplat": version("gsplat"),
        "ns-splat-plus": version("ns-splat-plus"),
        "device_type": device.type if device is not None else None,
        "device_name": None,
    }
    if device is not None and device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    elif device is not None:
        info["device_name"] = "cpu"
    return info


def _global_rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def probe_output_path(default: Path, rank: int = 0) -> Path:
    path = Path(os.environ.get(PROBE_OUT_ENV, str(default)))
    if rank > 0:
        path = path.with_name(f"{path.stem}.rank{rank}{path.suffix}")
    return path


def _host_peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class StepRecorder:
    """Per-iteration host times, CUDA events, device memory peaks and Gaussian counts."""

    def __init__(self, device: torch.device, num_points_fn, max_steps: int) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.num_points_fn = num_points_fn
        self.max_steps = max_steps
        self.progress_every = max(1, max_steps // 10)
        self.steps: List[int] = []
        self.begin_host: List[float] = []
        self.end_host: List[float] = []
        self.begin_events: List[Any] = []
        self.end_events: List[Any] = []
        self.peak_bytes: List[Optional[int]] = []
        self.gaussians: List[Optional[int]] = []
        self.modes: List[Optional[bool]] = []  # instrumentation on/off per step (toggle runs only)
        self.mode_fn: Optional[Callable[[int], Optional[bool]]] = None
        self.setup_peak_bytes = torch.cuda.max_memory_allocated(device) if self.cuda else None
        self.process_peak_bytes = self.setup_peak_bytes
        self.eval_peak_bytes: Optional[int] = None
        self._open_step: Optional[int] = None
        self.replayed_iterations = 0

    def _event(self):
        if not self.cuda:
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def begin(self, step: int) -> None:
        if self.steps and step <= self.steps[-1]:
            # The loop restarted at an earlier step (an in-process warmup replays steps before the
            # real step 0, then restores the state): keep only the real run's iterations.
            keep = next(i for i, s in enumerate(self.steps) if s >= step)
            self.replayed_iterations += len(self.steps) - keep
            for values in (self.steps, self.begin_host, self.end_host, self.begin_events, self.end_events,
                           self.peak_bytes, self.gaussians, self.modes):  # fmt: skip
                del values[keep:]
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        self._open_step = step
        self.modes.append(self.mode_fn(step) if self.mode_fn is not None else None)
        self.begin_host.append(time.perf_counter())
        self.begin_events.append(self._event())

    def end(self, step: int) -> None:
        if self._open_step != step:  # an after-callback without its before-callback: not a timed step
            return
        self._open_step = None
        self.end_events.append(self._event())
        self.end_host.append(time.perf_counter())
        self.steps.append(step)
        peak = torch.cuda.max_memory_allocated(self.device) if self.cuda else None
        self.peak_bytes.append(peak)
        if peak is not None:
            self.process_peak_bytes = max(self.process_peak_bytes or 0, peak)
        self.gaussians.append(self.num_points_fn())
        if (step + 1) % self.progress_every == 0 and _global_rank() == 0:
            print(f"{PROGRESS_PREFIX} step {step + 1}/{self.max_steps}", flush=True)

    def eval_begin(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def eval_end(self) -> None:
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device)
            self.eval_peak_bytes = max(self.eval_peak_bytes or 0, peak)
            self.process_peak_bytes = max(self.process_peak_bytes or 0, peak)

    def as_dict(self) -> Dict[str, Any]:
        n = min(len(self.steps), len(self.begin_host), len(self.end_host))
        gpu_span_ms = gpu_interval_ms = None
        if self.cuda and n:
            torch.cuda.synchronize(self.device)
            gpu_span_ms = [self.begin_events[i].elapsed_time(self.end_events[i]) for i in range(n)]
            gpu_interval_ms = [self.begin_events[i].elapsed_time(self.begin_events[i + 1]) for i in range(n - 1)]
        return {
            "steps": self.steps[:n],
            "host_begin_s": self.begin_host[:n],
            "host_end_s": self.end_host[:n],
            "gpu_span_ms": gpu_span_ms,
            "gpu_interval_ms": gpu_interval_ms,
            "peak_bytes": self.peak_bytes[:n],
            "gaussians": self.gaussians[:n],
            "setup_peak_bytes": self.setup_peak_bytes,
            "in_training_eval_peak_bytes": self.eval_peak_bytes,
            "process_peak_bytes": self.process_peak_bytes,
            "replayed_iterations": self.replayed_iterations,
            "instrumentation_modes": self.modes[:n] if self.mode_fn is not None else None,
        }


_PROBE_CLASSES: Dict[type, type] = {}


def probe_trainer_class(base: type) -> type:
    """A subclass of the trainer class ``base`` that records every training iteration."""
    if base in _PROBE_CLASSES:
        return _PROBE_CLASSES[base]

    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    class ProbeTrainer(base):  # type: ignore[misc, valid-type]
        def setup(self, *args, **kwargs):
            super().setup(*args, **kwargs)
            device = torch.device(self.device)
            self.bench_recorder = StepRecorder(device, self._bench_num_points, self.config.max_num_iterations)
            # First before-callback and last after-callback: the timed block is the whole iteration.
            self.callbacks.insert(
                0,
                TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], self.bench_recorder.begin),
            )
            self.callbacks.append(
                TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], self.bench_recorder.end)
            )
            toggle_every = int(os.environ.get(TOGGLE_ENV, "0") or 0)
            if toggle_every > 0:
                self.bench_recorder.mode_fn = self._bench_toggler(toggle_every)

        def _bench_toggler(self, every: int) -> Callable[[int], bool]:
            """Switches splat-plus's instrumentation (strategy records and optimizer checks, what
            ``--pipeline.model.instrumentation`` sets) on and off every ``every`` steps."""
            strategy = getattr(self.pipeline.model, "strategy", None)
            if strategy is None or not hasattr(strategy, "instrumentation") or not hasattr(self.optimizers, "check_finite"):
                raise SystemExit(f"{TOGGLE_ENV} needs splat-plus (a strategy and optimizers with instrumentation)")

            def mode(step: int) -> bool:
                on = (step // every) % 2 == 0
                strategy.instrumentation = on
                self.optimizers.check_finite = on
                return on

            return mode

        def _bench_num_points(self) -> Optional[int]:
            model = self.pipeline.model
            num_points = getattr(model, "num_points", None)
            if isinstance(num_points, torch.Tensor):
                return int(num_points.item())
            return int(num_points) if num_points is not None else None

        def eval_iteration(self, step: int) -> None:
            recorder = getattr(self, "bench_recorder", None)
            if recorder is None:
                return super().eval_iteration(step)
            recorder.eval_begin()
            try:
                return super().eval_iteration(step)
            finally:
                recorder.eval_end()

        def train(self) -> None:
            start = time.perf_counter()
            error: Optional[str] = None
            try:
                super().train()
            except BaseException as exc:
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self._bench_write(time.perf_counter() - start, error)

        def _bench_write(self, train_s: float, error: Optional[str]) -> None:
            recorder = getattr(self, "bench_recorder", None)
            rank = _global_rank()
            world_size = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
            payload: Dict[str, Any] = {
                "kind": "train",
                "method": self.config.method_name,
                "rank": rank,
                "world_size": world_size,
                "max_num_iterations": self.config.max_num_iterations,
                "train_s": train_s,
                "error": error,
                "base_dir": str(self.base_dir),
                "host_peak_rss_bytes": _host_peak_rss_bytes(),
                "final_gaussians": self._bench_num_points(),
                "environment": environment_info(torch.device(self.device)),
            }
            if recorder is not None:
                payload.update(recorder.as_dict())
            path = probe_output_path(Path(self.base_dir) / "benchmark_probe_train.json", rank)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(payload), "utf8")

    ProbeTrainer.__name__ = ProbeTrainer.__qualname__ = f"Probe{base.__name__}"
    _PROBE_CLASSES[base] = ProbeTrainer
    return ProbeTrainer


class ProbeTrainerFactory:
    """Stands in for a TrainerConfig's ``_target``: builds the probe subclass of the real trainer.

    An instance (not a dynamically made class) so that the config still pickles for
    ``--machine.num-devices N`` (``mp.spawn``) and still dumps to config.yml.
    """

    def __init__(self, base: type) -> None:
        self.base = base

    def __call__(self, *args, **kwargs):
        return probe_trainer_class(self.base)(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProbeTrainerFactory) and other.base is self.base

    def __hash__(self) -> int:
        return hash(self.base)

    def __repr__(self) -> str:
        return f"ProbeTrainerFactory({self.base.__module__}.{self.base.__qualname__})"


def instrument_config(config):
    """The parsed ns-train config, with its trainer target swapped for the recording subclass."""
    if not isinstance(config._target, ProbeTrainerFactory):
        config._target = ProbeTrainerFactory(config._target)
    return config


def run_train(argv: List[str]) -> None:
    import tyro
    from nerfstudio.configs.config_utils import convert_markup_to_ansi
    from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion
    from nerfstudio.scripts import train as ns_train

    config = tyro.cli(AnnotatedBaseConfigUnion, args=argv, description=convert_markup_to_ansi(ns_train.__doc__))
    ns_train.main(instrument_config(config))


def _peaks_seen_by_method_tracker(device: torch.device) -> Optional[int]:
    """Peaks that splat-plus's own memory tracker folded away before resetting torch's counter.

    torch has one peak counter per device. splat-plus's evaluation resets it when evaluation
    starts (after folding the peak so far, here the model loading, into its tracker), so the
    counter read after ns-eval covers only the evaluation itself; the tracker holds the rest.
    Methods that never reset the counter (splatfacto) need nothing from here.
    """
    module = sys.modules.get("ns_splat_plus.evaluation")
    if module is None or not hasattr(module, "memory_tracker"):
        return None
    tracker = module.memory_tracker(device)
    values = [getattr(tracker, name, None) for name in ("train_peak_bytes", "eval_peak_bytes")]
    values = [v for v in values if isinstance(v, int)]
    return max(values) if values else None


def run_eval(argv: List[str]) -> None:
    import tyro
    from nerfstudio.scripts.eval import ComputePSNR

    command = tyro.cli(ComputePSNR, args=argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # what ns-eval's eval_setup picks
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    command.main()
    eval_s = time.perf_counter() - start
    peak = None
    if cuda:
        peak = max(torch.cuda.max_memory_allocated(device), _peaks_seen_by_method_tracker(device) or 0)
    payload = {
        "kind": "eval",
        "eval_s": eval_s,
        "eval_peak_bytes": peak,
        "host_peak_rss_bytes": _host_peak_rss_bytes(),
        "output_path": str(command.output_path),
        "environment": environment_info(device),
    }
    path = probe_output_path(Path(command.output_path).with_name("benchmark_probe_eval.json"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload), "utf8")


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "eval"):
        print(__doc__)
        raise SystemExit(2)
    if argv[0] == "train":
        run_train(argv[1:])
    else:
        run_eval(argv[1:])


if __name__ == "__main__":
    # Run the imported module's main, so that the factory in config.yml names
    # ns_splat_plus.bench_probe (loadable by ns-eval) rather than __main__.
    from ns_splat_plus.bench_probe import main as _module_main

    _module_main()
