"""Multi-GPU scaling check: the single-GPU schedule on 1 GPU against its scaled version on W GPUs.

    SCENE="--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8"
    python scripts/scaling_check.py OUT_DIR --scene-args "$SCENE"   # W = 1, 2, 4 ... up to the visible GPUs
    python scripts/scaling_check.py OUT_DIR --scene-args "$SCENE" --gpus 1 2 4 --launchers spawn torchrun
    python scripts/scaling_check.py OUT_DIR --scene-args "$SCENE" --multi-gpu-args "--data-parallel.scale-adam-betas False"

Entry point: :func:`main` (``scripts/scaling_check.py``). Every run is a fresh process through the
benchmark's command line (``python -m splatbench.cli``, what ``scripts/benchmark.py`` runs; its probe
times the training loop and ns-eval scores the held-out split): ``ns-train splat-plus
--max-num-iterations STEPS`` on one GPU, and the same command on W GPUs, where splat-plus scales the schedule to STEPS / W steps
(``--data-parallel.*``, see README "Several GPUs"). Launchers for W > 1: ``spawn``
(``ns-train --machine.num-devices W``) and ``torchrun --nproc-per-node W``.

Prints, and writes to OUT_DIR/scaling.md and OUT_DIR/scaling.json, a table per run: steps, train
wall time (training loop), process wall time (start to exit), speedup over 1 GPU, held-out
PSNR / SSIM (and the PSNR difference to 1 GPU), Gaussian count, and whether the target
(speedup >= 0.9 W, PSNR within 0.2 dB of 1 GPU) was met.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from splatbench.report import fmt
from splatbench.settings import SCENE_ARGS_MISSING


def visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no torch / no driver: no GPUs
        return 0


def default_gpu_list(n: int) -> List[int]:
    ws = [1]
    w = 2
    while w <= n:
        ws.append(w)
        w *= 2
    if n > 1 and n not in ws:
        ws.append(n)
    return ws


def run_benchmark(out: Path, gpus: List[int], launcher: str, args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    command = [
        sys.executable, "-m", "splatbench.cli",
        "--methods", "splat-plus",
        "--gpus", *[str(w) for w in gpus],
        "--steps", str(args.steps),
        "--scene-args", args.scene_args,
        "--launcher", launcher,
        "--out", str(out),
    ]  # fmt: skip
    if args.multi_gpu_args:
        command += ["--multi-gpu-args", args.multi_gpu_args]
    if args.train_args:
        command += ["--train-args", args.train_args]
    if args.timeout:
        command += ["--timeout", str(args.timeout)]
    if args.device_type != "cuda":
        command += ["--device-type", args.device_type]
    print(f"[scaling] {' '.join(command)}", flush=True)
    subprocess.run(command, check=False)
    results = out / "results.json"
    if not results.is_file():
        print(f"[scaling] no results from the {launcher} runs ({results} missing)", flush=True)
        return None
    return json.loads(results.read_text())


def build_rows(baseline: Optional[Dict[str, Any]], runs: List[Dict[str, Any]], steps: int) -> List[Dict[str, Any]]:
    rows = []
    base_wall = baseline.get("train_wall_s") if baseline else None
    base_psnr = baseline.get("psnr") if baseline else None
    for r in runs:
        w = r["num_gpus"]
        wall = r.get("train_wall_s")
        speedup = base_wall / wall if (base_wall and wall and r.get("status") == "ok") else None
        dpsnr = r["psnr"] - base_psnr if (r.get("psnr") is not None and base_psnr is not None) else None
        target = None
        if w > 1 and speedup is not None and dpsnr is not None:
            target = speedup >= 0.9 * w and abs(dpsnr) <= 0.2
        rows.append(
            {
                "gpus": w,
                "launcher": r.get("launcher", "-"),
                "status": r.get("status"),
                "steps": -(-steps // w),
                "train_wall_s": wall,
                "process_wall_s": r.get("process_wall_s"),
                "speedup": speedup,
                "efficiency": speedup / w if speedup is not None else None,
                "psnr": r.get("psnr"),
                "delta_psnr": dpsnr,
                "ssim": r.get("ssim"),
                "num_gaussians": r.get("num_gaussians"),
                "step_time_ms_median": r.get("step_time_ms_median"),
                "target_met": target,
                "error": r.get("error"),
            }
        )
    return rows


def markdown(rows: List[Dict[str, Any]]) -> str:
    lines = [
        "| GPUs | launcher | steps | train wall (s) | process wall (s) | speedup | speedup / W | PSNR | ΔPSNR | SSIM | Gaussians | median step (ms) | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        target = {True: "met", False: "missed", None: "-"}[r["target_met"]]
        if r["status"] != "ok":
            target = f"{r['status']}: {(r['error'] or '')[:80]}"
        lines.append(
            f"| {r['gpus']} | {r['launcher']} | {r['steps']} | {fmt(r['train_wall_s'], '.1f')} | "
            f"{fmt(r['process_wall_s'], '.1f')} | {fmt(r['speedup'], '.2f')} | {fmt(r['efficiency'], '.2f')} | "
            f"{fmt(r['psnr'], '.3f')} | {fmt(r['delta_psnr'], '+.3f')} | {fmt(r['ssim'], '.4f')} | "
            f"{fmt(r['num_gaussians'], 'd')} | {fmt(r['step_time_ms_median'], '.2f')} | {target} |"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")  # the benchmark children's progress shows as it comes
    parser = argparse.ArgumentParser(
        prog="scaling_check.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="results directory")
    parser.add_argument("--gpus", type=int, nargs="+", default=None, help="GPU counts (default: 1, 2, 4, ... visible)")
    parser.add_argument("--launchers", nargs="+", choices=["spawn", "torchrun"], default=["spawn", "torchrun"])
    parser.add_argument("--steps", type=int, default=3000, help="the single-GPU schedule (W GPUs run steps / W)")
    parser.add_argument("--scene-args", default=None, help="ns-train data arguments, --data DIR first (required)")
    parser.add_argument("--multi-gpu-args", default="", help="extra ns-train arguments for W > 1 ({W} is replaced)")
    parser.add_argument("--train-args", default="", help="extra ns-train arguments for every run")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per child process")
    parser.add_argument(
        "--device-type", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke test (torchrun only)"
    )
    args = parser.parse_args(argv)
    if not args.scene_args:
        parser.error(SCENE_ARGS_MISSING)

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    gpus = sorted(set(args.gpus or default_gpu_list(visible_gpus())))
    multi = [w for w in gpus if w > 1]
    print(f"[scaling] GPUs visible: {visible_gpus()}; runs: 1 GPU, then W = {multi} with {args.launchers}", flush=True)

    all_runs: List[Dict[str, Any]] = []
    baseline = None
    for i, launcher in enumerate(args.launchers):
        ws = ([1] if i == 0 else []) + multi  # the 1-GPU baseline once
        results = run_benchmark(out / launcher, ws, launcher, args)
        if results is None:
            continue
        for r in results.get("runs", []):
            r["launcher"] = "ns-train" if r["num_gpus"] == 1 else launcher
            if r["num_gpus"] == 1:
                baseline = r
            all_runs.append(r)
    all_runs.sort(key=lambda r: (r["num_gpus"], r["launcher"]))
    rows = build_rows(baseline, all_runs, args.steps)
    table = markdown(rows)
    header = (
        f"splat-plus scaling on {args.scene_args}: the {args.steps}-step single-GPU schedule on 1 GPU, "
        f"scaled to {args.steps}/W steps on W GPUs (sqrt(W) learning rates unless changed). "
        "Target: speedup >= 0.9 W and PSNR within 0.2 dB of 1 GPU."
    )
    (out / "scaling.md").write_text(header + "\n\n" + table + "\n")
    (out / "scaling.json").write_text(
        json.dumps({"steps": args.steps, "scene_args": args.scene_args, "rows": rows}, indent=2)
    )
    print("\n" + header + "\n\n" + table + "\n", flush=True)
    print(f"[scaling] written: {out / 'scaling.md'}, {out / 'scaling.json'}", flush=True)
    return 0 if rows and all(r["status"] == "ok" for r in rows) else 1
