#!/usr/bin/env python3
"""Start-up parts and per-rank training images on W CPU ranks, through the real CLI (issue 31, item 1).

For each W, runs ``torchrun --nproc-per-node W ns-train splat-plus ... --machine.device-type cpu`` on
one synthetic scene (splatbench.scenes) for a few steps and reads what every rank wrote to
``<run>/ranks/startup_rank<r>.json``: seconds from process start to the end of the first step and
its parts, the training images the rank holds (count, bytes), their decoding time (wall, and CPU
seconds of the decoding threads) and the rank's resident memory. Prints one table and writes
``results.json`` to ``--out``; the targets are checked against W=1 on the worst rank.

python scripts/startup_parts.py --out /tmp/startup_parts --views 240 --width 320 --height 240 --worlds 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from ns_splat_plus.training import rank_record

PARTS = tuple(name for name, _, _ in rank_record.PARTS)
TARGETS = {"bytes": 0.3, "decode_cpu_seconds": 0.35, "decode_seconds": 0.35}
"""At W=4, a rank's value at most this fraction of W=1's (the issue's targets; decode: CPU and wall)."""


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"{name} is neither beside {sys.executable} nor on PATH")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(args, scene: Path, world: int) -> List[Dict[str, Any]]:
    """One ns-train run on ``world`` CPU ranks; every rank's start-up record."""
    out = Path(args.out) / f"w{world}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        _tool("torchrun"), "--nproc-per-node", str(world), "--master-port", str(_free_port()),
        _tool("ns-train"), "splat-plus", "--data", str(scene), "--output-dir", str(out),
        "--experiment-name", "startup", "--timestamp", "run", "--machine.device-type", "cpu",
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
        "--logging.local-writer.enable", "False", "--pipeline.model.num-downscales", "0",
        "--steps-per-eval-all-images", "100000", "--steps-per-eval-image", "100000",
        "--steps-per-eval-batch", "100000", "--warmup-steps", str(args.warmup_steps),
        # the schedule is divided by W: W x steps gives each run the same number of steps
        "--max-num-iterations", str(args.steps * world), "--data-parallel.replica-check-every", "0",
        "colmap",
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    (out / "log.txt").parent.mkdir(parents=True, exist_ok=True)
    (out / "log.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"W={world} failed (exit {proc.returncode}); log: {out / 'log.txt'}")
    run = out / "startup" / "splat-plus" / "run"
    records = [json.loads((run / "ranks" / f"startup_rank{r}.json").read_text()) for r in range(world)]
    for r, record in enumerate(records):
        record["process_wall_seconds"] = time.perf_counter() - started
        replica = run / "ranks" / f"rank{r}.json"  # written on several ranks: the final parameters' checksum
        record["final_checksum"] = json.loads(replica.read_text()).get("final_checksum") if replica.exists() else None
    return records


def summarize(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The worst rank's numbers of one run (and each rank's, for the table)."""
    ranks = []
    for rec in records:
        train = rec["images"]["train"]
        memory = rec.get("memory_at_first_step") or rec.get("memory") or {}
        ranks.append(
            {
                "rank": rec["rank"],
                "images": train["count"],
                "of": train["of"],
                "bytes": train["bytes"],
                "decode_seconds": train["decode_seconds"],
                "decode_cpu_seconds": train["decode_cpu_seconds"],
                "rss_bytes": memory.get("rss_bytes"),
                "peak_rss_bytes": memory.get("peak_rss_bytes"),
                "to_first_step_end": rec["seconds_to_first_step_end"],
                "parts": rec["parts_seconds"],
                "final_checksum": rec.get("final_checksum"),
            }
        )
    worst = {key: max(r[key] for r in ranks) for key in ("bytes", "decode_seconds", "decode_cpu_seconds", "rss_bytes")}
    worst["to_first_step_end"] = max(r["to_first_step_end"] for r in ranks)
    return {"ranks": ranks, "worst": worst}


def table(results: Dict[int, Dict[str, Any]]) -> str:
    head = "| W | rank | images | MiB held | decode s (wall) | decode s (CPU) | RSS MiB | to 1st step end s | "
    head += " | ".join(PARTS) + " | final checksum |"
    lines = [head, "|" + "---|" * (9 + len(PARTS))]
    mib = float(1 << 20)
    for world, summary in results.items():
        for r in summary["ranks"]:
            parts = " | ".join(f"{r['parts'].get(p, float('nan')):.2f}" for p in PARTS)
            lines.append(
                f"| {world} | {r['rank']} | {r['images']}/{r['of']} | {r['bytes'] / mib:.1f} | "
                f"{r['decode_seconds']:.3f} | {r['decode_cpu_seconds']:.3f} | {(r['rss_bytes'] or 0) / mib:.0f} | "
                f"{r['to_first_step_end']:.1f} | {parts} | {(r['final_checksum'] or '-')[:12]} |"
            )
    return "\n".join(lines)


def targets(results: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
    """Worst rank at the largest W against W=1, for each target."""
    if 1 not in results or len(results) < 2:
        return {}
    top = max(results)
    out = {}
    for key, limit in TARGETS.items():
        ratio = results[top]["worst"][key] / max(results[1]["worst"][key], 1e-12)
        out[key] = {"W": top, "ratio": ratio, "limit": limit, "holds": ratio <= limit}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the scene, the runs and results.json")
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4], help="numbers of CPU ranks")
    parser.add_argument("--views", type=int, default=240, help="views of the synthetic scene (1 in 8 held out)")
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--steps", type=int, default=2, help="training steps of each run")
    parser.add_argument("--warmup-steps", type=int, default=1)
    args = parser.parse_args(argv)

    from splatbench.scenes import SceneSpec, make_scene

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scene = out / "scene"
    if not (scene / "colmap").exists():
        make_scene(scene, SceneSpec(n_views=args.views, width=args.width, height=args.height))
    results = {world: summarize(run_world(args, scene, world)) for world in args.worlds}
    checked = targets(results)
    (out / "results.json").write_text(
        json.dumps({"args": vars(args), "results": results, "targets": checked}, indent=2)
    )
    print(table(results))
    for key, t in checked.items():
        verdict = "holds" if t["holds"] else "MISSED"
        print(f"target {key}: W={t['W']} / W=1 = {t['ratio']:.3f} (<= {t['limit']}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
