"""Peak device memory of training and of in-training evaluation, for several methods side by side.

    python scripts/measure_eval_memory.py --output eval_memory.json [--methods splat-plus splatfacto] [--ns-eval] -- \\
        --data path/to/fox --max-num-iterations 3000 --steps-per-eval-all-images 1000 \\
        --vis tensorboard --viewer.quit-on-train-completion True \\
        instant-ngp-data --eval-mode interval --eval-interval 8

Everything after ``--`` is what ``ns-train METHOD`` takes. Each method trains in a fresh process
through the benchmark's trainer probe (``python -m splatbench.probe train METHOD ...``,
nerfstudio's own ns-train main) with its eval-memory option (``NS_SPLAT_PLUS_BENCH_EVAL_MEMORY=1``):
the trainer's ``eval_iteration`` runs inside ``ns_splat_plus.evaluation``'s peak-memory tracker when
an evaluation is due, and the next iteration starts a fresh training window of torch's peak counter.
Both methods are measured by the same code: torch.cuda.max_memory_allocated, training and evaluation
in separate windows. With ``--ns-eval`` each run is then evaluated by ``ns-eval`` (PSNR / SSIM on the
held-out split).

Entry point: :func:`main` (``scripts/measure_eval_memory.py``). Writes the JSON (one record per method)
and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from splatbench.options import PROBE_OUT_ENV, SAFE_PATH_ENV, ProbeOptions

MIB = 1024**2


def train_one(method: str, part: Path, ns_train_args: List[str]) -> Dict[str, Any]:
    """Train ``method`` through the probe with the eval-memory option; its record (or an error record)."""
    if method == "splatfacto":
        from splatbench.runtime import alexnet_weights_path

        if not alexnet_weights_path().is_file():
            sys.exit(
                f"splatfacto cannot be built offline: torchmetrics' LPIPS downloads AlexNet weights. Copy "
                f"alexnet-owt-7be5be79.pth to {alexnet_weights_path()} (or set TORCH_HOME) first."
            )
    probe_path = part.with_suffix(".probe.json")
    probe_path.unlink(missing_ok=True)
    env = dict(os.environ, **SAFE_PATH_ENV, **ProbeOptions(eval_memory=True).env(), **{PROBE_OUT_ENV: str(probe_path)})
    proc = subprocess.run([sys.executable, "-m", "splatbench.probe", "train", method, *ns_train_args], env=env)
    if proc.returncode != 0 or not probe_path.is_file():
        return {"method": method, "error": f"exit status {proc.returncode}"}
    probe = json.loads(probe_path.read_text())
    measured = probe["eval_memory"]
    environment = probe.get("environment") or {}
    return {
        "method": probe["method"],
        "run_dir": probe["base_dir"],
        "config": str(Path(probe["base_dir"]) / "config.yml"),
        "device": measured["device"],
        "device_name": environment.get("device_name") if environment.get("device_type") == "cuda" else None,
        "wall_s": probe["train_s"],
        "num_gaussians": probe["final_gaussians"],
        "num_eval_images": measured["num_eval_images"],
        "memory": measured["memory"],
        "all_images_eval_peaks": measured["all_images_eval_peaks"],
    }


def ns_eval(config_path: str, output: Path, method: str) -> Optional[Dict[str, Any]]:
    env = dict(os.environ)
    if method != "splat-plus" and not method.startswith("splat-plus"):
        # nerfstudio's own checkpoints hold numpy scalars that torch>=2.6's weights_only load refuses
        # (nerfstudio #3683); these are files this script just wrote.
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    ns_eval_bin = str(Path(sys.executable).parent / "ns-eval")
    proc = subprocess.run([ns_eval_bin, "--load-config", config_path, "--output-path", str(output)], env=env)
    if proc.returncode != 0 or not output.is_file():
        return None
    return json.loads(output.read_text())["results"]


def mib(value: Optional[int]) -> str:
    return f"{value / MIB:.0f}" if value is not None else "n/a"


def table(records: List[Dict[str, Any]]) -> str:
    lines = [
        "| method | train peak (MiB) | in-training eval peak (MiB) | eval <= train | ns-eval peak (MiB) | PSNR | SSIM | Gaussians | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['method']} | failed: {r['error']} |||||||")
            continue
        m = r["memory"]
        ev = r.get("ns_eval") or {}
        ev_mem = (ev.get("memory") or {}).get("eval_peak_bytes")
        fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else "n/a"  # noqa: E731
        lines.append(
            f"| {r['method']} | {mib(m['train_peak_bytes'])} | {mib(m['eval_peak_bytes'])} | "
            f"{m['eval_peak_le_train_peak']} | {mib(ev_mem)} | {fmt(ev.get('psnr'), '.2f')} | "
            f"{fmt(ev.get('ssim'), '.3f')} | {r['num_gaussians']} | {r['wall_s']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns_train_args: List[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, ns_train_args = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="measure_eval_memory.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--methods", nargs="+", default=["splat-plus", "splatfacto"])
    parser.add_argument("--ns-eval", action="store_true", help="also run ns-eval on each finished run")
    args = parser.parse_args(argv)
    if "--data" not in ns_train_args:  # no default scene: the data lives wherever the user keeps it
        parser.error("the scene is missing: end the options with -- and the ns-train arguments, --data DIR included")

    records = []
    for method in args.methods:
        part = args.output.with_name(f"{args.output.stem}.{method}.json")
        part.unlink(missing_ok=True)
        print(f"[measure] {method}: training", flush=True)
        record = train_one(method, part, ns_train_args)
        if "error" in record:
            records.append(record)
            continue
        part.write_text(json.dumps(record, indent=2))
        if args.ns_eval:
            print(f"[measure] {method}: ns-eval", flush=True)
            record["ns_eval"] = ns_eval(record["config"], part.with_suffix(".ns_eval.json"), method)
        records.append(record)
    args.output.write_text(json.dumps({"ns_train_args": ns_train_args, "runs": records}, indent=2))
    print(table(records))
    print(f"[measure] wrote {args.output}")
