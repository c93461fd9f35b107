"""Statistics over repeated runs: per method and GPU count, mean and sample sd of every metric, and
each method's difference of means to the reference method with its standard error and its Welch
confidence interval (90 % by default).

Entry point: :func:`summarize_repeats` (results.json's ``summary``), :func:`metric_values`,
:func:`mean_sd`, :func:`difference` (also used by the quality gate), :func:`welch_interval`,
:func:`t_quantile`.

Quality figures (PSNR, SSIM, LPIPS, Gaussians, memory peaks) come from every successful run; timing
figures only from runs that had their GPU alone (``timing_valid``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from splatbench.results import TIMING_FIELDS, finite_or_none

DEFAULT_CONFIDENCE = 0.90

SUMMARY_METRICS = (
    "psnr", "ssim", "lpips", "step_time_ms_median", "process_wall_s", "train_wall_s", "num_gaussians", "ply_bytes",
    "train_peak_gib", "train_reserved_peak_gib", "eval_peak_gib",
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


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``df`` need not be an integer:
    Welch's is not): ``scipy.stats.t.ppf`` (scipy comes with scikit-learn, a runtime dependency)."""
    if not 0.0 < p < 1.0 or not df > 0.0:
        raise ValueError(f"t quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    from scipy import stats

    return float(stats.t.ppf(p, df))


Sample = Union[Mapping[str, Any], Iterable[float]]


def welch_interval(a: Sample, b: Sample, confidence: float = DEFAULT_CONFIDENCE) -> Dict[str, Any]:
    """Welch's two-sample confidence interval for the difference of means ``b - a`` (``a``: the
    reference / baseline, ``b``: the method compared with it). Each side is either its values or a
    :func:`mean_sd` summary ``{"n", "mean", "sd"}``.

    Returns ``{"diff", "half_width", "low", "high", "df", "confidence", "n_a", "n_b", "reason"}``:
    ``half_width`` = t_{(1 + confidence) / 2, df} x sqrt(sd_a²/n_a + sd_b²/n_b) with the
    Welch–Satterthwaite degrees of freedom ``df`` (the t quantile: :func:`t_quantile`).

    Not computable (``half_width``, ``low``, ``high`` and ``df`` None, ``reason`` says why): a side
    with fewer than two values (no sample variance; ``diff`` is still given when both sides have a
    value). Both sides without spread (every value equal): the interval is the difference itself,
    ``half_width`` 0 and ``df`` None (0/0), with a ``reason``. ``reason`` is None otherwise.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    sa = a if isinstance(a, Mapping) else mean_sd(a)
    sb = b if isinstance(b, Mapping) else mean_sd(b)
    n_a, n_b = int(sa.get("n") or 0), int(sb.get("n") or 0)
    out: Dict[str, Any] = {
        "diff": None, "half_width": None, "low": None, "high": None, "df": None,
        "confidence": confidence, "n_a": n_a, "n_b": n_b, "reason": None,
    }  # fmt: skip
    if sa.get("mean") is None or sb.get("mean") is None:
        out["reason"] = f"no value on one side (n {n_b} vs {n_a})"
        return out
    diff = sb["mean"] - sa["mean"]
    out["diff"] = diff
    if n_a < 2 or n_b < 2 or sa.get("sd") is None or sb.get("sd") is None:
        out["reason"] = f"needs at least 2 runs per side (n {n_b} vs {n_a})"
        return out
    va, vb = sa["sd"] ** 2 / n_a, sb["sd"] ** 2 / n_b  # squared standard errors of the two means
    if va + vb == 0.0:
        out.update(half_width=0.0, low=diff, high=diff, reason="no spread on either side (every value equal)")
        return out
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    half_width = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(va + vb)
    out.update(half_width=half_width, low=diff - half_width, high=diff + half_width, df=df)
    return out


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
    methods other than ``reference`` the difference of means to the reference's (same GPU count):
    ``vs_reference[metric]`` = :func:`difference` (``diff``, ``se``, ``n``, ``n_ref``) and, under
    ``welch``, its :func:`welch_interval` (90 %; ``n_a`` the reference's runs, ``n_b`` the method's)."""
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
            vs_reference = {}
            for m in SUMMARY_METRICS:
                ref_stat = mean_sd(metric_values(ref_group, m))
                vs_reference[m] = {
                    **difference(entry["metrics"][m], ref_stat),
                    "welch": welch_interval(ref_stat, entry["metrics"][m]),
                }
            entry["vs_reference"] = vs_reference
            entry["reference"] = reference
        out.append(entry)
    return out
