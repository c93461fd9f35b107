"""Once-per-process start-up work that needs no model and no photo, done on a side thread while the trainer sets
up: :func:`start_gpu_preload`, joined before the warmup with :meth:`GpuPreload.join`.

Why: the warmup's first step paid for it on the path to step 0. Profiled on an H200 (splat-plus-lite, plush-dog,
benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality, cProfile):
- Triton hashes its own installation (``triton_key``: its sources and its 508 MB library) before its first
  launch in a process: 0.43 s, mostly ``hashlib`` over file chunks, which runs without the GIL;
- the first camera's view matrix inverts on cuSOLVER (``model.cameras.view_matrices``), whose library loads
  on first use: 0.10-0.17 s.
Started when the trainer's set-up begins (the dataset, the model, the photos' decoding: 1.2-1.6 s on an H200
host), both are done before the warmup needs them: from the command line's end to the first step's end, median
3.32 s against 3.68 (plush-dog, lite, 4 runs each; benchmarks/2026-11-30-h200-start-up-preload-and-fox-at-head).
Started only at the decoding, the trainer waited 0.30 s for Triton's key and gained nothing. What they leave is
what the warmup would have left: Triton's key (cached for the process) and cuSOLVER and cuBLAS loaded, their
handles returned to PyTorch's per-device pool when the thread ends, for the main thread to take.

It touches no training state (no Parameter, no random draw) and is joined before the warmup, so no other
thread launches GPU work while a CUDA graph records. A failure here is only recorded: the same call on the
main thread raises it where it belongs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ns_splat_plus import upstream

Task = Tuple[str, Callable[[], Any]]


@dataclass
class GpuPreload:
    """The side thread's tasks and what they took; :meth:`join` waits for them."""

    tasks: Sequence[Task]
    seconds: Dict[str, float] = field(default_factory=dict)
    errors: Dict[str, str] = field(default_factory=dict)
    marks: Dict[str, float] = field(default_factory=dict)
    """Wall-clock times: started, <task>_end, joined (the start-up record's clock)."""
    thread: Optional[threading.Thread] = None

    def start(self) -> "GpuPreload":
        self.marks["started"] = time.time()
        if self.tasks:
            self.thread = threading.Thread(target=self._run, name="splat-plus-gpu-preload", daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        for name, task in self.tasks:
            started = time.perf_counter()
            try:
                task()
            except Exception as err:  # noqa: BLE001 (recorded; the main thread's own call raises it in context)
                self.errors[name] = f"{type(err).__name__}: {err}"
            self.seconds[name] = time.perf_counter() - started
            self.marks[f"{name}_end"] = time.time()

    def join(self) -> Dict[str, Any]:
        """Wait for the tasks; their record (for the start-up record): the tasks, seconds, errors and marks."""
        if self.thread is not None:
            self.thread.join()
        self.marks["joined"] = time.time()
        return {
            "tasks": [name for name, _ in self.tasks],
            "seconds": dict(self.seconds),
            "errors": dict(self.errors),
            "marks": dict(self.marks),
        }


def preload_tasks(device: torch.device) -> List[Task]:
    """The tasks for ``device``: Triton's key, then a view matrix's inverse on ``device`` (finished, not only
    queued, before the thread ends)."""

    def inverse() -> None:
        with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
            matrix = torch.eye(4, device=device)[None]
            torch.inverse(torch.bmm(matrix, matrix))  # as model.cameras.view_matrices: a product, then cuSOLVER
            if device.type == "cuda":
                torch.cuda.synchronize(device)

    return [("triton_key", upstream.prepare_triton_cache_key), ("inverse", inverse)]


def start_gpu_preload(device: Any) -> GpuPreload:
    """Start the side thread for ``device``; off CUDA there is nothing to do (a preload with no tasks)."""
    device = torch.device(device)
    if device.type != "cuda":
        return GpuPreload(tasks=[]).start()
    return GpuPreload(tasks=preload_tasks(device)).start()
