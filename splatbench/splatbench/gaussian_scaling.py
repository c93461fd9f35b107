"""Step time, GPU busy time and peak device memory against the Gaussian count, from one train probe.

Entry points: :func:`count_segments` (a probe's iterations cut where the Gaussian count changes, one
row per stretch between two refines), :func:`memory_fit` (bytes per Gaussian), :func:`scaling_summary`
(both, plus the run's totals), :func:`markdown` and :func:`plot` (the report), :func:`main` (the
experiment: ``scripts/gaussian_scaling.py``, one training run per allocator setting).

The probe (:mod:`.probe`) records, per iteration, the Gaussian count after it, its peak device memory
(``torch.cuda.max_memory_allocated``, reset before every iteration) and its start on the GPU timeline;
with ``gpu_busy_every`` it also profiles a window of steps every N steps (:class:`.gpu_busy.GpuBusySeries`).
An iteration that refines is the first of its segment (the count it records is the new one): its time
and peak are reported apart (``refine_*``), not mixed into the steady figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from splatbench import children
from splatbench.report import fmt
from splatbench.results import bytes_to_gib, load_json, near_profiled_window
from splatbench.runner import train_command
from splatbench.settings import SCENE_ARGS_MISSING, BenchmarkSettings, log


def _profiled(step: int, windows: Sequence[Dict[str, Any]]) -> bool:
    return any(near_profiled_window(step, w["window"]) for w in windows)


def count_segments(probe: Dict[str, Any], min_steps: int = 3) -> List[Dict[str, Any]]:
    """One row per run of consecutive iterations with the same Gaussian count.

    Args:
        probe: a train probe's JSON (``steps``, ``gaussians``, ``peak_bytes``, ``gpu_interval_ms`` or
            ``host_begin_s``, optional ``gpu_busy_series``), all lists of equal length [iterations].
        min_steps: segments with fewer steady iterations than this are dropped (too few for a median).

    Returns:
        rows with ``gaussians``, ``first_step``, ``last_step``, ``steady_steps``, ``step_ms_median``
        (steady iterations: not the refine, not profiled), ``peak_bytes`` (max over steady iterations),
        ``refine_step_ms`` / ``refine_peak_bytes`` (the iteration that refined into this count),
        ``gpu_busy_ms`` (a profiled window inside the segment, else None).
    """
    steps: List[int] = probe.get("steps") or []
    counts: List[Optional[int]] = probe.get("gaussians") or []
    peaks: List[Optional[int]] = probe.get("peak_bytes") or []
    interval = probe.get("gpu_interval_ms")
    if not interval:
        begin = probe.get("host_begin_s") or []
        interval = [(begin[i + 1] - begin[i]) * 1000.0 for i in range(len(begin) - 1)]
    windows = [w for w in (probe.get("gpu_busy_series") or {}).get("windows", []) if w.get("steps_profiled")]
    n = min(len(steps), len(counts), len(peaks))
    rows: List[Dict[str, Any]] = []
    i = 0
    while i < n:
        j = i
        while j + 1 < n and counts[j + 1] == counts[i]:
            j += 1
        steady = [k for k in range(i + 1, j + 1) if not _profiled(steps[k], windows)]
        times = [interval[k] for k in steady if k < len(interval)]
        steady_peaks = [peaks[k] for k in steady if peaks[k] is not None]
        if counts[i] is not None and len(times) >= min_steps:
            busy = [w for w in windows if steps[i] <= w["window"][0] <= steps[j] and w.get("gaussians") == counts[i]]
            rows.append({
                "gaussians": counts[i],
                "first_step": steps[i],
                "last_step": steps[j],
                "steady_steps": len(times),
                "step_ms_median": statistics.median(times),
                "peak_bytes": max(steady_peaks) if steady_peaks else None,
                "refine_step_ms": interval[i] if i > 0 and i < len(interval) else None,
                "refine_peak_bytes": peaks[i] if i > 0 else None,
                "gpu_busy_ms": statistics.fmean(w["gpu_busy_ms"] for w in busy) if busy else None,
            })  # fmt: skip
        i = j + 1
    return rows


def memory_fit(rows: Sequence[Dict[str, Any]]) -> Dict[str, Optional[float]]:
    """Least-squares line through (Gaussians, steady peak bytes): the slope is the device memory each
    Gaussian adds (parameters, gradients, Adam state, strategy statistics, rasterizer buffers that grow
    with it); the intercept is what does not grow with it (images on the device, workspaces). None
    (with a ``note``) when the line would put the memory of zero Gaussians below zero."""
    points = [(float(r["gaussians"]), float(r["peak_bytes"])) for r in rows if r.get("peak_bytes") is not None]
    out: Dict[str, Optional[float]] = {"bytes_per_gaussian": None, "fixed_bytes": None, "points": len(points)}
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return out
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    fixed = mean_y - slope * mean_x
    if fixed < 0:
        # no device memory is negative: the bytes per Gaussian changed during the run (the rasterizer's
        # intersection buffers grow with the Gaussians' on-screen size, not their count): no line
        out["note"] = "not linear in the count"
        return out
    out["bytes_per_gaussian"] = slope
    out["fixed_bytes"] = fixed
    return out


def scaling_summary(probe: Dict[str, Any], label: str = "") -> Dict[str, Any]:
    """Rows, the memory fit and the run's totals (train wall, largest count, its peak per Gaussian)."""
    rows = count_segments(probe)
    largest = max(rows, key=lambda r: r["gaussians"]) if rows else None
    refines = [r["refine_step_ms"] for r in rows if r.get("refine_step_ms") is not None]
    peaks = [p for p in (probe.get("peak_bytes") or []) if p is not None]
    return {
        "label": label,
        "train_s": probe.get("train_s"),
        "error": probe.get("error"),
        "max_gaussians": largest["gaussians"] if largest else None,
        "train_peak_bytes": max(peaks) if peaks else None,
        "peak_bytes_per_gaussian_at_max": (
            largest["peak_bytes"] / largest["gaussians"] if largest and largest.get("peak_bytes") else None
        ),
        "refine_step_ms_total": sum(refines) if refines else None,
        "fit": memory_fit(rows),
        "rows": rows,
        "environment": probe.get("environment"),
        "host_peak_rss_bytes": probe.get("host_peak_rss_bytes"),
    }


def markdown(summaries: Sequence[Dict[str, Any]]) -> str:
    """One totals table over the runs, then each run's rows."""
    lines = [
        "| run | train wall (s) | max Gaussians | train peak (GiB) | peak bytes / Gaussian at max | "
        "fitted bytes / Gaussian | fixed (GiB) | refine iterations, total (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        fit = s["fit"]
        lines.append(
            f"| {s['label']} | {fmt(s['train_s'], '.1f')} | {fmt(s['max_gaussians'], ',')} | "
            f"{fmt(bytes_to_gib(s['train_peak_bytes']), '.2f')} | "
            f"{fmt(s['peak_bytes_per_gaussian_at_max'], '.0f')} | {fmt(fit['bytes_per_gaussian'], '.0f')} | "
            f"{fmt(bytes_to_gib(fit['fixed_bytes']), '.2f')} | {fmt(s['refine_step_ms_total'], '.0f')} |"
        )
    for s in summaries:
        lines += ["", f"**{s['label']}**: per stretch between refines", "",
                  "| Gaussians | steps | median step (ms) | GPU busy (ms/step) | peak (GiB) | refine step (ms) |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for r in s["rows"]:
            lines.append(
                f"| {r['gaussians']:,} | {r['first_step']}-{r['last_step']} | {fmt(r['step_ms_median'], '.2f')} | "
                f"{fmt(r['gpu_busy_ms'], '.2f')} | {fmt(bytes_to_gib(r['peak_bytes']), '.2f')} | "
                f"{fmt(r['refine_step_ms'], '.1f')} |"
            )
    return "\n".join(lines) + "\n"


def plot(summaries: Sequence[Dict[str, Any]], path, title: str = "") -> None:
    """Step time and GPU busy time (left), steady peak memory (right) against the Gaussian count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, s in enumerate(summaries):
        color = plt.get_cmap("tab10")(index % 10)
        rows = s["rows"]
        millions = [r["gaussians"] / 1e6 for r in rows]
        ax_time.plot(
            millions, [r["step_ms_median"] for r in rows], "o", color=color, ms=4, label=f"{s['label']}: step (wall)"
        )
        busy = [(r["gaussians"] / 1e6, r["gpu_busy_ms"]) for r in rows if r["gpu_busy_ms"] is not None]
        if busy:
            ax_time.plot(*zip(*busy), "s", color=color, ms=5, mfc="none", label=f"{s['label']}: GPU busy")
        mem = [(r["gaussians"] / 1e6, bytes_to_gib(r["peak_bytes"])) for r in rows if r["peak_bytes"] is not None]
        if mem:
            ax_mem.plot(*zip(*mem), "o", color=color, ms=4, label=s["label"])
        fit = s["fit"]
        if fit["bytes_per_gaussian"] is not None and millions:
            xs = [0.0, max(millions)]
            ax_mem.plot(xs, [bytes_to_gib(fit["fixed_bytes"] + x * 1e6 * fit["bytes_per_gaussian"]) for x in xs], ":",
                        color=color, label=f"fit: {fit['bytes_per_gaussian']:.0f} B/Gaussian")  # fmt: skip
    ax_time.set_xlabel("Gaussians (millions)")
    ax_time.set_ylabel("ms per step")
    ax_time.set_title("step time and GPU busy time")
    if ax_time.lines:
        ax_time.legend(fontsize=7)
    ax_mem.set_xlabel("Gaussians (millions)")
    ax_mem.set_ylabel("peak device memory per step (GiB)")
    ax_mem.set_title("training peak memory")
    if ax_mem.lines:
        ax_mem.legend(fontsize=7)
    else:
        ax_mem.text(0.5, 0.5, "no device memory figures (CPU run)", ha="center", transform=ax_mem.transAxes)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the experiment's command line ------------------------------------------------------------------

USAGE = """Step time, GPU busy time and peak device memory against the Gaussian count (issue 13's plot).

Trains one method once per allocator setting through the benchmark's probe (nerfstudio's ns-train
main), profiles a window of steps every --busy-every steps, cuts the run where the Gaussian count
changes and writes OUT/scaling.json, OUT/scaling.md and OUT/scaling.png (step time and GPU busy time,
peak memory, against the count; the fitted bytes per Gaussian).

    # plush-dog at 1500x1000 from the first step: densification grows 11k SfM points (to ~100k by step 1300),
    # both allocator settings
    python scripts/gaussian_scaling.py --steps 1600 --busy-every 200 --busy-steps 10 --busy-first 50 --out /tmp/scaling \\
        --scene-args "--data path/to/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2" \\
        --train-args "--pipeline.model.densify-grad-thresh 0.00001 --pipeline.model.stop-split-at 1300 \\
            --pipeline.model.num-downscales 0" --allocators empty-cache expandable
    # millions of Gaussians: start from 3M random ones (densification alone did not get there)
    python scripts/gaussian_scaling.py --steps 1000 --busy-every 200 --busy-steps 10 --busy-first 50 --out /tmp/scaling3M \\
        --scene-args "--data path/to/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2" \\
        --train-args "--pipeline.model.random-init True --pipeline.model.num-random 3000000 \\
            --pipeline.model.num-downscales 0 --pipeline.model.warmup-length 200"
    # re-render the report from a scaling.json
    python scripts/gaussian_scaling.py --from-json /tmp/scaling/scaling.json --out /tmp/scaling

Allocator settings: ``empty-cache`` (torch.cuda.empty_cache() after every refine: splat-plus's default,
splatfacto's habit), ``expandable`` (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, with which
splat-plus skips empty_cache), ``keep`` (neither).
"""

ALLOCATORS = {
    "empty-cache": ({}, ""),
    "expandable": ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, ""),
    "keep": ({}, "--pipeline.model.empty-cache-after-refine False"),
}


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(report, indent=1), "utf8")
    (out / "scaling.md").write_text(f"`{report['command']}`\n\n" + markdown(report["runs"]), "utf8")
    env = next((r["environment"] for r in report["runs"] if r.get("environment")), None) or {}
    title = f"{report['scene']}, {report['method']} on {env.get('device_name') or env.get('device_type') or '?'}"
    if any(r["rows"] for r in report["runs"]):
        plot(report["runs"], out / "scaling.png", title)
    log(f"wrote {out / 'scaling.md'}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gaussian_scaling.py", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--method", default="splat-plus")
    parser.add_argument("--scene-args", default=None,
                        help="--data and dataparser arguments, passed through to ns-train (required to train), e.g. "
                        "'--data path/to/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2'")  # fmt: skip
    parser.add_argument("--scene-name", default=None)
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument(
        "--train-args", default="", help="extra ns-train arguments (the densification that grows the count)"
    )
    parser.add_argument("--allocators", nargs="+", choices=sorted(ALLOCATORS), default=["empty-cache"])
    parser.add_argument("--busy-every", type=int, default=200, help="a profiled window every N steps (0: none)")
    parser.add_argument("--busy-steps", type=int, default=10, help="steps per profiled window")
    parser.add_argument("--busy-first", type=int, default=None,
                        help="first profiled step (default: --busy-steps); place the windows between refines, so "
                        "that each sees one Gaussian count")  # fmt: skip
    parser.add_argument("--device-type", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a run is stopped")
    parser.add_argument("--from-json", type=Path, default=None, help="re-render the report of this scaling.json")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench/gaussian-scaling"))
    args = parser.parse_args(argv)
    if args.from_json is not None:
        write_report(json.loads(args.from_json.read_text("utf8")), args.out)
        return 0
    if args.scene_args is None:
        parser.error(SCENE_ARGS_MISSING)
    if args.busy_every and args.busy_every <= args.busy_steps:
        parser.error("--busy-every must be larger than --busy-steps")
    settings = BenchmarkSettings(
        methods=[args.method], steps=args.steps, skip_steps=0, scene_args=args.scene_args, scene_name=args.scene_name,
        train_args=args.train_args, device_type=args.device_type, run_eval=False, timeout_s=args.timeout,
        gpu_busy_steps=args.busy_steps if args.busy_every else 0, gpu_busy_start=args.busy_steps if args.busy_first is None else args.busy_first,
        gpu_busy_every=args.busy_every, lpips_standin=False,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device_type == "cuda" and not children.prebuild_gsplat(args.out, args.timeout):
        return 1
    report = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "scene": settings.describe_scene(),
        "method": args.method,
        "runs": [],
    }
    failed = False
    for name in args.allocators:
        extra_env, extra_args = ALLOCATORS[name]
        run_settings = dataclasses.replace(settings, train_args=f"{settings.train_args} {extra_args}".strip())
        run_dir = args.out / "runs" / name
        probe_path = run_dir / "probe_train.json"
        command = train_command(run_settings, args.method, 1, run_dir)
        env = children.child_env(run_settings, 1, probe_path, None, method=args.method)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env.update(extra_env)
        log(f"{name}: training {args.steps} steps (log: {args.out / 'logs' / (name + '.log')})")
        child = children.run_child(command, args.out / "logs" / f"{name}.log", env, args.timeout, name)
        probe = load_json(probe_path) or {}
        summary = scaling_summary(probe, name)
        summary["process_wall_s"] = child.wall_s
        summary["returncode"] = child.returncode
        if child.returncode != 0 or child.timed_out:
            failed = True
            summary["error"] = summary.get("error") or children.failure_reason(child.log_path)
            log(f"{name}: failed: {summary['error']}")
        else:
            log(f"{name}: {summary['max_gaussians']} Gaussians at most, train {summary['train_s']:.0f} s")
        report["runs"].append(summary)
        write_report(report, args.out)  # what finished survives a later failure
    return 1 if failed else 0
