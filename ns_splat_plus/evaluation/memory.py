"""Peak device memory of training and of evaluation, kept apart: :func:`memory_tracker`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

import torch
from nerfstudio.utils import writer

MIB = 1024**2


class PeakMemoryTracker:
    """Peak device memory of training and of evaluation, kept apart.

    torch keeps one peak counter per device. Entering evaluation folds the counter into the
    training peak and resets it; leaving it reads the evaluation peak; the first training
    iteration after an evaluation resets it again (``start_training_window``, a pipeline
    callback). Not resetting on the way out leaves the eval peak readable by an outer harness
    that reads the counter after ``eval_iteration`` (scripts/measure_eval_memory.py, splatbench.probe).
    Nested ``evaluating()`` blocks count once, at the outermost level. Off the GPU all values are None.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.enabled = device.type == "cuda" and torch.cuda.is_available()
        self.train_peak_bytes: Optional[int] = None
        self.eval_peak_bytes: Optional[int] = None  # max over all evaluations
        self.last_eval_peak_bytes: Optional[int] = None
        self.num_evaluations = 0
        self._depth = 0
        self._counter_has_eval = False  # the counter still holds an evaluation's peak

    def observe_training(self) -> Optional[int]:
        """Fold the counter into the training peak, unless it holds an evaluation's peak."""
        if not self.enabled or self._depth > 0 or self._counter_has_eval:
            return self.train_peak_bytes
        peak = torch.cuda.max_memory_allocated(self.device)
        self.train_peak_bytes = max(self.train_peak_bytes or 0, peak)
        return self.train_peak_bytes

    def start_training_window(self, step: Optional[int] = None) -> None:
        """Before a training iteration: drop an evaluation's peak from the counter (cheap otherwise)."""
        if self._counter_has_eval and self._depth == 0:
            torch.cuda.reset_peak_memory_stats(self.device)
            self._counter_has_eval = False

    @contextmanager
    def evaluating(self) -> Iterator["PeakMemoryTracker"]:
        if not self.enabled or self._depth > 0:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        torch.cuda.synchronize(self.device)
        self.observe_training()
        torch.cuda.reset_peak_memory_stats(self.device)
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            self.last_eval_peak_bytes = peak
            self.eval_peak_bytes = max(self.eval_peak_bytes or 0, peak)
            self.num_evaluations += 1
            self._counter_has_eval = True

    def as_dict(self, train_peak_bytes: Optional[int] = None) -> Dict[str, Any]:
        """JSON-ready summary; ``train_peak_bytes`` overrides (e.g. the value a checkpoint recorded)."""
        train = train_peak_bytes if train_peak_bytes is not None else self.train_peak_bytes
        return {
            "device": str(self.device),
            "train_peak_bytes": train,
            "eval_peak_bytes": self.eval_peak_bytes,
            "train_peak_mib": round(train / MIB, 1) if train is not None else None,
            "eval_peak_mib": round(self.eval_peak_bytes / MIB, 1) if self.eval_peak_bytes is not None else None,
            "eval_peak_le_train_peak": (self.eval_peak_bytes <= train)
            if (train is not None and self.eval_peak_bytes is not None)
            else None,
            "num_evaluations": self.num_evaluations,
            "measure": "torch.cuda.max_memory_allocated, reset at every train/eval boundary" if self.enabled else None,
        }

    def log(self, step: int) -> None:
        """Write both peaks through nerfstudio's writer (tensorboard / wandb / comet)."""
        if not self.enabled:
            return
        if self.train_peak_bytes is not None:
            writer.put_scalar(name="Memory/train_peak_MiB", scalar=self.train_peak_bytes / MIB, step=step)
        if self.last_eval_peak_bytes is not None:
            writer.put_scalar(name="Memory/eval_peak_MiB", scalar=self.last_eval_peak_bytes / MIB, step=step)


_TRACKERS: Dict[str, PeakMemoryTracker] = {}


def _device_key(device) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def memory_tracker(device) -> PeakMemoryTracker:
    """The tracker of ``device`` (one per device, as torch's peak counter is) for the current run."""
    device = _device_key(device)
    key = str(device)
    if key not in _TRACKERS:
        _TRACKERS[key] = PeakMemoryTracker(device)
    return _TRACKERS[key]


def start_run(device) -> PeakMemoryTracker:
    """A fresh tracker of ``device`` for a run that starts now, with torch's peak counter reset: a
    second run in one process (a notebook, a test session, the benchmark probe) reports its own peaks,
    not the largest of every run before it. Called when a trainer is set up."""
    device = _device_key(device)
    tracker = PeakMemoryTracker(device)
    if tracker.enabled:
        torch.cuda.reset_peak_memory_stats(device)
    _TRACKERS[str(device)] = tracker
    return tracker
