#!/usr/bin/env python3
"""Step time, GPU busy time and peak device memory against the Gaussian count (issue 13's plot).

Trains one method once per allocator setting through the benchmark's probe (nerfstudio's ns-train
main), profiles a window of steps every --busy-every steps, cuts the run where the Gaussian count
changes and writes OUT/scaling.json, OUT/scaling.md and OUT/scaling.png (step time and GPU busy time,
peak memory, against the count; the fitted bytes per Gaussian).

    # plush-dog at 1500x1000 from the first step: densification grows 11k SfM points (to ~100k by step 1300),
    # both allocator settings
    python scripts/gaussian_scaling.py --steps 1600 --busy-every 200 --busy-steps 10 --busy-first 50 --out /tmp/scaling \\
        --scene-args "--data ../shared/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2" \\
        --train-args "--pipeline.model.densify-grad-thresh 0.00001 --pipeline.model.stop-split-at 1300 \\
            --pipeline.model.num-downscales 0" --allocators empty-cache expandable
    # millions of Gaussians: start from 3M random ones (densification alone did not get there)
    python scripts/gaussian_scaling.py --steps 1000 --busy-every 200 --busy-steps 10 --busy-first 50 --out /tmp/scaling3M \\
        --scene-args "--data ../shared/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2" \\
        --train-args "--pipeline.model.random-init True --pipeline.model.num-random 3000000 \\
            --pipeline.model.num-downscales 0 --pipeline.model.warmup-length 200"
    # re-render the report from a scaling.json
    python scripts/gaussian_scaling.py --from-json /tmp/scaling/scaling.json --out /tmp/scaling

Allocator settings: ``empty-cache`` (torch.cuda.empty_cache() after every refine: splat-plus's default,
splatfacto's habit), ``expandable`` (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, with which
splat-plus skips empty_cache), ``keep`` (neither).
"""

import argparse
import dataclasses
import json
import shlex
import sys
from pathlib import Path

from ns_splat_plus.bench import children
from ns_splat_plus.bench.gaussian_scaling import markdown, plot, scaling_summary
from ns_splat_plus.bench.results import load_json
from ns_splat_plus.bench.runner import train_command
from ns_splat_plus.bench.settings import BenchmarkSettings, log

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="splat-plus")
    parser.add_argument("--scene-args", default="--data ../shared/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2")
    parser.add_argument("--scene-name", default=None)
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--train-args", default="", help="extra ns-train arguments (the densification that grows the count)")
    parser.add_argument("--allocators", nargs="+", choices=sorted(ALLOCATORS), default=["empty-cache"])
    parser.add_argument("--busy-every", type=int, default=200, help="a profiled window every N steps (0: none)")
    parser.add_argument("--busy-steps", type=int, default=10, help="steps per profiled window")
    parser.add_argument("--busy-first", type=int, default=None,
                        help="first profiled step (default: --busy-steps); place the windows between refines, so "
                        "that each sees one Gaussian count")  # fmt: skip
    parser.add_argument("--device-type", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a run is stopped")
    parser.add_argument("--from-json", type=Path, default=None, help="re-render the report of this scaling.json")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/gaussian-scaling"))
    args = parser.parse_args()
    if args.from_json is not None:
        write_report(json.loads(args.from_json.read_text("utf8")), args.out)
        return 0
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
    report = {"command": shlex.join([sys.executable, *sys.argv]), "scene": settings.describe_scene(), "method": args.method, "runs": []}
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


if __name__ == "__main__":
    sys.exit(main())
