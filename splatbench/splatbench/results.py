"""Reading what a benchmark run left behind: probe JSONs, ns-eval's JSON, densification.jsonl.

Entry point: :func:`collect_train` (a train probe into a run record), :func:`read_eval_metrics`,
:func:`read_densification`, :func:`summarize_steps`, :func:`wall_over_busy`,
:func:`instrumentation_overhead` (toggle runs, scripts/warmup_check.py), :func:`empty_record`.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from splatbench.settings import GIB, REFINE_COUNT_KEYS

# the run-record fields a run that shared its GPU with others cannot measure (timing_valid False)
TIMING_FIELDS = (
    "step_time_ms_median", "step_time_ms_mean", "window_step_ms_median", "iteration_ms_median", "host_step_time_ms_median", "train_wall_s",
    "process_wall_s", "eval_wall_s", "gpu_busy_ms", "wall_over_busy", "speedup", "step_ms_by_tenth", "train_wall_parts",
)  # fmt: skip


WINDOW_NEIGHBOURHOOD_STEPS = 500  # steps either side of a profiled window whose median is compared with its busy time
PHASES = 10  # step_ms_by_tenth: the timed steps in this many consecutive parts


def medians_by_part(steps: Sequence[int], times: Sequence[float], parts: int = PHASES) -> List[List[float]]:
    """``[[first step, median ms], ...]`` of ``parts`` consecutive, equally long parts of the timed steps:
    where in the schedule the step time changes (resolution levels, refinement, its end)."""
    n = min(len(steps), len(times))
    parts = min(parts, n)  # a run shorter than ``parts`` steps: one step per part
    out = []
    for k in range(parts):
        lo, hi = k * n // parts, (k + 1) * n // parts
        median = _median(times[lo:hi])
        if median is not None:
            out.append([steps[lo], median])
    return out


def _median(values: Sequence[float]) -> Optional[float]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def finite_or_none(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def near_profiled_window(step: int, window: Sequence[int]) -> bool:
    """Whether ``step`` was slowed by the profiled window ``(start, stop)``: its steps start..stop-1 and
    their neighbours (the profiler starts before ``start`` and stops after ``stop - 1``)."""
    return window[0] - 1 <= step <= window[1]


def host_step_clock(probe: Dict[str, Any]) -> Tuple[List[int], List[float], List[float]]:
    """A train probe's timed steps and each one's host begin and end (perf_counter seconds), cut to
    the length all three lists share (the recorder writes them equally long; this guards other probes)."""
    steps: List[int] = probe.get("steps") or []
    begin: List[float] = probe.get("host_begin_s") or []
    end: List[float] = probe.get("host_end_s") or []
    n = min(len(steps), len(begin), len(end))
    return steps[:n], begin[:n], end[:n]


def summarize_steps(probe: Dict[str, Any], skip: int, exclude: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
    """Step-time statistics from a train probe, leaving out iterations with step < ``skip``.

    ``exclude = (start, stop)``: steps start..stop-1 were profiled (slower); the medians also leave out
    them and their neighbours (the profiler starts before ``start`` and stops after ``stop - 1``).
    """
    steps, begin, end = host_step_clock(probe)
    n = len(steps)
    if n == 0:
        return {"timed_steps": 0, "step_time_ms_median": None, "step_time_ms_mean": None, "iteration_ms_median": None}
    keep = [i for i in range(n) if steps[i] >= skip] or list(range(n))
    first, last = keep[0], keep[-1]
    mean = (end[last] - begin[first]) * 1000.0 / len(keep) if len(keep) else None
    excluded = 0
    if exclude is not None:
        kept = [i for i in keep if not near_profiled_window(steps[i], exclude)]
        excluded, keep = len(keep) - len(kept), kept or keep
    # interval between this iteration's start and the next one's: the cadence of training
    host_interval = [(begin[i + 1] - begin[i]) * 1000.0 for i in keep if i + 1 < n]
    host_span = [(end[i] - begin[i]) * 1000.0 for i in keep]
    gpu_interval = probe.get("gpu_interval_ms")
    gpu_span = probe.get("gpu_span_ms")
    if gpu_interval:
        interval = [gpu_interval[i] for i in keep if i < len(gpu_interval)]
        span = [gpu_span[i] for i in keep if i < len(gpu_span)] if gpu_span else host_span
        clock = "cuda-events"
    else:
        interval, span, clock = host_interval, host_span, "host"
    step_times = interval if interval else span  # start to start; a single iteration has only its span
    out = {
        "timed_steps": n,
        "step_ms_by_tenth": medians_by_part([steps[i] for i in keep], step_times),
        "skipped_steps": n - len(keep) - excluded,
        "step_clock": clock,
        "step_time_ms_median": _median(step_times),
        "step_time_ms_mean": mean,
        "iteration_ms_median": _median(span),
        "host_step_time_ms_median": _median(host_interval) if host_interval else _median(host_span),
    }
    if exclude is not None:
        out["profiled_steps_excluded"] = excluded
        # the steps around the window: the phase of training the busy time was measured in (a window
        # late in a run sees full-size images and more Gaussians than the run-wide median step)
        near = [k for k, i in enumerate(keep) if abs(steps[i] - exclude[0]) <= WINDOW_NEIGHBOURHOOD_STEPS]
        out["window_step_ms_median"] = _median([interval[k] for k in near if k < len(interval)]) if near else None
    return out


def train_wall_parts(probe: Dict[str, Any], window: Optional[Sequence[int]] = None) -> Optional[Dict[str, float]]:
    """Where ``Trainer.train``'s wall time went, in seconds on the host clock; the parts add up to it:

    - ``before_first_step_s``: from ``train()`` to the first timed step, with splat-plus's in-process
      warmup (``warmup_s``, its steps and their first compilations) among it;
    - ``steps_s``: from the first timed step's start to the last one's end: the steps and what the loop
      does between them (logging, in-training evaluations, checkpoints);
    - ``profiled_window_s``: the part of ``steps_s`` spent in the profiled window ``(start, stop)`` and
      its neighbour steps (torch.profiler's start and stop), when a window was profiled;
    - ``after_last_step_s``: from the last step's end to the end of ``train()`` (the final checkpoint).

    A fixed part (before and after the steps) does not shrink with W GPUs or B cameras per step, so
    it bounds their speedup in train wall on short schedules. None without the start time (probes
    written before it was recorded) or without timed steps.
    """
    start, total = finite_or_none(probe.get("train_start_s")), finite_or_none(probe.get("train_s"))
    steps, begin, end = host_step_clock(probe)
    n = len(steps)
    if start is None or total is None or n == 0:
        return None
    parts = {
        "before_first_step_s": begin[0] - start,
        "steps_s": end[n - 1] - begin[0],
        "after_last_step_s": start + total - end[n - 1],
    }
    warmup = finite_or_none(probe.get("warmup_s"))
    if warmup is not None:
        parts["warmup_s"] = warmup
    inside = [i for i in range(n) if window is not None and near_profiled_window(steps[i], window)]
    if inside:
        parts["profiled_window_s"] = end[inside[-1]] - begin[inside[0]]
    return parts


def wall_over_busy(step_ms: Optional[float], busy_ms: Optional[float]) -> Optional[float]:
    """Median step wall time over GPU busy time per step (1.0: the GPU never waits); None without both."""
    step_ms, busy_ms = finite_or_none(step_ms), finite_or_none(busy_ms)
    return step_ms / busy_ms if (step_ms is not None and busy_ms) else None


def instrumentation_overhead(probe: Dict[str, Any], skip: int) -> Dict[str, Any]:
    """A toggle run (instrumentation on / off every N steps): host step-time medians per mode and the
    overhead ``100 * (median_on / median_off - 1)`` percent (None without steps of both modes)."""
    steps, modes = probe.get("steps") or [], probe.get("instrumentation_modes") or []
    begin, end = probe.get("host_begin_s") or [], probe.get("host_end_s") or []
    out: Dict[str, Any] = {}
    for label, flag in (("on", True), ("off", False)):
        times = [
            (end[i] - begin[i]) * 1e3
            for i in range(min(len(steps), len(modes)))
            if steps[i] >= skip and modes[i] is flag
        ]
        out[f"step_host_ms_median_{label}"] = statistics.median(times) if times else None
        out[f"steps_{label}"] = len(times)
    on, off = out["step_host_ms_median_on"], out["step_host_ms_median_off"]
    out["overhead_pct"] = 100.0 * (on / off - 1.0) if on and off else None
    return out


def read_densification(path: Path) -> Optional[Dict[str, Any]]:
    """Totals of the refine events in a ``densification.jsonl`` (None when the run wrote none)."""
    if not path.is_file():
        return None
    totals: Dict[str, Any] = {"refine_events": 0}
    last_count = None
    for line in path.read_text(encoding="utf8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or event.get("event") != "refine":
            continue
        totals["refine_events"] += 1
        for key in REFINE_COUNT_KEYS:
            value = event.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + int(value)
        seconds = event.get("seconds")  # the efficient strategy's host clock per refine (lite's multi-view scoring)
        if isinstance(seconds, dict):
            for key, total in (("total", "refine_seconds"), ("scoring", "refine_scoring_seconds")):
                if isinstance(seconds.get(key), (int, float)):
                    totals[total] = totals.get(total, 0.0) + float(seconds[key])
        for key in ("num_gaussians", "gaussians_after", "count_after", "num_after", "gaussians"):
            if isinstance(event.get(key), (int, float)):
                last_count = int(event[key])
                break
    totals["gaussians_after_last_refine"] = last_count
    return totals


def read_eval_metrics(path: Path) -> Dict[str, Any]:
    """psnr / ssim / lpips (+ std) from ns-eval's JSON; a missing or null LPIPS stays None, never 0."""
    results = json.loads(path.read_text(encoding="utf8")).get("results", {})
    out: Dict[str, Any] = {}
    for key in ("psnr", "ssim", "lpips", "psnr_std", "ssim_std", "lpips_std", "fps", "num_rays_per_sec"):
        out[key] = finite_or_none(results.get(key))
    if isinstance(results.get("num_gaussians"), int):
        out["eval_num_gaussians"] = results["num_gaussians"]
    if isinstance(results.get("num_images"), int):
        out["eval_num_images"] = results["num_images"]
    return out


def bytes_to_gib(value: Any) -> Optional[float]:
    return value / GIB if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def load_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, json.JSONDecodeError):
        return None


def rank_probes(probe_path: Path) -> List[Dict[str, Any]]:
    """Rank 0's probe and any other ranks' (``probe.rankK.json``)."""
    probes = []
    main = load_json(probe_path)
    if main is not None:
        probes.append(main)
    for other in sorted(probe_path.parent.glob(f"{probe_path.stem}.rank*{probe_path.suffix}")):
        data = load_json(other)
        if data is not None:
            probes.append(data)
    return probes


def empty_record(method: str, num_gpus: int, repeat: int = 1) -> Dict[str, Any]:
    return {
        "method": method,
        "num_gpus": num_gpus,
        "repeat": repeat,
        "timing_valid": True,
        "status": "pending",
        "error": None,
        "steps_requested": None,
        "timed_steps": None,
        "step_time_ms_median": None,
        "step_time_ms_mean": None,
        "iteration_ms_median": None,
        "gpu_busy_ms": None,
        "wall_over_busy": None,
        "train_wall_s": None,
        "train_wall_parts": None,
        "process_wall_s": None,
        "eval_wall_s": None,
        "train_peak_gib": None,
        "train_reserved_peak_gib": None,
        "eval_peak_gib": None,
        "in_training_eval_peak_gib": None,
        "psnr": None,
        "ssim": None,
        "lpips": None,
        "num_gaussians": None,
        "densification": None,
        "speedup": None,
        "ply_bytes": None,
        "ply_vertices": None,
    }


def discard_timing(record: Dict[str, Any], reason: str) -> None:
    """A run that shared its GPU: its timing figures are null, ``timing_valid`` False (quality, memory stay)."""
    for key in TIMING_FIELDS:
        record[key] = None
    record["timing_valid"] = False
    record["timing_note"] = reason


def _peak_gib(probes: List[Dict[str, Any]], key: str) -> Optional[float]:
    """The largest per-step peak under ``key`` over every step of every rank, in GiB (None where none was recorded)."""
    peaks = [b for p in probes for b in (p.get(key) or []) if b is not None]
    return bytes_to_gib(max(peaks)) if peaks else None


def collect_train(record: Dict[str, Any], probe_path: Path, skip: int) -> None:
    probes = rank_probes(probe_path)
    if not probes:
        return
    probe = probes[0]
    gpu_busy = probe.get("gpu_busy") or {}
    window = tuple(gpu_busy["window"]) if gpu_busy.get("steps_profiled") and gpu_busy.get("window") else None
    record.update(summarize_steps(probe, skip, window))
    record["train_wall_s"] = probe.get("train_s")
    record["train_wall_parts"] = train_wall_parts(probe, window)
    record["world_size"] = probe.get("world_size")
    if gpu_busy:
        record["gpu_busy_ms"] = finite_or_none(gpu_busy.get("gpu_busy_ms"))
        # the steps around the window where there are some, else the run's median step
        step_ms = record.get("window_step_ms_median") or record.get("step_time_ms_median")
        record["wall_over_busy"] = wall_over_busy(step_ms, record["gpu_busy_ms"])
        record["gpu_busy"] = gpu_busy
    peaks = [p.get("process_peak_bytes") for p in probes]
    record["train_peak_gib"] = _peak_gib(probes, "peak_bytes")
    record["train_reserved_peak_gib"] = _peak_gib(probes, "reserved_peak_bytes")
    record["process_peak_gib"] = bytes_to_gib(max([b for b in peaks if b is not None], default=None) or None)
    record["in_training_eval_peak_gib"] = bytes_to_gib(probe.get("in_training_eval_peak_bytes"))
    record["host_peak_rss_gib"] = bytes_to_gib(probe.get("host_peak_rss_bytes"))
    record["num_gaussians"] = probe.get("final_gaussians")
    gaussians = probe.get("gaussians") or []
    stride = max(1, len(gaussians) // 50)
    record["gaussian_trace"] = [[probe["steps"][i], gaussians[i]] for i in range(0, len(gaussians), stride)]
    record["environment"] = probe.get("environment")
    record["run_dir"] = probe.get("base_dir")
    if probe.get("error"):
        record["error"] = probe["error"]
