"""The quality gate: compare a benchmark results.json with a stored baseline; fail on regressions.

Entry point: :func:`main` (``scripts/quality_gate.py RESULT BASELINE [-t METRIC=TOL] [--two-sided]``),
:func:`quality_gate` (the comparison), :func:`format_findings` (the readable diff).

Runs are matched by (method, GPU count). With repeats, the MEANS of the successful runs are compared
(timing metrics: over the runs that had their GPU alone) and the difference is reported with its
standard error sqrt(sd_a²/n_a + sd_b²/n_b); a single run is a mean of one (no standard error).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from splatbench.report import fmt
from splatbench.settings import run_tag
from splatbench.stats import difference, group_runs, mean_sd, metric_values

# metric -> True when higher is better
METRIC_DIRECTIONS: Dict[str, bool] = {
    "psnr": True,
    "ssim": True,
    "lpips": False,
    "step_time_ms_median": False,
    "step_time_ms_mean": False,
    "train_wall_s": False,
    "train_peak_gib": False,
    "eval_peak_gib": False,
    "num_gaussians": False,
    "speedup": True,
    "gpu_busy_ms": False,
}
DEFAULT_TOLERANCES = {"psnr": "0.5%", "ssim": "0.5%"}


@dataclass
class Tolerance:
    value: float
    relative: bool

    @classmethod
    def parse(cls, text: str) -> "Tolerance":
        text = text.strip()
        if text.endswith("%"):
            return cls(float(text[:-1]) / 100.0, True)
        return cls(float(text), False)

    def allowed(self, baseline: float) -> float:
        return abs(baseline) * self.value if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass
class GateFinding:
    run: str
    metric: str
    baseline: Optional[float]  # the baseline's mean (its single value without repeats)
    result: Optional[float]  # the result's mean
    tolerance: str
    verdict: str  # ok, improved, regressed, missing, skipped, changed
    se: Optional[float] = None  # standard error of result - baseline (both with >= 2 runs)
    n_result: int = 1
    n_baseline: int = 1

    @property
    def failed(self) -> bool:
        return self.verdict in ("regressed", "missing", "changed")


def parse_tolerances(items: Iterable[str], defaults: Optional[Dict[str, str]] = None) -> Dict[str, Tolerance]:
    """``["psnr=0.5%", "step_time_ms_median=10%", "lpips=0.002"]`` -> tolerances (defaults kept)."""
    merged = dict(DEFAULT_TOLERANCES if defaults is None else defaults)
    for item in items:
        if "=" not in item:
            raise ValueError(f"tolerance {item!r}: expected METRIC=VALUE (e.g. psnr=0.5% or lpips=0.002)")
        metric, value = item.split("=", 1)
        merged[metric.strip()] = value.strip()
    out = {}
    for metric, value in merged.items():
        if metric not in METRIC_DIRECTIONS:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRIC_DIRECTIONS)}")
        if value.lower() in ("off", "none", ""):
            continue
        out[metric] = Tolerance.parse(value)
    return out


def _missing_text(runs: List[Dict[str, Any]]) -> str:
    if not runs:
        return "absent"
    bad = [r for r in runs if r.get("status") != "ok"]
    if len(runs) == 1:
        return f"{bad[0].get('status')}: {bad[0].get('error')}"
    return f"{len(bad)} of {len(runs)} runs not ok, e.g. {bad[0].get('status')}: {bad[0].get('error')}"


def quality_gate(
    result: Dict[str, Any], baseline: Dict[str, Any], tolerances: Dict[str, Tolerance], two_sided: bool = False
) -> List[GateFinding]:
    """Compare every (method, GPUs) of the baseline that has a successful run with the same of ``result``.

    A metric regresses when the result's mean is worse than the baseline's mean by more than its
    tolerance (relative to the baseline mean for ``x%``, absolute otherwise); ``two_sided`` also fails
    changes for the better. A (method, GPUs) absent from ``result``, or with a run that is not ``ok``
    there, fails; a metric the baseline lacks (LPIPS null) is skipped, one the result lacks fails.
    """
    findings: List[GateFinding] = []
    result_groups = group_runs(result.get("runs", []))
    for key, base_runs in group_runs(baseline.get("runs", [])).items():
        base_ok = [r for r in base_runs if r.get("status") == "ok"]
        if not base_ok:
            continue
        name = run_tag(*key)
        runs = result_groups.get(key, [])
        ok = [r for r in runs if r.get("status") == "ok"]
        if not runs or len(ok) < len(runs):
            findings.append(GateFinding(name, "run", None, None, _missing_text(runs), "missing"))
            continue
        for metric, tol in tolerances.items():
            base = mean_sd(metric_values(base_ok, metric))
            value = mean_sd(metric_values(ok, metric))
            counts = {"n_result": value["n"], "n_baseline": base["n"]}
            if base["mean"] is None:
                findings.append(GateFinding(name, metric, None, value["mean"], str(tol), "skipped", **counts))
                continue
            if value["mean"] is None:
                findings.append(GateFinding(name, metric, base["mean"], None, str(tol), "missing", **counts))
                continue
            diff = difference(value, base)
            worse_by = -diff["diff"] if METRIC_DIRECTIONS[metric] else diff["diff"]
            allowed = tol.allowed(base["mean"])
            if worse_by > allowed:
                verdict = "regressed"
            elif -worse_by > allowed:
                verdict = "changed" if two_sided else "improved"
            else:
                verdict = "ok"
            findings.append(
                GateFinding(name, metric, base["mean"], value["mean"], str(tol), verdict, diff["se"], **counts)
            )
    return findings


def format_findings(findings: List[GateFinding]) -> str:
    repeats = any(f.n_result > 1 or f.n_baseline > 1 for f in findings)
    rows = [
        ("run", "metric", "baseline", "result", "change", "tolerance", "verdict")
        + (("n result/baseline",) if repeats else ())
    ]
    for f in findings:
        change = "–"
        if f.baseline is not None and f.result is not None:
            rel = (f.result - f.baseline) / abs(f.baseline) * 100.0 if f.baseline else float("inf")
            change = f"{f.result - f.baseline:+.4g} ({rel:+.2f}%)"
            if f.se is not None:
                change += f" ± {f.se:.2g} SE"
        verdict = f.verdict.upper() if f.failed else f.verdict
        row = (f.run, f.metric, fmt(f.baseline, ".4f"), fmt(f.result, ".4f"), change, f.tolerance, verdict)
        rows.append(row + ((f"{f.n_result}/{f.n_baseline}",) if repeats else ()))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failed = [f for f in findings if f.failed]
    if not findings:
        lines.append("no comparable runs: the baseline has no successful run")
    if repeats:
        lines.append("baseline / result: means over the repeats; change: difference of means ± its standard error")
    lines.append(
        f"quality gate: {'FAILED' if failed or not findings else 'passed'} "
        f"({len(failed)} of {len(findings)} checks failed)"
    )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="quality_gate.py",
        description="Compare a benchmark results.json with a stored baseline; exit 1 on a regression. "
        "With repeats, the means over the repeats are compared.",
        epilog="Exit status: 0 within tolerance, 1 regression or missing run/metric, 2 bad input.",
    )
    parser.add_argument("result", type=Path, help="results.json of the run to check")
    parser.add_argument("baseline", type=Path, help="stored baseline results.json")
    parser.add_argument(
        "--tolerance", "-t", action="append", default=[], metavar="METRIC=VALUE",
        # argparse formats help strings with %: every percent sign doubled
        help=(
            "per-metric tolerance, relative ('0.5%') or absolute ('0.002'); 'off' disables one. "
            f"Defaults: {', '.join(f'{k}={v}' for k, v in DEFAULT_TOLERANCES.items())}. "
            f"Metrics: {', '.join(METRIC_DIRECTIONS)}."
        ).replace("%", "%%"),
    )  # fmt: skip
    parser.add_argument("--two-sided", action="store_true", help="also fail on improvements beyond the tolerance")
    args = parser.parse_args(argv)
    try:
        tolerances = parse_tolerances(args.tolerance)
        result = json.loads(args.result.read_text(encoding="utf8"))
        baseline = json.loads(args.baseline.read_text(encoding="utf8"))
    except (ValueError, OSError) as exc:
        print(f"quality gate: {exc}", file=sys.stderr)
        return 2
    findings = quality_gate(result, baseline, tolerances, two_sided=args.two_sided)
    print(format_findings(findings))
    return 1 if (not findings or any(f.failed for f in findings)) else 0
