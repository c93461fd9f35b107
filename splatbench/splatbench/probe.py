"""THE trainer probe: measure one nerfstudio training or evaluation run from inside its own process.

    python -m splatbench.probe train METHOD [ns-train arguments...]
    python -m splatbench.probe eval --load-config CONFIG --output-path OUT.json
    torchrun --nproc-per-node W -m splatbench.probe train splat-plus ...

Entry points: :func:`main` (the command line above), :func:`run_train` / :func:`run_eval` (in-process,
what scripts/profile_step.py calls), :class:`ProbeTrainerFactory` (the trainer target it installs).

``train`` parses its arguments exactly like ``ns-train`` (tyro over nerfstudio's
``AnnotatedBaseConfigUnion``) and calls nerfstudio's own ``ns-train`` main, with one change: the
config's trainer target becomes a subclass of the method's own trainer class that records, around
each training iteration (from the first before-iteration callback to the last after-iteration
callback, so densification is inside and in-training evaluation, checkpoints and logging are
outside), the host time, CUDA events (no synchronisation inside the loop), the peak device memory
(reset before, read after) and the Gaussian count (:mod:`.recorder`). Options
(:class:`~.options.ProbeOptions`, from environment variables or passed in) add: GPU busy time over a
window of steps (:mod:`.gpu_busy`), splat-plus's instrumentation toggled every N steps, training and
in-training evaluation memory in separate windows (splat-plus's memory tracker), per-section host
timers (:mod:`.sections`). ``eval`` runs nerfstudio's ``ns-eval`` main (``ComputePSNR``: :func:`compute_psnr`) with the
device memory peak reset before loading and read after, and each held-out image's metrics recorded
(:mod:`.per_image`). nerfstudio's code is used as it is (the probe is a subclass of the method's own
trainer), so any nerfstudio method (splatfacto included) is measured the same way; only the sections
option patches module-level functions (nerfstudio's writer functions) for the duration of the run, and
restores them (:mod:`.sections`).

The measurements go to the JSON file named by ``$NS_SPLAT_PLUS_BENCH_OUT`` (rank k > 0 adds
``.rankK`` before the suffix); without it, to ``benchmark_probe_{train,eval}.json`` in the run
directory (train) or beside the ns-eval output (eval).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from splatbench.options import PROGRESS_PREFIX, TOGGLE_ENV, ProbeOptions
from splatbench.per_image import record_per_image
from splatbench.recorder import (
    StepRecorder,
    environment_info,
    global_rank,
    host_peak_rss_bytes,
    probe_output_path,
    world_size,
)

_PROBE_CLASSES: Dict[type, type] = {}


def probe_trainer_class(base: type) -> type:
    """A subclass of the trainer class ``base`` that records every training iteration."""
    if base in _PROBE_CLASSES:
        return _PROBE_CLASSES[base]

    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
    from nerfstudio.utils.misc import step_check

    from splatbench.runtime import eval_due

    def callback(where, func) -> TrainingCallback:
        return TrainingCallback([where], func)

    class ProbeTrainer(base):  # type: ignore[misc, valid-type]
        bench_options: ProbeOptions = ProbeOptions()

        def setup(self, *args, **kwargs):
            super().setup(*args, **kwargs)
            options = self.bench_options
            device = torch.device(self.device)
            self.bench_sections = None
            if options.sections_out:
                from splatbench.sections import install_sections

                self.bench_sections = install_sections(
                    self, options.sections_skip, options.sections_sync, options.gc_freeze
                )
            self.bench_memory = None
            if options.eval_memory:  # splat-plus's tracker owns torch's peak counter: train / eval windows
                from splatbench.runtime import memory_tracker

                self.bench_memory = memory_tracker(device)
                self.bench_eval_peaks: List[Dict[str, Any]] = []
            max_steps = self.config.max_num_iterations
            self.bench_recorder = StepRecorder(
                device, self._bench_num_points, max_steps, reset_peaks=self.bench_memory is None
            )
            # First before-callback and last after-callback: the timed block is the whole iteration.
            before, after = (
                TrainingCallbackLocation.BEFORE_TRAIN_ITERATION,
                TrainingCallbackLocation.AFTER_TRAIN_ITERATION,
            )
            self.callbacks.insert(0, callback(before, self.bench_recorder.begin))
            self.callbacks.append(callback(after, self.bench_recorder.end))
            if self.bench_memory is not None:
                self.callbacks.insert(0, callback(before, self.bench_memory.start_training_window))
            self.bench_gpu_busy = None
            if options.gpu_busy_steps > 0 and options.gpu_busy_every > 0:
                from splatbench.gpu_busy import GpuBusySeries

                first = options.window_start(max_steps)
                first = first if first is not None else options.skip_steps
                self.bench_gpu_busy = GpuBusySeries(
                    device, options.gpu_busy_every, options.gpu_busy_steps, first, self._bench_num_points
                )
            elif options.gpu_busy_steps > 0:
                from splatbench.gpu_busy import GpuBusyWindow, default_window_start

                start = options.window_start(max_steps)
                if start is None:
                    start = default_window_start(options.skip_steps, max_steps, options.gpu_busy_steps)
                self.bench_gpu_busy = GpuBusyWindow(device, start, options.gpu_busy_steps)
            if self.bench_gpu_busy is not None:
                self.callbacks.insert(0, callback(before, self.bench_gpu_busy.begin))
                self.callbacks.append(callback(after, self.bench_gpu_busy.end))
            if options.toggle_every > 0:
                self.bench_recorder.mode_fn = self._bench_toggler(options.toggle_every)
            if options.stop_after_steps > 0:
                self.callbacks.append(callback(after, self._bench_stopper(options.stop_after_steps)))

        def _bench_stopper(self, steps: int) -> Callable[[int], None]:
            """Ends the process after ``steps`` training steps of the run, after splat-plus's warmup (whose steps
            and renders at the run's later sizes compile most of all): what they compiled is on disk by then,
            and nothing of the run is kept (no checkpoint, no probe JSON; the viewer and writers just stop)."""
            from ns_splat_plus.training.warmup import in_warmup

            done = [0]

            def stop(step: int) -> None:
                if in_warmup(self):
                    return
                done[0] += 1
                if done[0] < steps:
                    return
                if torch.device(self.device).type == "cuda":
                    torch.cuda.synchronize()  # the steps' kernels ran, not only were launched
                print(f"{PROGRESS_PREFIX} stopping after {steps} training step(s) at step {step}", flush=True)
                sys.stderr.flush()
                os._exit(0)

            return stop

        def _bench_toggler(self, every: int) -> Callable[[int], bool]:
            """Switches splat-plus's instrumentation (strategy records and optimizer checks, what
            ``--pipeline.model.instrumentation`` sets) on and off every ``every`` steps."""
            strategy = getattr(self.pipeline.model, "strategy", None)
            if (
                strategy is None
                or not hasattr(strategy, "instrumentation")
                or not hasattr(self.optimizers, "check_finite")
            ):
                raise SystemExit(f"{TOGGLE_ENV} needs splat-plus (a strategy and optimizers with instrumentation)")

            def mode(step: int) -> bool:
                on = (step // every) % 2 == 0
                strategy.instrumentation = on
                self.optimizers.check_finite = on
                return on

            return mode

        def _bench_num_points(self) -> Optional[int]:
            num_points = getattr(self.pipeline.model, "num_points", None)
            if isinstance(num_points, torch.Tensor):
                return int(num_points.item())
            return int(num_points) if num_points is not None else None

        def _bench_eval_due(self, step: int) -> bool:
            c = self.config
            return eval_due(self, step) and (c.is_tensorboard_enabled() or c.is_wandb_enabled() or c.is_comet_enabled())

        def eval_iteration(self, step: int) -> None:
            recorder = getattr(self, "bench_recorder", None)
            if recorder is None or not self._bench_eval_due(step):
                # nothing to evaluate: no peak-memory reset and read (~0.2 ms of host time per step on CUDA)
                return super().eval_iteration(step)
            memory = getattr(self, "bench_memory", None)
            if memory is not None:
                with memory.evaluating():
                    super().eval_iteration(step)
                if step_check(step, self.config.steps_per_eval_all_images):
                    self.bench_eval_peaks.append({"step": step, "peak_bytes": memory.last_eval_peak_bytes})
                return None
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
                self._bench_write(time.perf_counter() - start, error, start)

        def _bench_write(self, train_s: float, error: Optional[str], train_start_s: Optional[float] = None) -> None:
            recorder = getattr(self, "bench_recorder", None)
            rank = global_rank()
            payload: Dict[str, Any] = {
                "kind": "train",
                "method": self.config.method_name,
                "rank": rank,
                "world_size": world_size(),
                "max_num_iterations": self.config.max_num_iterations,
                "train_s": train_s,
                "train_start_s": train_start_s,  # perf_counter, the clock of the recorder's step times
                "warmup_s": getattr(
                    getattr(self, "warmup_result", None), "seconds", None
                ),  # splat-plus's, inside train()
                "error": error,
                "base_dir": str(self.base_dir),
                "host_peak_rss_bytes": host_peak_rss_bytes(),
                "final_gaussians": self._bench_num_points(),
                "environment": environment_info(torch.device(self.device)),
            }
            if recorder is not None:
                payload.update(recorder.as_dict())
            gpu_busy = getattr(self, "bench_gpu_busy", None)
            if gpu_busy is not None:
                try:
                    gpu_busy.finish()
                except RuntimeError as exc:  # a CUDA error ended the run: the windows closed so far stay
                    payload["gpu_busy_error"] = str(exc).splitlines()[0]
                # one window: "gpu_busy" (the benchmark's figure); a series: "gpu_busy_series"
                payload["gpu_busy_series" if hasattr(gpu_busy, "windows") else "gpu_busy"] = gpu_busy.as_dict()
            memory = getattr(self, "bench_memory", None)
            if memory is not None:
                memory.observe_training()
                payload["eval_memory"] = {
                    "device": str(self.device),
                    "memory": memory.as_dict(),
                    "all_images_eval_peaks": self.bench_eval_peaks,
                    "num_eval_images": len(self.pipeline.datamanager.eval_dataset),
                }
                peaks = [
                    v for v in (payload.get("process_peak_bytes"), memory.train_peak_bytes, memory.eval_peak_bytes) if v
                ]
                payload["process_peak_bytes"] = max(peaks) if peaks else payload.get("process_peak_bytes")
            path = probe_output_path(Path(self.base_dir) / "benchmark_probe_train.json", rank)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(payload), "utf8")
            sections = getattr(self, "bench_sections", None)
            if sections is not None:
                from splatbench.sections import write_report

                meta = {
                    "train_s": train_s,
                    "args": self.bench_options.train_args,
                    "gc_freeze": self.bench_options.gc_freeze,
                }
                try:
                    write_report(sections, Path(self.bench_options.sections_out), rank, meta)
                finally:
                    sections.restore()  # the writer functions and average_gradients it patched

    ProbeTrainer.__name__ = ProbeTrainer.__qualname__ = f"Probe{base.__name__}"
    _PROBE_CLASSES[base] = ProbeTrainer
    return ProbeTrainer


class ProbeTrainerFactory:
    """Stands in for a TrainerConfig's ``_target``: builds the probe subclass of the real trainer.

    An instance (not a dynamically made class) so that the config still pickles for
    ``--machine.num-devices N`` (``mp.spawn``) and still dumps to config.yml; the options travel with it.
    """

    def __init__(self, base: type, options: Optional[ProbeOptions] = None) -> None:
        self.base = base
        self.options = options if options is not None else ProbeOptions()

    def __call__(self, *args, **kwargs):
        trainer = probe_trainer_class(self.base)(*args, **kwargs)
        trainer.bench_options = self.options
        return trainer

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProbeTrainerFactory) and other.base is self.base and other.options == self.options

    def __hash__(self) -> int:
        return hash(self.base)

    def __repr__(self) -> str:
        return f"ProbeTrainerFactory({self.base.__module__}.{self.base.__qualname__})"


def instrument_config(config, options: Optional[ProbeOptions] = None):
    """The parsed ns-train config, with its trainer target swapped for the recording subclass."""
    if isinstance(config._target, ProbeTrainerFactory):
        if options is not None:
            config._target.options = options
    else:
        config._target = ProbeTrainerFactory(config._target, options)
    return config


def run_train(argv: List[str], options: Optional[ProbeOptions] = None) -> None:
    """ns-train's main on ``argv`` (``METHOD [arguments]``) with the probe trainer; options default
    to the environment's (:meth:`ProbeOptions.from_env`)."""
    # the command line ns-train would have: plugins decide from it at import what a run of theirs gets
    # (splat-plus: its excepthook, its quick listing of nerfstudio's external methods)
    sys.argv = ["ns-train", *argv]
    import tyro
    from nerfstudio.configs.config_utils import convert_markup_to_ansi
    from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion
    from nerfstudio.scripts import train as ns_train

    options = options if options is not None else ProbeOptions.from_env()
    options.train_args = list(argv)
    config = tyro.cli(AnnotatedBaseConfigUnion, args=argv, description=convert_markup_to_ansi(ns_train.__doc__))
    ns_train.main(instrument_config(config, options))


def _peaks_seen_by_method_tracker(device: torch.device) -> Optional[int]:
    """Peaks that splat-plus's own memory tracker folded away before resetting torch's counter.

    torch has one peak counter per device. splat-plus's evaluation resets it when evaluation
    starts (after folding the peak so far, here the model loading, into its tracker), so the
    counter read after ns-eval covers only the evaluation itself; the tracker holds the rest.
    Methods that never reset the counter (splatfacto, which loads no splat-plus module) need nothing.
    """
    loaded = [m for m in sys.modules if m.startswith("ns_splat_plus.")]
    if not loaded:
        return None
    from splatbench.runtime import memory_tracker

    tracker = memory_tracker(device)
    values = [getattr(tracker, name, None) for name in ("train_peak_bytes", "eval_peak_bytes")]
    values = [v for v in values if isinstance(v, int)]
    return max(values) if values else None


def compute_psnr(command) -> List[Dict[str, Any]]:
    """nerfstudio 1.1.5's ``ComputePSNR.main`` (``ns-eval``: the same JSON), with every eval image's
    metrics recorded on the loaded model (:func:`~.per_image.record_per_image`) and returned."""
    from nerfstudio.utils.eval_utils import eval_setup
    from nerfstudio.utils.rich_utils import CONSOLE

    config, pipeline, checkpoint_path, _ = eval_setup(command.load_config)
    per_image = record_per_image(pipeline.model, pipeline.datamanager.eval_dataset.image_filenames)
    assert command.output_path.suffix == ".json"
    if command.render_output_path is not None:
        command.render_output_path.mkdir(parents=True, exist_ok=True)
    metrics_dict = pipeline.get_average_eval_image_metrics(output_path=command.render_output_path, get_std=True)
    command.output_path.parent.mkdir(parents=True, exist_ok=True)
    benchmark_info = {
        "experiment_name": config.experiment_name,
        "method_name": config.method_name,
        "checkpoint": str(checkpoint_path),
        "results": metrics_dict,
    }
    command.output_path.write_text(json.dumps(benchmark_info, indent=2), "utf8")
    CONSOLE.print(f"Saved results to: {command.output_path}")
    return per_image


def run_eval(argv: List[str]) -> None:
    sys.argv = ["ns-eval", *argv]  # as in run_train
    import tyro
    from nerfstudio.scripts.eval import ComputePSNR

    command = tyro.cli(ComputePSNR, args=argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # what ns-eval's eval_setup picks
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    per_image = compute_psnr(command)
    eval_s = time.perf_counter() - start
    peak = None
    if cuda:
        peak = max(torch.cuda.max_memory_allocated(device), _peaks_seen_by_method_tracker(device) or 0)
    payload = {
        "kind": "eval",
        "eval_s": eval_s,
        "eval_peak_bytes": peak,
        "host_peak_rss_bytes": host_peak_rss_bytes(),
        "per_image": per_image,
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
    # splatbench.probe (loadable by ns-eval) rather than __main__.
    from splatbench.probe import main as _module_main

    _module_main()
