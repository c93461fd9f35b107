"""Per-iteration measurements inside the training process, for the trainer probe (:mod:`.probe`).

Entry point: :class:`StepRecorder` (host times, CUDA events, device-memory peaks, Gaussian counts per
iteration), plus the helpers the probe writes its JSON with (:func:`environment_info`, with
:func:`package_source_digest`, :func:`probe_output_path`, :func:`global_rank`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import resource
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from splatbench.options import PROBE_OUT_ENV, PROGRESS_PREFIX
from splatbench.settings import SOURCE_DIGEST_KEY


def source_tree_digest(root: Path) -> str:
    """12 hex digits of SHA-256 over every ``*.py`` file under ``root`` (relative path and bytes, in
    path order). Sources only: caches and build outputs differ between machines, the code does not. An
    installed copy and the checkout it came from give the same digest, so runs of the same code on
    different machines agree, and a merge can tell runs of two versions apart (:mod:`.merge`)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def package_source_digest(package: str) -> Optional[str]:
    """:func:`source_tree_digest` of an importable package's folder, found without importing it (None if absent)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return source_tree_digest(Path(next(iter(spec.submodule_search_locations))))


def bytecode_cached(module: str = "nerfstudio") -> Optional[bool]:
    """Whether ``module``'s compiled bytecode is on disk where this Python reads it (None: not installed).

    Without it (``PYTHONDONTWRITEBYTECODE=1`` and a ``pip install --no-compile``, as on the lent GPU
    machines) every process compiles the sources it imports: about 10 s of each ns-train start-up there
    (benchmarks/2026-11-28-h200x4-startup-and-scaling), which a user's installation does not pay."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(importlib.util.cache_from_source(spec.origin)).is_file()


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
        SOURCE_DIGEST_KEY: package_source_digest("ns_splat_plus"),
        "bytecode_cached": bytecode_cached(),
        "device_type": device.type if device is not None else None,
        "device_name": None,
    }
    if device is not None and device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    elif device is not None:
        info["device_name"] = "cpu"
    return info


def global_rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def probe_output_path(default: Path, rank: int = 0) -> Path:
    path = Path(os.environ.get(PROBE_OUT_ENV, str(default)))
    if rank > 0:
        path = path.with_name(f"{path.stem}.rank{rank}{path.suffix}")
    return path


def host_peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class StepRecorder:
    """Per-iteration host times, CUDA events, device memory peaks and Gaussian counts.

    ``reset_peaks=False`` leaves torch's peak counter alone (another tracker owns it): no per-step peaks.
    """

    def __init__(self, device: torch.device, num_points_fn, max_steps: int, reset_peaks: bool = True) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.reset_peaks = reset_peaks and self.cuda
        self.num_points_fn = num_points_fn
        self.max_steps = max_steps
        self.progress_every = max(1, max_steps // 10)
        self.steps: List[int] = []
        self.begin_host: List[float] = []
        self.end_host: List[float] = []
        self.begin_events: List[Any] = []
        self.end_events: List[Any] = []
        self.peak_bytes: List[Optional[int]] = []
        # reserved by the caching allocator, CUDA graphs' private pools included: a replay's tensors live in its
        # pool, which max_memory_allocated does not see after the recording
        self.reserved_peak_bytes: List[Optional[int]] = []
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
                           self.peak_bytes, self.reserved_peak_bytes, self.gaussians, self.modes):  # fmt: skip
                del values[keep:]
        if self.reset_peaks:
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
        peak = torch.cuda.max_memory_allocated(self.device) if self.reset_peaks else None
        self.peak_bytes.append(peak)
        self.reserved_peak_bytes.append(torch.cuda.max_memory_reserved(self.device) if self.reset_peaks else None)
        if peak is not None:
            self.process_peak_bytes = max(self.process_peak_bytes or 0, peak)
        self.gaussians.append(self.num_points_fn())
        if (step + 1) % self.progress_every == 0 and global_rank() == 0:
            print(f"{PROGRESS_PREFIX} step {step + 1}/{self.max_steps}{self._time_left(step)}", flush=True)

    def _time_left(self, step: int) -> str:
        """' (~N s of steps left)' at the pace of the steps so far (first step excluded: its set-up), so that
        whoever waits on concurrent runs can stop them early when they will not end in time."""
        if len(self.end_host) < 3:
            return ""
        pace = (self.end_host[-1] - self.end_host[0]) / (len(self.end_host) - 1)
        return f" (~{pace * max(0, self.max_steps - (step + 1)):.0f} s of steps left)"

    def eval_begin(self) -> None:
        if self.reset_peaks:
            torch.cuda.reset_peak_memory_stats(self.device)

    def eval_end(self) -> None:
        if self.reset_peaks:
            peak = torch.cuda.max_memory_allocated(self.device)
            self.eval_peak_bytes = max(self.eval_peak_bytes or 0, peak)
            self.process_peak_bytes = max(self.process_peak_bytes or 0, peak)

    def as_dict(self) -> Dict[str, Any]:
        n = min(len(self.steps), len(self.begin_host), len(self.end_host))
        gpu_span_ms = gpu_interval_ms = None
        device_error = None
        if self.cuda and n:
            try:
                torch.cuda.synchronize(self.device)
                gpu_span_ms = [self.begin_events[i].elapsed_time(self.end_events[i]) for i in range(n)]
                gpu_interval_ms = [self.begin_events[i].elapsed_time(self.begin_events[i + 1]) for i in range(n - 1)]
            except RuntimeError as exc:  # a CUDA error ended the run: keep the host-side record
                device_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return {
            "device_error": device_error,
            "steps": self.steps[:n],
            "host_begin_s": self.begin_host[:n],
            "host_end_s": self.end_host[:n],
            "gpu_span_ms": gpu_span_ms,
            "gpu_interval_ms": gpu_interval_ms,
            "peak_bytes": self.peak_bytes[:n],
            "reserved_peak_bytes": self.reserved_peak_bytes[:n],
            "gaussians": self.gaussians[:n],
            "setup_peak_bytes": self.setup_peak_bytes,
            "in_training_eval_peak_bytes": self.eval_peak_bytes,
            "process_peak_bytes": self.process_peak_bytes,
            "replayed_iterations": self.replayed_iterations,
            "instrumentation_modes": self.modes[:n] if self.mode_fn is not None else None,
        }
