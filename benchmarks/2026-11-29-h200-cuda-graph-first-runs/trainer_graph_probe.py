"""Probe (issue 48): splat-plus-lite's real training step, eager against a CUDA graph of its forward + backward.

Builds lite's trainer on plush-dog (--data, colmap sparse/0, downscale 2) on the GPU, as ns-train does, and trains
eagerly to --start (past the resolution schedule: full size), then times two windows of --steps steps each through
``run_training_step`` (callbacks, refines and all, as the loop runs them):

  eager  the trainer's own step (gsplat's intersection count read on the host in every step)
  graph  the package's --cuda-graph step (training/graphed_step.py): the step's camera and photo come eagerly from the datamanager, their view
         matrix, camera centre, K and photo are copied into static buffers, and one CUDA graph replays the forward
         (projection, fixed-capacity intersections (raster/fixed_capacity_isect.py), pixels, the fused loss) and
         the backward; the overflow flag is read (one host read, before anything is updated: an overflowing step is
         recaptured with more room and replayed); then the optimizer update and the schedulers, eager. A refine
         (new Parameters), a new SH degree, image size or capacity records the graph again.

Then one step from one saved state by each path, background black (the random one draws differently in a graph):
the loss and every gradient compared. Each stage in its own try: a failure is printed with its traceback, and the
next stages still run. Prints JSON lines; --out writes them.

Usage: python benchmarks/2026-11-29-h200-cuda-graph-first-runs/trainer_graph_probe.py --data /tmp/dog [--start 4200] [--steps 600] [--out probe.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig  # noqa: E402

from ns_splat_plus import upstream  # noqa: E402
from ns_splat_plus.method import splat_plus_lite_trainer_config  # noqa: E402
from ns_splat_plus.training.graphed_step import GraphedForwardBackward  # noqa: E402
from ns_splat_plus.training.step import run_training_step  # noqa: E402

LINES = []


def report(**kw):
    print(json.dumps(kw), flush=True)
    LINES.append(kw)


def failed(stage):
    report(stage=stage, ok=False, trace=traceback.format_exc()[-4000:])


def build(data: Path, out: Path, device: str = "cuda"):
    from inprocess import build_trainer

    config = splat_plus_lite_trainer_config()
    config.pipeline.datamanager.data = data
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(colmap_path=Path("sparse/0"), downscale_factor=2)
    config.machine.device_type = device
    config.output_dir = out
    config.experiment_name = "graph-probe"
    config.vis = "tensorboard"
    config.viewer.quit_on_train_completion = True
    config.logging.local_writer.enable = False
    config.steps_per_eval_image = config.steps_per_eval_batch = config.steps_per_eval_all_images = 0
    config.steps_per_save = 10**9
    config.set_timestamp()
    return build_trainer(config)


class CountingIsect:
    """gsplat's isect_tiles, wrapped: the entry count of each eager render (known on the host: its shape)."""

    def __init__(self):
        self.counts = []
        self.kernels = upstream.gsplat_kernels()
        self.original = self.kernels.isect_tiles

    def __enter__(self):
        def counted(*args, **kwargs):
            out = self.original(*args, **kwargs)
            self.counts.append(int(out[1].shape[0]))
            return out

        self.kernels.isect_tiles = counted
        return self

    def __exit__(self, *exc):
        self.kernels.isect_tiles = self.original


def timed_window(trainer, first, steps):
    walls = []
    for step in range(first, first + steps):
        if step == first and torch.cuda.is_available():
            torch.cuda.synchronize()
        started = time.perf_counter()
        run_training_step(trainer, step)
        walls.append(time.perf_counter() - started)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return walls


def summary(walls):
    ms = [1e3 * w for w in walls]
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "total_s": sum(walls)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("/tmp/dog"))
    parser.add_argument("--start", type=int, default=4200)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/graph-probe-runs"))
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the eager stages (no graph)")
    args = parser.parse_args()
    started = time.perf_counter()
    trainer = build(args.data, args.run_dir, args.device)
    model = trainer.pipeline.model
    report(stage="built", seconds=time.perf_counter() - started, gaussians=model.num_points)
    step = 0
    with CountingIsect() as counting:
        started = time.perf_counter()
        while step < args.start:
            run_training_step(trainer, step)
            step += 1
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        report(stage="eager-to-start", steps=step, seconds=time.perf_counter() - started, gaussians=model.num_points)
        try:
            walls = timed_window(trainer, step, args.steps)
            step += args.steps
            counts = counting.counts[-args.steps :] or [0]
            report(stage="eager", **summary(walls), gaussians=model.num_points, isect_max=max(counts),
                   isect_median=statistics.median(counts))  # fmt: skip
        except Exception:
            failed("eager")
        max_count = max(counting.counts[-args.steps :] or [0])
    if args.device == "cpu":
        return
    graphed = GraphedForwardBackward(trainer)  # the package's --cuda-graph step
    graphed.largest_count = max_count
    try:
        trainer.graphed_step = graphed
        walls = timed_window(trainer, step, args.steps)
        step += args.steps
        report(stage="graph", **summary(walls), gaussians=model.num_points, recordings=dict(graphed.recordings),
               failure=graphed.failure, capacity=graphed.capacity, largest_count=graphed.largest_count)  # fmt: skip
    except Exception:
        failed("graph")
    finally:
        trainer.graphed_step = None
    try:  # the same step from the same state, background black: loss and gradients
        model.config.background_color = "black"
        trainer.pipeline.train()
        model.step = step
        camera, batch = trainer.pipeline.datamanager.next_train(step)
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            p.grad = None
        loss = sum(model.get_loss_dict(model(camera), batch, {}).values())
        loss.backward()
        eager_loss = float(loss)
        del loss  # its autograd graph holds the eager accumulator nodes (graphed_step's module docstring)
        eager_grads = [p.grad.detach().clone() for p in params]
        check = GraphedForwardBackward(trainer)
        check.largest_count = max_count
        started = time.perf_counter()
        check._capture(step, camera, batch)
        torch.cuda.synchronize()
        capture_s = time.perf_counter() - started
        check.graph.replay()
        diffs = [float((p.grad - g).abs().max() / g.abs().max().clamp_min(1e-30)) for p, g in zip(params, eager_grads)]
        report(stage="check", eager_loss=float(eager_loss), graph_loss=float(check._loss), capture_s=capture_s,
               max_relative_grad_diff=max(diffs), overflow=bool(check._info["isect_overflow"]))  # fmt: skip
    except Exception:
        failed("check")
    if args.out:
        args.out.write_text(json.dumps(LINES, indent=1))


if __name__ == "__main__":
    main()
