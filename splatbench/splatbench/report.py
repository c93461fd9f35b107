"""The benchmark's reports as text: the Markdown tables and the README "Results" section.

Entry points: :func:`markdown_report` (results.md), :func:`readme_section` (readme_section.md), with
:func:`markdown_table` (one row per run), :func:`summary_table` (repeats: mean ± sd per method) and
:func:`comparison_lines` (with repeats: differences of means ± their Welch confidence interval).
:mod:`.outputs` writes them to files; :mod:`.plots` draws the figures.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from splatbench.per_image import per_image_table
from splatbench.results import TIMING_FIELDS
from splatbench.settings import REFINE_COUNT_KEYS, SOURCE_DIGEST_KEY, run_tag


def fmt(value: Any, spec: str = ".3f", none: str = "–") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return none
    return format(value, spec)


def _refine_cell(densification: Optional[Dict[str, Any]]) -> str:
    if not densification:
        return "–"
    parts = [f"{densification.get('refine_events', 0)} events"]
    for key in REFINE_COUNT_KEYS:
        if densification.get(key):
            parts.append(f"{key} {densification[key]:,}")
    if densification.get("refine_seconds") is not None:
        scoring = densification.get("refine_scoring_seconds")
        parts.append(f"{densification['refine_seconds']:.1f} s in refines"
                     + (f" ({scoring:.1f} s scoring)" if scoring is not None else ""))  # fmt: skip
    return ", ".join(parts)


def has_repeats(results: Dict[str, Any]) -> bool:
    return any((r.get("repeat") or 1) > 1 for r in results["runs"])


def _tag(r: Dict[str, Any], repeats: bool) -> str:
    return run_tag(r["method"], r["num_gpus"], r.get("repeat") if repeats else None)


def markdown_table(results: Dict[str, Any]) -> str:
    runs = results["runs"]
    # optional columns appear only when a run has them: in-training evaluation (--eval-every),
    # GPU busy time (--gpu-busy-steps), the repeat number (--repeats)
    in_training_eval = any(r.get("in_training_eval_peak_gib") is not None for r in runs)
    gpu_busy = any(r.get("gpu_busy") or r.get("gpu_busy_ms") is not None for r in runs)
    repeats = has_repeats(results)
    ply = any(r.get("ply_bytes") is not None for r in runs)  # --export-ply
    reserved = any(r.get("train_reserved_peak_gib") is not None for r in runs)  # recorded since 2026-12-02
    header = (
        "| method | GPUs "
        + ("| repeat " if repeats else "")
        + "| status | steps | median step (ms) "
        + ("| step at window (ms) | GPU busy (ms/step) | wall/busy " if gpu_busy else "")
        + "| process wall (s) | train wall (s) | speedup | train peak (GiB) "
        + ("| train reserved (GiB) " if reserved else "")
        + ("| in-training eval peak (GiB) " if in_training_eval else "")
        + "| eval peak (GiB) | PSNR | SSIM | LPIPS | Gaussians "
        + ("| PLY (MB) " if ply else "")
        + "| densification |"
    )
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for r in runs:
        in_training_cell = [_fmt_gib(r.get("in_training_eval_peak_gib"))] if in_training_eval else []
        status = r["status"] if r["status"] == "ok" or not r.get("error") else f"{r['status']} (see notes)"
        lpips_none = "n/a" if r["status"] == "ok" else "–"  # n/a: evaluated, but LPIPS weights not available
        timing_none = "–"
        if r.get("timing_valid") is False:  # shared its GPU: whatever timing it holds is not shown
            timing_none, r = "discarded", {**r, **{k: None for k in TIMING_FIELDS}}
        cells = [f"`{r['method']}`", str(r["num_gpus"])]
        cells += [str(r.get("repeat") or 1)] if repeats else []
        cells += [
            status,
            str(r["timed_steps"]) if r.get("timed_steps") else "–",
            fmt(r.get("step_time_ms_median"), ".2f", none=timing_none),
        ]
        if gpu_busy:
            cells += [
                fmt(r.get("window_step_ms_median"), ".2f", none=timing_none),
                fmt(r.get("gpu_busy_ms"), ".2f", none=timing_none),
                fmt(r.get("wall_over_busy"), ".2f", none=timing_none),
            ]
        cells += [
            fmt(r.get("process_wall_s"), ".1f", none=timing_none),
            fmt(r.get("train_wall_s"), ".1f", none=timing_none),
            fmt(r.get("speedup"), ".2f") + ("×" if r.get("speedup") else ""),
            _fmt_gib(r.get("train_peak_gib")),
            *([_fmt_gib(r.get("train_reserved_peak_gib"))] if reserved else []),
            *in_training_cell,
            _fmt_gib(r.get("eval_peak_gib")),
            fmt(r.get("psnr"), ".2f"),
            fmt(r.get("ssim"), ".4f"),
            fmt(r.get("lpips"), ".4f", none=lpips_none),
            f"{r['num_gaussians']:,}" if isinstance(r.get("num_gaussians"), int) else "–",
            *([fmt(r["ply_bytes"] / 1e6 if r.get("ply_bytes") is not None else None, ".2f")] if ply else []),
            _refine_cell(r.get("densification")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        f"- `{_tag(r, repeats)}` {r['status']}: {r['error']}" for r in runs if r["status"] != "ok" and r.get("error")
    ] + [f"- `{_tag(r, repeats)}`: no PLY size: {r['ply_error']}" for r in runs if r.get("ply_error")]
    return "\n".join(lines) + "\n" + ("\nNotes:\n\n" + "\n".join(notes) + "\n" if notes else "")


def kernel_group_table(results: Dict[str, Any]) -> Optional[str]:
    """GPU time per step by kernel group (``gpu_busy.groups_ms``) of every timed run that has it:
    where the busy time goes (rasterization, SSIM convolutions, optimizer ...). None when no run has it."""
    repeats = has_repeats(results)
    rows = [
        r for r in results["runs"]
        if r.get("timing_valid") is not False and (r.get("gpu_busy") or {}).get("groups_ms")
    ]  # fmt: skip
    if not rows:
        return None
    groups: List[str] = []
    for r in rows:
        groups += [g for g in r["gpu_busy"]["groups_ms"] if g not in groups]
    header = "| method | GPU busy (ms/step) | " + " | ".join(groups) + " |"
    lines = [header, "|" + "---|" * (len(groups) + 2)]
    for r in rows:
        busy = r["gpu_busy"]
        cells = [f"`{_tag(r, repeats)}`", fmt(busy.get("gpu_busy_ms"), ".2f")]
        cells += [fmt(busy["groups_ms"].get(g), ".2f") for g in groups]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def phase_table(results: Dict[str, Any]) -> Optional[str]:
    """Median step (ms) in each tenth of every timed run's steps (``step_ms_by_tenth``), each cell with
    the first step of its tenth: where in the schedule a method gains or loses time. None without any."""
    repeats = has_repeats(results)
    rows = [r for r in results["runs"] if r.get("timing_valid") is not False and r.get("step_ms_by_tenth")]
    if not rows:
        return None
    width = max(len(r["step_ms_by_tenth"]) for r in rows)
    header = "| method | " + " | ".join(f"tenth {k + 1}" for k in range(width)) + " |"
    lines = [header, "|" + "---|" * (width + 1)]
    for r in rows:
        cells = [f"{ms:.2f} (from {int(step):,})" for step, ms in r["step_ms_by_tenth"]]
        cells += ["–"] * (width - len(cells))
        lines.append(f"| `{_tag(r, repeats)}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def train_wall_table(results: Dict[str, Any]) -> Optional[str]:
    """Every timed run's training wall time by part (``train_wall_parts``, seconds): the start-up before
    the first step (the warmup among it), the steps (the profiled window among them) and the end.
    None when no run has the parts."""
    repeats = has_repeats(results)
    rows = [r for r in results["runs"] if r.get("timing_valid") is not False and r.get("train_wall_parts")]
    if not rows:
        return None
    lines = ["| method | train wall | before the first step | of it warmup | steps | of them the profiled window "
             "| after the last step |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        parts = r["train_wall_parts"]
        cells = [f"`{_tag(r, repeats)}`", fmt(r.get("train_wall_s"), ".1f")]
        cells += [fmt(parts.get(key), ".1f") for key in ("before_first_step_s", "warmup_s", "steps_s",
                                                          "profiled_window_s", "after_last_step_s")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fmt_gib(value: Any) -> str:
    return fmt(value, ".2f")


SUMMARY_COLUMNS = (
    ("PSNR", "psnr", ".2f"), ("SSIM", "ssim", ".4f"), ("LPIPS", "lpips", ".4f"),
    ("median step (ms)", "step_time_ms_median", ".2f"), ("step at window (ms)", "window_step_ms_median", ".2f"),
    ("GPU busy (ms/step)", "gpu_busy_ms", ".2f"), ("wall/busy", "wall_over_busy", ".2f"),
    ("process wall (s)", "process_wall_s", ".1f"), ("train wall (s)", "train_wall_s", ".1f"),
    ("Gaussians", "num_gaussians", ",.0f"), ("PLY bytes", "ply_bytes", ",.0f"),
    ("train peak (GiB)", "train_peak_gib", ".2f"), ("train reserved (GiB)", "train_reserved_peak_gib", ".2f"),
    ("eval peak (GiB)", "eval_peak_gib", ".2f"),
)  # fmt: skip


def _mean_sd_cell(stat: Dict[str, Any], spec: str) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    text = fmt(stat["mean"], spec)
    return text + (f" ± {fmt(stat['sd'], spec)}" if stat.get("sd") is not None else "")


def summary_table(results: Dict[str, Any]) -> str:
    """Repeats: per method and GPU count, mean ± sample sd (timing figures over timing runs only)."""
    summary = results.get("summary") or []
    columns = [c for c in SUMMARY_COLUMNS if any((s["metrics"].get(c[1]) or {}).get("n") for s in summary)]
    header = "| method | GPUs | runs ok (timing) | " + " | ".join(c[0] for c in columns) + " |"
    lines = [header, "|" + "---|" * (len(columns) + 3)]
    for s in summary:
        cells = [f"`{s['method']}`", str(s["num_gpus"]), f"{s['ok']}/{s['runs']} ({s['timing_runs']})"]
        cells += [_mean_sd_cell(s["metrics"].get(key) or {}, spec) for _, key, spec in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _repeat_comparison_lines(results: Dict[str, Any]) -> List[str]:
    lines = []
    units = {"psnr": (" dB", "+.2f"), "ssim": ("", "+.4f"), "lpips": ("", "+.4f"), "step_time_ms_median": (" ms", "+.2f"),
             "process_wall_s": (" s", "+.1f"), "train_wall_s": (" s", "+.1f"), "num_gaussians": ("", "+,.0f"),
             "train_peak_gib": (" GiB", "+.2f")}  # fmt: skip
    summaries = results.get("summary") or []
    for s in summaries:
        diffs = s.get("vs_reference")
        if not diffs:
            continue
        parts = [_difference_text(key, diffs.get(key) or {}, unit, spec) for key, (unit, spec) in units.items()]
        parts = [p for p in parts if p]
        if parts:
            lines.append(f"- `{s['method']}` − `{s['reference']}` ({s['num_gpus']} GPU), difference of means: "
                         + ", ".join(parts))  # fmt: skip
        ref = next((r for r in summaries if r["method"] == s["reference"] and r["num_gpus"] == s["num_gpus"]), None)
        ratios = _ratio_of_means_text(s, ref) if ref else ""
        if ratios:
            lines.append(f"- `{s['method']}` / `{s['reference']}` ({s['num_gpus']} GPU), ratio of means: {ratios}")
    return lines


RATIO_METRICS = (("process wall", "process_wall_s"), ("train wall", "train_wall_s"), ("Gaussians", "num_gaussians"),
                 ("train peak", "train_peak_gib"), ("train reserved", "train_reserved_peak_gib"),
                 ("PLY", "ply_bytes"))  # fmt: skip


def _ratio_of_means_text(method: Dict[str, Any], reference: Dict[str, Any]) -> str:
    """``process wall 0.203×, Gaussians 0.419×, ...``: the method's mean over the reference's mean, for
    the figures that targets are stated as fractions of the reference (timing ones over timing runs)."""
    parts = []
    for name, key in RATIO_METRICS:
        ours, theirs = (method["metrics"].get(key) or {}).get("mean"), (reference["metrics"].get(key) or {}).get("mean")
        if ours is not None and theirs:
            parts.append(f"{name} {ours / theirs:.3f}×")
    return ", ".join(parts)


def _difference_text(key: str, d: Dict[str, Any], unit: str, spec: str) -> str:
    """``psnr +0.20 ± 0.35 dB (90 % CI, Welch, n 3 vs 4 runs; SE 0.14)``: the difference of means ± the
    half-width of its Welch confidence interval (:func:`splatbench.stats.welch_interval`), the
    method's runs first. Without an interval (fewer than two runs on a side), the difference and why;
    a summary written before the interval existed (no ``welch``) keeps its ± standard error."""
    if d.get("diff") is None:
        return ""
    diff, plain = fmt(d["diff"], spec), spec.lstrip("+")
    welch = d.get("welch")
    if welch is None:
        se = f" ± {fmt(d['se'], plain)} SE" if d.get("se") is not None else ""
        return f"{key} {diff}{se}{unit} (n {d['n']} vs {d['n_ref']})"
    runs = f"n {welch['n_b']} vs {welch['n_a']} runs"
    if welch.get("half_width") is None:
        return f"{key} {diff}{unit} (no interval: {welch.get('reason') or 'not computable'})"
    level = f"{100 * welch['confidence']:g} % CI, Welch"
    se = f"; SE {fmt(d['se'], plain)}" if d.get("se") is not None else ""
    note = f"; {welch['reason']}" if welch.get("reason") else ""
    return f"{key} {diff} ± {fmt(welch['half_width'], plain)}{unit} ({level}, {runs}{se}{note})"


def comparison_lines(results: Dict[str, Any]) -> List[str]:
    """Each method's 1-GPU run against the reference method's (step-time ratio, PSNR/SSIM deltas), and
    each W-GPU run against the same method on 1 GPU (speedup, its fraction of W, PSNR delta).
    With repeats: differences of means to the reference method ± the half-width of their 90 % Welch
    confidence interval."""
    if has_repeats(results):
        return _repeat_comparison_lines(results)
    reference = results.get("reference_method")
    by_key = {(r["method"], r["num_gpus"]): r for r in results["runs"] if r["status"] == "ok"}
    scaling = []
    for r in results["runs"]:
        single = by_key.get((r["method"], 1))
        if r["num_gpus"] == 1 or r["status"] != "ok" or single is None or not r.get("speedup"):
            continue
        text = f"- `{r['method']}` on {r['num_gpus']} GPUs vs 1: speedup {r['speedup']:.2f}× "
        text += f"({r['speedup'] / r['num_gpus']:.2f} of ideal)"
        if r.get("psnr") is not None and single.get("psnr") is not None:
            text += f", PSNR {r['psnr'] - single['psnr']:+.2f} dB"
        scaling.append(text)
    lines = []
    ref = by_key.get((reference, 1))
    for r in results["runs"]:
        if ref is None or r["num_gpus"] != 1 or r["method"] == reference or r["status"] != "ok":
            continue
        parts = []
        if r.get("process_wall_s") and ref.get("process_wall_s"):
            parts.append(f"process wall {r['process_wall_s'] / ref['process_wall_s']:.3f}×")
        if r.get("step_time_ms_median") and ref.get("step_time_ms_median"):
            parts.append(f"step time {r['step_time_ms_median'] / ref['step_time_ms_median']:.3f}×")
        if r.get("train_peak_gib") and ref.get("train_peak_gib"):
            parts.append(f"train memory {r['train_peak_gib'] / ref['train_peak_gib']:.2f}×")
        if r.get("ply_bytes") and ref.get("ply_bytes"):
            parts.append(f"PLY {r['ply_bytes'] / ref['ply_bytes']:.3f}×")
        if r.get("psnr") is not None and ref.get("psnr") is not None:
            parts.append(f"PSNR {r['psnr'] - ref['psnr']:+.2f} dB")
        if r.get("ssim") is not None and ref.get("ssim") is not None:
            parts.append(f"SSIM {r['ssim'] - ref['ssim']:+.4f}")
        lines.append(f"- `{r['method']}` vs `{reference}` (1 GPU): " + ", ".join(parts))
    return lines + scaling


def versions_line(env: Dict[str, Any]) -> str:
    keys = ("torch", "cuda", "nerfstudio", "gsplat", "ns-splat-plus", SOURCE_DIGEST_KEY, "python")
    return ", ".join(f"{k} {env[k]}" for k in keys if env.get(k))


def date_line(results: Dict[str, Any], day_only: bool = False) -> str:
    """When the runs were made: a command's start, or for a merge the first part's start to the last
    part's end (a merge pools runs of several commands, often of several days)."""
    created, finished = results.get("created") or "", results.get("finished") or ""
    if day_only:
        created, finished = created[:10], finished[:10]
    if results.get("merged_from") and finished and finished != created:
        return f"{created} to {finished}"
    return created or "–"


def device_line(results: Dict[str, Any]) -> str:
    env = results.get("environment") or {}
    name = env.get("device_name") or env.get("device_type") or "unknown device"
    gpus = sorted({r["num_gpus"] for r in results["runs"]})
    return f"{name} (GPU counts: {', '.join(map(str, gpus))})" if env.get("device_type") == "cuda" else str(name)


def measurement_notes(results: Dict[str, Any]) -> str:
    settings = results.get("settings", {})
    clocks = {r.get("step_clock") for r in results["runs"] if r.get("step_clock")}
    clock = "the GPU timeline (CUDA events)" if clocks == {"cuda-events"} else "the host clock"
    if len(clocks) > 1:
        clock = "CUDA events on GPU, the host clock on CPU"
    lpips_missing = any(r["status"] == "ok" and r.get("lpips") is None for r in results["runs"])
    text = (
        f"Median step time over steps ≥ {settings.get('effective_skip_steps')}: one whole training iteration "
        f"incl. densification, start to start, on {clock}. Process wall: the whole training process (ns-train's "
        "main under the probe), start to exit: imports, set-up, training, saving. Train wall: nerfstudio's `Trainer.train`. "
        "Train peak: max of `torch.cuda.max_memory_allocated` over iterations; train reserved: max of "
        "`torch.cuda.max_memory_reserved`, the caching allocator's hold, CUDA graphs' private pools included (a "
        "graph's replays use its pool, which the allocated peak does not see); eval peak: the whole `ns-eval` "
        "process. PSNR/SSIM/LPIPS: `ns-eval` on the held-out split"
        + (" (LPIPS n/a: its AlexNet weights are not available offline)" if lpips_missing else "")
        + ". Speedup: 1-GPU train wall / W-GPU train wall of the same method."
    )
    if any(r.get("gpu_busy") or r.get("gpu_busy_ms") is not None for r in results["runs"]):
        text += (
            f" GPU busy: summed device time of kernels, memcpy and memset per step (torch.profiler, CUDA only, "
            f"{settings.get('gpu_busy_steps')} steps; those steps are left out of the step-time median); "
            "step at window: median step within 500 steps of the window (where the busy time was measured); "
            "wall/busy: that median step / GPU busy (1.0: the GPU never idles)."
        )
    if has_repeats(results):
        text += (
            f" {_runs_per_method(results)}, interleaved; mean ± sample sd; differences of means (method − reference) "
            "± the half-width of their 90 % Welch confidence interval (Welch–Satterthwaite df; none below 2 runs "
            "a side)."
        )
        if settings.get("concurrent_quality"):
            text += " Repeats after the first trained at the same time on one GPU: their timing is discarded."
    return text


def _runs_per_method(results: Dict[str, Any]) -> str:
    """ "3 repeats per method", or each method's count where they differ (a merge may pool 8 and 7)."""
    counts = {(s["method"], s["num_gpus"]): s["runs"] for s in results.get("summary") or []}
    if len(set(counts.values())) <= 1:
        return f"{next(iter(counts.values()), 0)} repeats per method"
    named = ", ".join(f"{method}{'' if gpus == 1 else f' ×{gpus}'} {n}" for (method, gpus), n in counts.items())
    return f"repeats per method: {named}"


def _provenance_lines(results: Dict[str, Any]) -> List[str]:
    """The command; for a merge, the merge command and each merged file's own command."""
    merged = results.get("merged_from") or []
    if not merged:
        return [f"- command: `{results['command']}`"] if results.get("command") else []
    lines = [f"- merged by: `{results['command']}`"] if results.get("command") else []
    lines.append(f"- merged from {len(merged)} results files:")
    for part in merged:
        renumbered = part.get("renumbered")
        note = f" (renumbered, timing discarded: {', '.join(renumbered)})" if renumbered else ""
        digests = part.get("ns_splat_plus_source")
        where = [w for w in (part.get("device"), digests and "source " + ", ".join(digests)) if w]
        where_text = f" ({'; '.join(where)})" if where else ""
        lines.append(f"  - `{part.get('source')}`{where_text}: `{part.get('command')}`{note}")
    return lines


def _cache_warm_lines(results: Dict[str, Any]) -> List[str]:
    """--warm-caches: the runs before the timed ones, with their process walls (the cold starts)."""
    warm = results.get("cache_warm_runs")
    if not warm:
        return []
    walls = ", ".join(
        f"`{w['method']}` {w['process_wall_s']:.1f} s" + ("" if w["reached_first_step"] else " (no first step)")
        for w in warm
    )
    return [
        "- caches warmed first (--warm-caches): each method's training started once and ended after its first "
        f"step, before every run here; their process walls (the cold starts): {walls}"
    ]


def markdown_report(results: Dict[str, Any]) -> str:
    settings = results.get("settings", {})
    env = results.get("environment") or {}
    out = [
        f"# Benchmark: {results.get('scene')}, {settings.get('steps')} steps",
        "",
        f"- date: {date_line(results)}",
        f"- device: {device_line(results)}",
        f"- versions: {versions_line(env)}",
        f"- scene arguments: `{settings.get('scene_args')}`",
    ]
    if settings.get("data_paths"):  # a merge with --data-copies
        paths = ", ".join(f"`{p}`" for p in settings["data_paths"])
        out.append(f"- scene data: one dataset, copied to {paths} by the merged commands (--data-copies)")
    out += _provenance_lines(results)
    out += _cache_warm_lines(results)
    if has_repeats(results):
        out += ["", summary_table(results)]
    out += ["", markdown_table(results)]
    comparisons = comparison_lines(results)
    if comparisons:
        out += comparisons + [""]
    kernels = kernel_group_table(results)
    if kernels:
        out += [
            "GPU time per step by kernel group, in the GPU-busy window (grouped by kernel name, "
            "`splatbench.gpu_busy.KERNEL_GROUPS`; the longest kernels are in results.json, "
            "`gpu_busy.top_kernels`):",
            "",
            kernels,
        ]
    phases = phase_table(results)
    if phases:
        out += ["Median step (ms) in each tenth of the timed steps (from: its first step):", "", phases]
    images = per_image_table(results)
    if images:
        out += ["Held-out PSNR by image (dB): the mean over each method's runs, the lowest run in brackets "
                "(lowest means first; `splatbench.per_image`):", "", images]  # fmt: skip
    parts = train_wall_table(results)
    if parts:
        out += ["Training wall time by part (s, host clock; the start-up and the end do not divide by GPUs or "
                "cameras per step):", "", parts]  # fmt: skip
    out += [measurement_notes(results), ""]
    return "\n".join(out)


def readme_section(results: Dict[str, Any], plot_ref: Optional[str]) -> str:
    """The README "Results" section: table, one plot, date, GPU, versions and the command."""
    settings = results.get("settings", {})
    env = results.get("environment") or {}
    date = date_line(results, day_only=True)
    out = [
        "## Results",
        "",
        f"{results.get('scene')}, {settings.get('steps')} training steps, measured {date} on "
        f"{device_line(results)}; {versions_line(env)}.",
        "",
        summary_table(results) if has_repeats(results) else markdown_table(results),
    ]
    comparisons = comparison_lines(results)
    if comparisons:
        out += comparisons + [""]
    if plot_ref:
        out += [f"![benchmark plots]({plot_ref})", ""]
    merged = results.get("merged_from") or []
    how = (
        f"merges {len(merged)} results files; each file's own command is in results.json, `merged_from`"
        if merged
        else "results, plots and this section"
    )
    out += [measurement_notes(results), "", f"Regenerate ({how}):", "", "```bash"]
    out.append(results.get("command") or "python scripts/benchmark.py")
    out += ["```", ""]
    return "\n".join(out)
