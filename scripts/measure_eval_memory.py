#!/usr/bin/env python3
"""Peak device memory of training and of in-training evaluation, for several methods side by side.

    python scripts/measure_eval_memory.py --output eval_memory.json [--methods splat-plus splatfacto] [--ns-eval] -- \\
        --data ../shared/data/fox --max-num-iterations 3000 --steps-per-eval-all-images 1000 \\
        --vis tensorboard --viewer.quit-on-train-completion True \\
        instant-ngp-data --eval-mode interval --eval-interval 8

Everything after ``--`` is what ``ns-train METHOD`` takes. Each method trains in a fresh process
through nerfstudio's own ns-train path (``launch`` / ``train_loop``), with one change: the trainer
is a subclass of the method's own trainer whose ``eval_iteration`` runs inside
``ns_splat_plus.evaluation``'s peak-memory tracker when an evaluation is due, and which starts a
fresh training window of torch's peak counter on the next iteration. Both methods are measured
by the same code: torch.cuda.max_memory_allocated, training and evaluation in separate windows.
With ``--ns-eval`` each run is then evaluated by ``ns-eval`` (PSNR / SSIM on the held-out split).

Writes the JSON (one record per method) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

MIB = 1024**2


def measured_trainer_class(base: type, output: Path) -> type:
    """``base`` (the method's trainer class) with its evaluations measured apart from training."""
    import torch
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
    from nerfstudio.utils.misc import step_check

    from ns_splat_plus import evaluation

    class MeasuredTrainer(base):  # type: ignore[misc, valid-type]
        def setup(self, *args, **kwargs):
            super().setup(*args, **kwargs)
            self.memory = evaluation.memory_tracker(self.device)
            self.all_images_eval_peaks: List[Dict[str, Any]] = []
            self.callbacks.insert(
                0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], self.memory.start_training_window)
            )

        def eval_iteration(self, step: int) -> None:
            c = self.config
            due = [n for n in (c.steps_per_eval_batch, c.steps_per_eval_image, c.steps_per_eval_all_images) if step_check(step, n)]
            if not due or not (c.is_tensorboard_enabled() or c.is_wandb_enabled() or c.is_comet_enabled()):
                return super().eval_iteration(step)
            with self.memory.evaluating():
                super().eval_iteration(step)
            if step_check(step, c.steps_per_eval_all_images):
                self.all_images_eval_peaks.append({"step": step, "peak_bytes": self.memory.last_eval_peak_bytes})

        def train(self) -> None:
            start = time.perf_counter()
            super().train()
            wall = time.perf_counter() - start
            self.memory.observe_training()
            record = {
                "method": self.config.method_name,
                "run_dir": str(self.base_dir),
                "config": str(self.base_dir / "config.yml"),
                "device": str(self.device),
                "device_name": torch.cuda.get_device_name(self.device) if torch.cuda.is_available() else None,
                "wall_s": wall,
                "num_gaussians": int(self.pipeline.model.num_points),
                "num_eval_images": len(self.pipeline.datamanager.eval_dataset),
                "memory": self.memory.as_dict(),
                "all_images_eval_peaks": self.all_images_eval_peaks,
            }
            output.write_text(json.dumps(record, indent=2))

    MeasuredTrainer.__name__ = MeasuredTrainer.__qualname__ = f"Measured{base.__name__}"
    return MeasuredTrainer


def run_single(method: str, output: Path, ns_train_args: List[str]) -> None:
    """ns-train's main() for one method, with the measured trainer."""
    import tyro
    from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion
    from nerfstudio.scripts.train import launch, train_loop

    if method == "splatfacto":
        from ns_splat_plus import compat

        if not compat.alexnet_weights_path().is_file():
            sys.exit(
                f"splatfacto cannot be built offline: torchmetrics' LPIPS downloads AlexNet weights. Copy "
                f"alexnet-owt-7be5be79.pth to {compat.alexnet_weights_path()} (or set TORCH_HOME) first."
            )
    config = tyro.cli(AnnotatedBaseConfigUnion, args=[method, *ns_train_args])
    if config.data:
        config.pipeline.datamanager.data = config.data
    config.set_timestamp()
    config.print_to_terminal()
    config.save_config()  # before the measured target: config.yml names the method's own trainer
    config._target = measured_trainer_class(config._target, output)
    launch(
        main_func=train_loop,
        num_devices_per_machine=config.machine.num_devices,
        device_type=config.machine.device_type,
        num_machines=config.machine.num_machines,
        machine_rank=config.machine.machine_rank,
        dist_url=config.machine.dist_url,
        config=config,
    )


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


def main() -> None:
    argv = sys.argv[1:]
    ns_train_args: List[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, ns_train_args = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--methods", nargs="+", default=["splat-plus", "splatfacto"])
    parser.add_argument("--ns-eval", action="store_true", help="also run ns-eval on each finished run")
    parser.add_argument("--single", help=argparse.SUPPRESS)  # internal: one method in this process
    args = parser.parse_args(argv)

    if args.single:
        run_single(args.single, args.output, ns_train_args)
        return

    records = []
    for method in args.methods:
        part = args.output.with_name(f"{args.output.stem}.{method}.json")
        part.unlink(missing_ok=True)
        print(f"[measure] {method}: training", flush=True)
        proc = subprocess.run(
            [sys.executable, __file__, "--single", method, "--output", str(part), "--", *ns_train_args]
        )
        if proc.returncode != 0 or not part.is_file():
            records.append({"method": method, "error": f"exit status {proc.returncode}"})
            continue
        record = json.loads(part.read_text())
        if args.ns_eval:
            print(f"[measure] {method}: ns-eval", flush=True)
            record["ns_eval"] = ns_eval(record["config"], part.with_suffix(".ns_eval.json"), method)
        records.append(record)
    args.output.write_text(json.dumps({"ns_train_args": ns_train_args, "runs": records}, indent=2))
    print(table(records))
    print(f"[measure] wrote {args.output}")


if __name__ == "__main__":
    main()
