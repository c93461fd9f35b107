"""GPU checks for issue 4: fresh-process consistency with warmup, and the cost of instrumentation.

    SCENE="--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8"
    # three fresh processes of the same 3000-step fox run (the first on a fresh machine):
    # held-out PSNR / SSIM (ns-eval), Gaussian count, warmup time, median step time
    python scripts/warmup_check.py fresh --runs 3 --out /tmp/warmup_check --scene-args "$SCENE"
    # instrumentation on vs off, side by side in one command (alternating runs, median step times)
    python scripts/warmup_check.py overhead --pairs 3 --out /tmp/instrumentation_overhead --scene-args "$SCENE"
    # ... and within one run: on for N steps, off for N steps, ... (one training trajectory, so the
    # Gaussian count, which sets the step time, is the same for both; the least noisy figure)
    python scripts/warmup_check.py interleave --runs 1 --toggle-every 100 --out /tmp/overhead --scene-args "$SCENE"

Each run is its own process through the benchmark's trainer probe (``python -m
splatbench.probe train splat-plus ...``, which is ns-train with per-step CUDA-event timing;
replayed warmup steps are not counted; ``interleave`` uses the probe's instrumentation toggle,
``NS_SPLAT_PLUS_TOGGLE_INSTRUMENTATION``, and ``splatbench.results.instrumentation_overhead``).
Results go to OUT/{fresh,overhead}.json and Markdown tables on stdout. ``--scene-args`` is required
(e.g. ``--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8``). Entry point:
:func:`main` (``scripts/warmup_check.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from splatbench.options import PROBE_OUT_ENV, ProbeOptions
from splatbench.results import instrumentation_overhead
from splatbench.settings import SCENE_ARGS_MISSING

WARMUP_LINE = re.compile(r"Warmup: (\d+) training steps in ([0-9.]+) s \(first ([0-9.]+) s\)")


def _train(
    out: Path,
    name: str,
    scene_args: str,
    steps: int,
    extra: List[str],
    skip: int,
    env_extra: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    run_out = out / name
    run_out.mkdir(parents=True, exist_ok=True)
    probe_json = run_out / "probe.json"
    cmd = [
        sys.executable, "-m", "splatbench.probe", "train", "splat-plus",
        "--output-dir", str(run_out), "--experiment-name", name, "--timestamp", "run",
        "--max-num-iterations", str(steps), "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
        "--steps-per-eval-all-images", "0", "--steps-per-eval-image", "0", "--steps-per-eval-batch", "0",
        *extra,
        *shlex.split(scene_args),  # top-level --data, then the dataparser and its options
    ]  # fmt: skip
    env = dict(os.environ, **{PROBE_OUT_ENV: str(probe_json)}, **(env_extra or {}))
    print(f"[warmup_check] {name}: {shlex.join(cmd)}", flush=True)
    started = time.perf_counter()
    with open(run_out / "train.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - started
    text = (run_out / "train.log").read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed (exit {proc.returncode}); see {run_out / 'train.log'}:\n{text[-3000:]}")
    result: Dict[str, Any] = {"name": name, "process_wall_s": wall, "args": extra}
    match = WARMUP_LINE.search(text)
    if match:
        result.update(
            warmup_steps=int(match.group(1)), warmup_s=float(match.group(2)), warmup_first_step_s=float(match.group(3))
        )
    probe = json.loads(probe_json.read_text())
    steps_list = probe["steps"]
    keep = [i for i, s in enumerate(steps_list) if s >= skip]
    host = [(probe["host_end_s"][i] - probe["host_begin_s"][i]) * 1e3 for i in keep]
    gpu = probe.get("gpu_interval_ms") or []
    gpu = [gpu[i] for i in keep if i < len(gpu)]
    if probe.get("instrumentation_modes"):  # a toggle run: medians of the steps with instrumentation on and off
        result.update(instrumentation_overhead(probe, skip))
    result.update(
        step_host_ms_median=statistics.median(host) if host else None,
        step_gpu_interval_ms_median=statistics.median(gpu) if gpu else None,
        train_wall_s=(probe["host_end_s"][-1] - probe["host_begin_s"][0]) if steps_list else None,
    )
    run_dirs = sorted(run_out.glob(f"{name}/splat-plus/run"))
    run_dir = run_dirs[0] if run_dirs else None
    result["run_dir"] = str(run_dir)
    if run_dir is not None and (run_dir / "densification.jsonl").exists():
        records = [json.loads(line) for line in (run_dir / "densification.jsonl").read_text().splitlines()]
        counts = [r["num_gaussians"] for r in records if "num_gaussians" in r]
        result["num_gaussians"] = counts[-1] if counts else None
        result["refines"] = sum(1 for r in records if r["event"] == "refine")
        result["warnings_or_errors"] = [r["message"] for r in records if r["event"] in ("warning", "error")]
    elif probe.get("gaussians"):
        result["num_gaussians"] = probe["gaussians"][-1]
    return result


def _eval(result: Dict[str, Any]) -> None:
    run_dir = Path(result["run_dir"])
    out_json = run_dir / "eval.json"
    ns_eval = Path(sys.executable).parent / "ns-eval"  # the venv's, also when it is not activated
    cmd = [
        str(ns_eval) if ns_eval.exists() else "ns-eval",
        "--load-config",
        str(run_dir / "config.yml"),
        "--output-path",
        str(out_json),
    ]
    with open(run_dir / "eval.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        result["eval_error"] = f"ns-eval exit {proc.returncode}; see {run_dir / 'eval.log'}"
        return
    metrics = json.loads(out_json.read_text())["results"]
    result["psnr"] = metrics.get("psnr")
    result["ssim"] = metrics.get("ssim")


def _table(rows: List[Dict[str, Any]], keys: List[str]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def fresh(args: argparse.Namespace) -> Dict[str, Any]:
    rows = []
    for i in range(args.runs):
        row = _train(
            args.out, f"fresh{i + 1}", args.scene_args, args.steps, shlex.split(args.train_args), args.skip_steps
        )
        _eval(row)
        rows.append(row)
        print(
            _table(
                [row],
                ["name", "psnr", "ssim", "num_gaussians", "warmup_s", "warmup_first_step_s", "step_host_ms_median"],
            ),
            flush=True,
        )
    psnrs = [r["psnr"] for r in rows if r.get("psnr") is not None]
    summary = {
        "runs": rows,
        "psnr_spread_db": (max(psnrs) - min(psnrs)) if psnrs else None,
    }
    print("\n" + _table(rows, ["name", "psnr", "ssim", "num_gaussians", "refines", "warmup_s", "warmup_first_step_s",
                               "step_host_ms_median", "step_gpu_interval_ms_median", "process_wall_s"]))  # fmt: skip
    print(f"\nPSNR spread over {len(psnrs)} fresh processes: {summary['psnr_spread_db']}")
    return summary


def overhead(args: argparse.Namespace) -> Dict[str, Any]:
    rows = []
    for i in range(args.pairs):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")  # alternate: drift cancels
        for mode in order:
            extra = shlex.split(args.train_args) + [
                "--pipeline.model.instrumentation",
                "True" if mode == "on" else "False",
            ]
            row = _train(args.out, f"instr_{mode}{i + 1}", args.scene_args, args.steps, extra, args.skip_steps)
            row["instrumentation"] = mode
            rows.append(row)

    def med(mode: str, key: str) -> Optional[float]:
        values = [r[key] for r in rows if r["instrumentation"] == mode and r.get(key) is not None]
        return statistics.median(values) if values else None

    summary: Dict[str, Any] = {"runs": rows}
    for key in ("step_host_ms_median", "step_gpu_interval_ms_median"):
        on, off = med("on", key), med("off", key)
        summary[key] = {"on": on, "off": off, "overhead_pct": (100.0 * (on / off - 1.0)) if on and off else None}
    print("\n" + _table(rows, ["name", "instrumentation", "num_gaussians", "step_host_ms_median",
                               "step_gpu_interval_ms_median", "train_wall_s"]))  # fmt: skip
    for key in ("step_host_ms_median", "step_gpu_interval_ms_median"):
        s = summary[key]
        print(f"{key}: on {s['on']} ms, off {s['off']} ms, overhead {s['overhead_pct']} % (target <= 3 %)")
    return summary


def interleave(args: argparse.Namespace) -> Dict[str, Any]:
    rows = []
    for i in range(args.runs):
        env = ProbeOptions(toggle_every=args.toggle_every).env()
        row = _train(
            args.out, f"toggle{i + 1}", args.scene_args, args.steps, shlex.split(args.train_args), args.skip_steps, env
        )
        rows.append(row)
    print("\n" + _table(rows, ["name", "num_gaussians", "steps_on", "step_host_ms_median_on", "steps_off",
                               "step_host_ms_median_off", "overhead_pct"]))  # fmt: skip
    values = [r["overhead_pct"] for r in rows if r.get("overhead_pct") is not None]
    summary = {
        "runs": rows,
        "toggle_every": args.toggle_every,
        "overhead_pct_median": statistics.median(values) if values else None,
    }
    print(f"instrumentation overhead within one run (on vs off every {args.toggle_every} steps): "
          f"{summary['overhead_pct_median']} % (target <= 3 %)")  # fmt: skip
    return summary


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="warmup_check.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["fresh", "overhead", "interleave"])
    parser.add_argument("--scene-args", default=None, help="ns-train data arguments, --data DIR first (required)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3, help="fresh / interleave: number of processes")
    parser.add_argument("--pairs", type=int, default=2, help="overhead: on/off pairs (alternating order)")
    parser.add_argument("--toggle-every", type=int, default=100, help="interleave: steps per on / off block")
    parser.add_argument("--skip-steps", type=int, default=100, help="first steps left out of step-time medians")
    parser.add_argument("--train-args", default="", help="extra ns-train method arguments for every run")
    parser.add_argument("--out", type=Path, default=Path("/tmp/warmup_check"))
    args = parser.parse_args(argv)
    if not args.scene_args:
        parser.error(SCENE_ARGS_MISSING)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"fresh": fresh, "overhead": overhead, "interleave": interleave}[args.mode](args)
    (args.out / f"{args.mode}.json").write_text(json.dumps(summary, indent=2))
    print(f"\nwrote {args.out / (args.mode + '.json')}")
