"""Diagnostic (sessions 64-65): lite on plush-dog, trained eagerly to --start; one recording replayed on five other
cameras against the eager forward + backward of each (loss, render, every gradient, the 2D gradients). This copy is
the one run at af79de2 (``replay`` no longer returns the overflow flag); 1424acf ran the first-runs folder's."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-29-h200-cuda-graph-first-runs"))
from trainer_graph_probe import build  # noqa: E402

from ns_splat_plus.training.graphed_step import GraphedForwardBackward  # noqa: E402
from ns_splat_plus.training.step import run_training_step  # noqa: E402


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def check(trainer, start, out):
    model = trainer.pipeline.model
    for step in range(start):
        run_training_step(trainer, step)
    torch.cuda.synchronize()
    model.config.background_color = "black"
    trainer.pipeline.train()
    params = [p for p in model.parameters() if p.requires_grad]
    steps = list(range(start, start + 5))
    pairs = []
    for step in steps:
        camera, batch = trainer.pipeline.datamanager.next_train(step)
        pairs.append((camera, dict(batch, image=batch["image"].clone())))
    eager = []
    for step, (camera, batch) in zip(steps, pairs):
        model.step = step
        for p in params:
            p.grad = None
        outputs = model(camera)
        loss = sum(model.get_loss_dict(outputs, batch, {}).values())
        loss.backward()
        eager.append(
            (
                float(loss.detach()),
                [None if p.grad is None else p.grad.clone() for p in params],
                model.info["means2d"].grad.clone(),
                outputs["render_colors"].detach().clone(),
            )
        )
        del loss, outputs
    graphed = GraphedForwardBackward(trainer)
    model.step = steps[0]
    graphed._capture(steps[0], *pairs[0])
    for (camera, batch), (loss, grads, grad2d, render) in zip(pairs, eager):
        viewmat, camtoworlds, K, _, _ = graphed._camera_inputs(camera)
        graphed.replay(viewmat, camtoworlds, K, batch["image"])
        overflow = bool(graphed._info["isect_overflow"])
        torch.cuda.synchronize()
        line = dict(
            start=start,
            cam=int(camera.metadata["cam_idx"]),
            overflow=overflow,
            eager_loss=loss,
            graph_loss=float(graphed._loss),
            render=rel(graphed._outputs["render_colors"], render),
            grad2d=rel(graphed._info["means2d"].grad, grad2d),
            grads=[None if g is None else rel(p.grad, g) for p, g in zip(params, grads)],
        )
        print(json.dumps(line), flush=True)
        out.append(line)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("/tmp/dog"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = []
    for start in (300, 2500):
        try:
            trainer = build(args.data, Path(f"/tmp/replay-check-{start}"))
            check(trainer, start, out)
        except Exception:
            print(json.dumps({"start": start, "trace": traceback.format_exc()[-3000:]}), flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
