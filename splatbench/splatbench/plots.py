"""The benchmark's plots: held-out PSNR vs wall time, step time, memory, speedup vs GPU count.

Entry point: :func:`make_plots` (called by :func:`splatbench.outputs.write_outputs`).
matplotlib is imported inside it (install extra ``bench``), so nothing else in bench/ needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from splatbench.report import device_line
from splatbench.stats import summarize_repeats


def quality_vs_time_points(results: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The points of the quality-vs-time plot: one per run; with repeats, one per method and GPU count
    at the mean PSNR (± sd over every successful repeat) and the mean train wall of its timing runs
    (runs that shared the GPU have no timing, and would otherwise leave their quality out)."""
    runs = [r for r in results["runs"] if r["status"] in ("ok", "eval-failed")]
    if not any((r.get("repeat") or 1) > 1 for r in runs):
        return [
            {"method": r["method"], "label": f"{r['method']} ×{r['num_gpus']}", "wall_s": r["train_wall_s"],
             "psnr": r["psnr"], "psnr_sd": None}
            for r in runs if r.get("psnr") is not None and r.get("train_wall_s")
        ]  # fmt: skip
    points = []
    for entry in results.get("summary") or summarize_repeats(runs, results.get("reference_method")):
        psnr, wall = entry["metrics"].get("psnr") or {}, entry["metrics"].get("train_wall_s") or {}
        if psnr.get("mean") is None or wall.get("mean") is None:
            continue
        points.append({
            "method": entry["method"], "wall_s": wall["mean"], "psnr": psnr["mean"], "psnr_sd": psnr.get("sd"),
            "label": f"{entry['method']} ×{entry['num_gpus']} ({psnr['n']} runs)",
        })  # fmt: skip
    return points


def make_plots(results: Dict[str, Any], plot_dir: Path) -> Dict[str, Path]:
    """PSNR vs wall time, step time, memory, speedup vs GPU count (separate PNGs + one 2x2 summary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    runs = [r for r in results["runs"] if r["status"] in ("ok", "eval-failed")]
    methods = list(dict.fromkeys(r["method"] for r in results["runs"]))
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    repeats = any((r.get("repeat") or 1) > 1 for r in runs)

    def label(r: Dict[str, Any]) -> str:
        return f"{r['method']} ×{r['num_gpus']}" + (f" #{r.get('repeat') or 1}" if repeats else "")

    def psnr_vs_time(ax):
        for point in quality_vs_time_points(results):
            ax.errorbar(point["wall_s"], point["psnr"], yerr=point["psnr_sd"] or 0.0, fmt="o",
                        color=colors[point["method"]], markersize=6, capsize=3)  # fmt: skip
            ax.annotate(point["label"], (point["wall_s"], point["psnr"]), fontsize=8, xytext=(4, 4),
                        textcoords="offset points")  # fmt: skip
        ax.margins(x=0.3, y=0.15)  # room for the labels
        ax.set_xlabel("training wall time (s)")
        ax.set_ylabel("held-out PSNR (dB)" + (", mean ± sd" if repeats else ""))
        ax.set_title("quality vs time")

    def step_time(ax):
        bars = [r for r in runs if r.get("step_time_ms_median")]
        ax.bar([label(r) for r in bars], [r["step_time_ms_median"] for r in bars],
               color=[colors[r["method"]] for r in bars])  # fmt: skip
        ax.set_ylabel("median step time (ms)")
        ax.set_title("step time")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)

    def memory(ax):
        bars = [r for r in runs if r.get("train_peak_gib") is not None or r.get("eval_peak_gib") is not None]
        xs = list(range(len(bars)))
        ax.bar([x - 0.2 for x in xs], [r.get("train_peak_gib") or 0 for r in bars], width=0.4, label="train")
        ax.bar([x + 0.2 for x in xs], [r.get("eval_peak_gib") or 0 for r in bars], width=0.4, label="eval")
        ax.set_xticks(xs, [label(r) for r in bars], rotation=20, fontsize=8)
        ax.set_ylabel("peak device memory (GiB)")
        ax.set_title("memory")
        if bars:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no device memory (CPU run)", ha="center", va="center", transform=ax.transAxes)

    def speedup(ax):
        max_w = 1
        for m in methods:
            pts = sorted((r["num_gpus"], r["speedup"]) for r in runs if r["method"] == m and r.get("speedup"))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colors[m], label=m)
                max_w = max(max_w, pts[-1][0])
        ax.plot([1, max_w], [1, max_w], linestyle="--", color="gray", label="ideal")
        ax.set_xticks(sorted({1, max_w} | {r["num_gpus"] for r in runs}))
        ax.set_xlabel("GPUs")
        ax.set_ylabel("speedup (train wall time)")
        ax.set_title("scaling")
        ax.legend(fontsize=8)

    panels = {"psnr_vs_time": psnr_vs_time, "step_time": step_time, "memory": memory, "speedup": speedup}
    paths: Dict[str, Path] = {}
    for name, draw in panels.items():
        fig, ax = plt.subplots(figsize=(5, 4))
        draw(ax)
        fig.tight_layout()
        paths[name] = plot_dir / f"{name}.png"
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    for ax, draw in zip(axes.flat, panels.values()):
        draw(ax)
    fig.suptitle(f"{results.get('scene')}, {results.get('settings', {}).get('steps')} steps, {device_line(results)}")
    fig.tight_layout()
    paths["summary"] = plot_dir / "summary.png"
    fig.savefig(paths["summary"], dpi=110)
    plt.close(fig)
    return paths


def quality_vs_time_scenes(results_list: List[Dict[str, Any]], out: Path, time_key: str = "train_wall_s") -> Path:
    """One panel per scene (a merged results.json each): every method's held-out PSNR against its training
    wall time, each run a small dot and the mean over runs a large one (``scripts/plot_quality_vs_time.py``;
    the README's picture). Runs without timing (trained side by side) sit at their method's timed wall."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for results in results_list for r in results["runs"]))
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    fig, axes = plt.subplots(1, len(results_list), figsize=(5.5 * len(results_list), 4.2), squeeze=False)
    for ax, results in zip(axes[0], results_list):
        for entry in results.get("summary") or summarize_repeats(results["runs"], results.get("reference_method")):
            wall = (entry["metrics"].get(time_key) or {}).get("mean")
            psnr = entry["metrics"].get("psnr") or {}
            if wall is None or psnr.get("mean") is None:
                continue
            method = entry["method"]
            values = [r["psnr"] for r in results["runs"] if r["method"] == method and r.get("psnr") is not None
                      and r["num_gpus"] == entry["num_gpus"]]  # fmt: skip
            ax.scatter([wall] * len(values), values, s=12, color=colors[method], alpha=0.5)
            ax.scatter([wall], [psnr["mean"]], s=70, color=colors[method], edgecolor="black",
                       label=f"{method} ({psnr['n']} runs)")  # fmt: skip
        ax.set_xlim(left=0)
        ax.set_xlabel("training wall time (s), one timed run")
        ax.set_ylabel("held-out PSNR (dB)")
        ax.set_title(f"{results.get('scene')}: {device_line(results)}", fontsize=9)
        ax.legend(fontsize=8, loc="best")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
