"""GPU busy time per training step, for any nerfstudio method: torch.profiler over a window of steps.

Entry point: :class:`GpuBusyWindow` (the probe calls ``begin(step)`` / ``end(step)`` around every
iteration and ``as_dict()`` at the end) and :func:`summarize_device_events` (the arithmetic, also
fed fake events by the tests).

The window profiles CUDA activity only (kernels, memcpy, memset, as CUPTI records them) over ``steps``
consecutive iterations; the busy time is the summed device time of those GPU-side events divided by
the iterations profiled. Kernels that overlap on several streams are counted each, so the figure is
"GPU work per step", which can exceed the wall time only through such overlap. Without CUDA the window
does nothing and reports null.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

# GPU-side events the profiler may list that are not GPU work
_NOT_WORK = ("Activity Buffer Request",)

# Where the GPU time of a splatting step goes, by kernel name (first match wins; lower-case
# substrings of gsplat 1.4.0's, torch's, cuDNN's and our Triton kernels' names). A heuristic for reading the
# profile, not an exact attribution: "other" takes what no pattern names.
KERNEL_GROUPS = (
    ("rasterize backward", ("rasterize_to_pixels_bwd",)),
    ("rasterize forward", ("rasterize_to_pixels_fwd",)),
    (
        "SSIM (fused)",
        ("ssim_rows_", "ssim_columns_", "ssim_finish"),
    ),  # ns_splat_plus.model.ssim_kernels' Triton kernels
    ("projection and SH", ("projection", "quat_scale_to_covar", "spherical_harmonics", "compute_sh")),
    ("sort and tiles", ("sort", "radix", "isect", "tile", "scan")),
    (
        "convolution (SSIM)",
        (
            "conv_depthwise",
            "conv2d",
            "convolution",
            "cudnn",
            "implicit_gemm",
            "implicit_convolve",
            "winograd",
            "xmma",
            "fprop",
            "dgrad",
            "wgrad",
        ),
    ),
    ("optimizer", ("adam", "multi_tensor")),
    ("memcpy / memset", ("memcpy", "memset")),
)
TOP_KERNELS = 12


def default_window_start(skip: int, max_steps: int, steps: int) -> int:
    """The first profiled step: the window is centred on the timed steps (after ``skip``), where the
    median step lies, and never starts before ``skip`` unless the run is too short for that."""
    start = max(skip, (skip + max_steps) // 2 - steps // 2)
    if start + steps > max_steps:
        start = max(0, max_steps - steps)
    return start


def _device_us(event: Any) -> Optional[float]:
    """An event's own device time in microseconds, whatever torch calls it (device_* since 2.4, cuda_* before)."""

    def number(name: str) -> Optional[float]:
        value = getattr(event, name, None)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    for name in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
        if number(name) is not None:
            return number(name)
    for name in ("device_time", "cuda_time"):  # an average over ``count`` occurrences
        if number(name) is not None:
            return number(name) * (number("count") or 1.0)
    return None


def _on_gpu(event: Any) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is not None and str(device_type).rsplit(".", 1)[-1].upper() == "CUDA"


def summarize_device_events(events: Iterable[Any], steps: int) -> Dict[str, Any]:
    """Busy time per step (ms) from profiler events (``key_averages()`` or ``events()``).

    Only GPU-side events count (``device_type`` CUDA: kernels, memcpy, memset); host-side events, whose
    device time is that of the kernels they launched, would count them twice.
    """
    totals = {"kernel": 0.0, "memcpy": 0.0, "memset": 0.0}
    by_name: Dict[str, list] = {}  # name: [us, calls]
    count = 0
    for event in events:
        if not _on_gpu(event):
            continue
        name = str(getattr(event, "key", None) or getattr(event, "name", ""))
        if name.startswith(_NOT_WORK):
            continue
        us = _device_us(event)
        if us is None:
            continue
        kind = (
            "memcpy"
            if name.lower().startswith("memcpy")
            else "memset"
            if name.lower().startswith("memset")
            else "kernel"
        )
        totals[kind] += us
        calls = int(getattr(event, "count", 1) or 1)
        count += calls
        entry = by_name.setdefault(name, [0.0, 0])
        entry[0] += us
        entry[1] += calls
    if steps <= 0:
        return {"gpu_busy_ms": None, "steps_profiled": steps, "events": count}
    per_step = {f"{kind}_ms": total / 1000.0 / steps for kind, total in totals.items()}
    return {
        "gpu_busy_ms": sum(totals.values()) / 1000.0 / steps,
        **per_step,
        "steps_profiled": steps,
        "events": count,
        **kernel_breakdown(by_name, steps),
    }


def kernel_group(name: str) -> str:
    """The :data:`KERNEL_GROUPS` group of a GPU event's name ("other" when no pattern matches)."""
    lowered = name.lower()
    for group, patterns in KERNEL_GROUPS:
        if any(p in lowered for p in patterns):
            return group
    return "other"


def kernel_breakdown(by_name: Dict[str, list], steps: int) -> Dict[str, Any]:
    """Per step: milliseconds by kernel group (largest first) and the :data:`TOP_KERNELS` longest
    kernels with their launches, from ``{name: [device us, calls]}`` over ``steps`` steps."""
    groups: Dict[str, float] = {}
    for name, (us, _) in by_name.items():
        group = kernel_group(name)
        groups[group] = groups.get(group, 0.0) + us / 1000.0 / steps
    top = sorted(by_name.items(), key=lambda item: -item[1][0])[:TOP_KERNELS]
    return {
        "groups_ms": dict(sorted(groups.items(), key=lambda item: -item[1])),
        "top_kernels": [
            {"name": name[:120], "ms": us / 1000.0 / steps, "calls": calls / steps} for name, (us, calls) in top
        ],
    }


class GpuBusyWindow:
    """torch.profiler (CUDA activity only) from iteration ``start`` for ``steps`` iterations."""

    def __init__(self, device, start: int, steps: int) -> None:
        import torch

        self.device = device
        self.cuda = getattr(device, "type", str(device)) == "cuda" and torch.cuda.is_available()
        self.start, self.steps = start, steps
        self.profiler = None
        self.done = None  # the stopped profiler, summarised by finish()
        self.profiled = 0
        self.last_step: Optional[int] = None
        self.summary: Optional[Dict[str, Any]] = None
        self.note: Optional[str] = None if self.cuda else "no CUDA device: GPU busy time not measured"

    def begin(self, step: int) -> None:
        if not self.cuda or self.done is not None:
            return
        if self.profiler is not None and self.last_step is not None and step <= self.last_step:
            self._abort()  # an in-process warmup replays steps: profile the real run's steps only
        if self.profiler is None and step == self.start:
            import torch

            self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self.profiler.start()
            self.profiled = 0

    def end(self, step: int) -> None:
        if self.profiler is None:
            return
        self.profiled += 1
        self.last_step = step
        if self.profiled >= self.steps:
            import torch

            torch.cuda.synchronize(self.device)
            self.profiler.stop()  # summarised after training (finish), not inside the loop
            self.done, self.profiler = self.profiler, None

    def _abort(self) -> None:
        try:
            self.profiler.stop()
        finally:
            self.profiler, self.profiled, self.last_step = None, 0, None

    def finish(self) -> None:
        """At the end of training: a window the run was too short to complete is summarised as it is."""
        if self.profiler is not None:
            import torch

            torch.cuda.synchronize(self.device)
            self.profiler.stop()
            self.done, self.profiler = self.profiler, None
            self.note = f"run ended inside the window: {self.profiled} of {self.steps} steps profiled"
        if self.done is not None and self.summary is None:
            self.summary = summarize_device_events(self.done.key_averages(), self.profiled)

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"requested_steps": self.steps, "window": [self.start, self.start + self.steps]}
        out.update(self.summary or {"gpu_busy_ms": None, "steps_profiled": 0})
        out["note"] = self.note
        return out


class GpuBusySeries:
    """A :class:`GpuBusyWindow` of ``steps`` iterations every ``every`` iterations from ``first``: GPU busy
    time along a run whose Gaussian count changes (scripts/gaussian_scaling.py).

    Each window records the Gaussian count when it opened (``num_points_fn()``); a window is summarised
    when it closes, between two iterations, outside the timed block of either.
    """

    def __init__(self, device, every: int, steps: int, first: int = 0, num_points_fn=None) -> None:
        if every <= steps:
            raise ValueError(f"GPU busy windows every {every} steps cannot be {steps} steps long")
        self.device, self.every, self.steps, self.first = device, every, steps, first
        self.num_points_fn = num_points_fn or (lambda: None)
        self.active: Optional[GpuBusyWindow] = None
        self.active_gaussians: Optional[int] = None
        self.windows: list = []
        self.last_step: Optional[int] = None

    def begin(self, step: int) -> None:
        if self.last_step is not None and step <= self.last_step:
            # an in-process warmup replays steps: forget what was profiled from here on
            if self.active is not None and self.active.profiler is not None:
                self.active._abort()
            self.active = None
            self.windows = [w for w in self.windows if w["window"][0] < step]
        self.last_step = step
        if self.active is None and step >= self.first and (step - self.first) % self.every == 0:
            self.active = GpuBusyWindow(self.device, step, self.steps)
            self.active_gaussians = self.num_points_fn()
        if self.active is not None:
            self.active.begin(step)

    def end(self, step: int) -> None:
        if self.active is None:
            return
        self.active.end(step)
        if self.active.done is not None or not self.active.cuda:
            self._close()

    def _close(self) -> None:
        window, self.active = self.active, None
        window.finish()
        self.windows.append({**window.as_dict(), "gaussians": self.active_gaussians})

    def finish(self) -> None:
        if self.active is not None and self.active.profiler is not None:
            self._close()
        self.active = None

    def as_dict(self) -> Dict[str, Any]:
        return {"every": self.every, "steps": self.steps, "first": self.first, "windows": self.windows}
