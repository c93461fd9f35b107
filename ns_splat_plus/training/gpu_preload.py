"""Once-per-process GPU start-up work, done on a side thread while the photos decode: :func:`start_gpu_preload`.

Why: the warmup's first step pays for work that depends on no model and no photo. Profiled on an H200
(splat-plus-lite, plush-dog, benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality, cProfile):
- Triton hashes its own installed files before its first launch in a process (``triton_key``): 0.43 s;
- the first downscale of a photo (``model.images.resize_images``, a convolution) starts cuDNN and, as
  ``ns-train`` turns ``torch.backends.cudnn.benchmark`` on, times its algorithms for that shape: 0.22 s;
- the first camera's view matrix (a batched ``torch.inverse`` and matrix products): 0.17 s.
The photos' decoding (0.9-1.6 s on the host) comes just before the warmup, so the same work on a side thread
started with the decoding is off the path to the first step. What it leaves in the process is what the
warmup would have left: Triton's key (cached for the process), cuDNN's choice of algorithm for each shape
(a process-wide cache), and the handles of cuDNN, cuBLAS and cuSOLVER, which PyTorch returns to a per-device
pool when the thread ends, for the main thread to take.

It touches no training state (no Parameter, no random draw) and is joined before the warmup, so no other
thread launches GPU work while a CUDA graph records. A failure here is only recorded: the same call on the
main thread raises it where it belongs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ns_splat_plus import upstream
from ns_splat_plus.model.images import resize_images

MAX_IMAGE_SIZES = 4
"""Distinct training image sizes whose downscales are timed ahead (a dataset of many sizes: its first ones)."""


@dataclass
class GpuPreload:
    """The side thread's tasks and what they took; :meth:`join` waits for them."""

    tasks: Sequence[Tuple[str, Callable[[], Any]]]
    seconds: Dict[str, float] = field(default_factory=dict)
    errors: Dict[str, str] = field(default_factory=dict)
    thread: Optional[threading.Thread] = None

    def start(self) -> "GpuPreload":
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

    def join(self) -> Dict[str, Any]:
        """Wait for the tasks; their record (for the start-up record): seconds per task, errors."""
        if self.thread is not None:
            self.thread.join()
        return {"tasks": [name for name, _ in self.tasks], "seconds": dict(self.seconds), "errors": dict(self.errors)}


def downscale_factors(num_downscales: int) -> List[int]:
    """The ground truth's downscale factors of splatfacto's resolution schedule: 2, 4, ..., 2**num_downscales."""
    return [2**k for k in range(1, max(int(num_downscales), 0) + 1)]


def image_sizes(cameras: Any, limit: int = MAX_IMAGE_SIZES) -> List[Tuple[int, int]]:
    """Distinct (height, width) of ``cameras`` (nerfstudio ``Cameras``), in camera order, at most ``limit``."""
    heights = cameras.height.reshape(-1).tolist()
    widths = cameras.width.reshape(-1).tolist()
    sizes: List[Tuple[int, int]] = []
    for size in zip(heights, widths):
        if size not in sizes:
            sizes.append((int(size[0]), int(size[1])))
            if len(sizes) == limit:
                break
    return sizes


def preload_tasks(
    device: torch.device, sizes: Sequence[Tuple[int, int]], factors: Sequence[int]
) -> List[Tuple[str, Callable[[], Any]]]:
    """The tasks for a CUDA ``device``: Triton's key, each (size, factor)'s downscale, a view matrix's inverse."""

    def on_device(work: Callable[[], Any]) -> Callable[[], Any]:
        if device.type != "cuda":  # the tests run the tasks on CPU tensors
            return work

        def run() -> Any:
            with torch.cuda.device(device):
                out = work()
                torch.cuda.synchronize(device)  # the work done, not only queued, before the thread ends
                return out

        return run

    def downscales() -> None:
        for height, width in sizes:
            for factor in factors:
                if height >= factor and width >= factor:
                    resize_images(torch.zeros((1, height, width, 3), device=device), factor)

    def view_matrix() -> None:
        # cameras.view_matrices: [C, 4, 4] products and their batched inverse, as for one camera
        matrix = torch.eye(4, device=device)[None]
        torch.inverse(torch.bmm(matrix, matrix))

    tasks: List[Tuple[str, Callable[[], Any]]] = [("triton_key", upstream.prepare_triton_cache_key)]
    if sizes and factors:
        tasks.append(("downscales", on_device(downscales)))
    tasks.append(("view_matrix", on_device(view_matrix)))
    return tasks


def start_gpu_preload(device: Any, cameras: Any, num_downscales: int) -> GpuPreload:
    """Start the side thread for ``device`` (nothing to do off CUDA) with the sizes of ``cameras`` (the
    training cameras) and splatfacto's ``num_downscales``; :meth:`GpuPreload.join` before the warmup."""
    device = torch.device(device)
    if device.type != "cuda":
        return GpuPreload(tasks=[])
    sizes = image_sizes(cameras) if num_downscales > 0 else []
    return GpuPreload(tasks=preload_tasks(device, sizes, downscale_factors(num_downscales))).start()
