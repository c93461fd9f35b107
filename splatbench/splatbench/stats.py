"""Statistics over repeated runs: per method and GPU count, mean and sample sd of every metric, and
each method's difference of means to the reference method with its standard error.

Entry point: :func:`summarize_repeats` (results.json's ``summary``), :func:`metric_values`,
:func:`mean_sd`, :func:`difference` (also used by the quality gate).

Quality figures (PSNR, SSIM, LPIPS, Gaussians, memory peaks) come from every successful run; timing
figures only from runs that had their GPU alone (``timing_valid``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Dict, Iterable, List, Optional, Tuple

from splatbench.results import TIMING_FIELDS, finite_or_none

SUMMARY_METRICS = (
    "psnr", "ssim", "lpips", "step_time_ms_median", "train_wall_s", "num_gaussians", "train_peak_gib", "eval_peak_gib",
    "gpu_busy_ms", "wall_over_busy", "window_step_ms_median",
)  # fmt: skip


def mean_sd(values: Iterable[float]) -> Dict[str, Any]:
    """``{"n", "mean", "sd"}``: the sample standard deviation (n - 1), None below two values."""
    values = [float(v) for v in values]
    n = len(values)
    return {
        "n": n,
        "mean": statistics.fmean(values) if n else None,
        "sd": statistics.stdev(values) if n >= 2 else None,
    }


def difference(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """Difference of means ``a - b`` and its standard error sqrt(sd_a²/n_a + sd_b²/n_b) (None unless
    both sides have a standard deviation, i.e. at least two values each)."""
    if a.get("mean") is None or b.get("mean") is None:
        return {"diff": None, "se": None, "n": a.get("n", 0), "n_ref": b.get("n", 0)}
    se = None
    if a.get("sd") is not None and b.get("sd") is not None:
        se = math.sqrt(a["sd"] ** 2 / a["n"] + b["sd"] ** 2 / b["n"])
    return {"diff": a["mean"] - b["mean"], "se": se, "n": a["n"], "n_ref": b["n"]}


def group_runs(runs: Iterable[Dict[str, Any]]) -> Dict[Tuple[str, int], List[Dict[str, Any]]]:
    """Runs by (method, GPU count), in order of first appearance."""
    groups: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["method"], int(r["num_gpus"])), []).append(r)
    return groups


def metric_values(runs: Iterable[Dict[str, Any]], metric: str) -> List[float]:
    """The finite values of ``metric`` over the successful runs (timing metrics: timing-valid runs only)."""
    timing = metric in TIMING_FIELDS
    values = []
    for r in runs:
        if r.get("status") != "ok" or (timing and r.get("timing_valid") is False):
            continue
        value = finite_or_none(r.get(metric))
        if value is not None:
            values.append(value)
    return values


def summarize_repeats(runs: List[Dict[str, Any]], reference: Optional[str]) -> List[Dict[str, Any]]:
    """One entry per (method, GPU count): runs, successful runs, per-metric mean / sd / n, and for the
    methods other than ``reference`` the difference of means to the reference's (same GPU count)."""
    groups = group_runs(runs)
    out = []
    for (method, num_gpus), group in groups.items():
        entry: Dict[str, Any] = {
            "method": method,
            "num_gpus": num_gpus,
            "runs": len(group),
            "ok": sum(1 for r in group if r.get("status") == "ok"),
            "timing_runs": sum(1 for r in group if r.get("status") == "ok" and r.get("timing_valid") is not False),
            "metrics": {m: mean_sd(metric_values(group, m)) for m in SUMMARY_METRICS},
        }
        ref_group = groups.get((reference, num_gpus)) if reference else None
        if ref_group is not None and method != reference:
            entry["vs_reference"] = {
                m: difference(entry["metrics"][m], mean_sd(metric_values(ref_group, m))) for m in SUMMARY_METRICS
            }
            entry["reference"] = reference
        out.append(entry)
    return out
