"""Probe (issue 48): what a CUDA graph of splat-plus-lite's whole step would save, before building it.

A synthetic scene of lite's size (Gaussians, image size), one camera per step, the fused loss, Adam. Three
ways to run the same step, each timed over STEPS steps (wall per step, synchronised at the ends):
  eager-gsplat  gsplat's isect_tiles (one host read per step): the production path's structure
  eager-fixed   raster/fixed_capacity_isect.py instead (no host read; sorts the padded capacity)
  graph         the whole step (projection .. loss, backward, Adam, the densification sums) recorded once
                in a CUDA graph and replayed; per step: the camera and ground truth copied into the
                graph's inputs, the replay, and the overflow flag read (one host read, after the step)
Each capture stage is tried on its own, so a failure names the stage. Prints JSON lines; --out writes them.
Usage: python benchmarks/2026-11-29-h200-cuda-graph-first-runs/graph_probe.py --gaussians 18000 --width 1500 --height 1000 [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import traceback

import torch

from ns_splat_plus import upstream
from ns_splat_plus.model.fused_loss import fused_photometric_loss
from ns_splat_plus.raster.fixed_capacity_isect import isect_tiles_fixed
from ns_splat_plus.raster.rasterize import TILE_SIZE, _gsplat_project

SH_DEGREE = 3


def make_scene(n: int, width: int, height: int, cameras: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    params = {
        "means": torch.cat([(torch.rand(n, 2, generator=g) - 0.5) * 4.0, torch.rand(n, 1, generator=g) * 4 + 2], 1),
        "quats": torch.randn(n, 4, generator=g),
        "scales": torch.randn(n, 3, generator=g) * 0.5 - 3.5,
        "opacities": torch.randn(n, 1, generator=g),
        "features_dc": torch.randn(n, 1, 3, generator=g) * 0.5,
        "features_rest": torch.randn(n, 15, 3, generator=g) * 0.05,
    }
    params = {k: torch.nn.Parameter(v.cuda()) for k, v in params.items()}
    focal = 0.9 * width
    K = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]])
    viewmats, gts = [], []
    for c in range(cameras):  # small turns and shifts: the entry count changes from camera to camera
        a = 0.15 * (c - cameras / 2) / cameras
        rot = torch.tensor([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
        vm = torch.eye(4)
        vm[:3, :3] = rot
        vm[:3, 3] = torch.tensor([0.1 * c / cameras, 0.0, 0.2 * c / cameras])
        viewmats.append(vm)
        gts.append(torch.randint(0, 256, (1, height, width, 3), generator=g, dtype=torch.uint8))
    cams = torch.stack([torch.stack([vm, torch.inverse(vm)]) for vm in viewmats])  # [cameras, 2, 4, 4]
    return params, K.cuda(), cams.cuda(), torch.cat(gts).cuda()


def project(params, viewmat, K, width, height):
    """``viewmat``: [2, 4, 4], the world-to-camera matrix and its inverse (torch.inverse synchronises, as the
    trainer's cameras do not: it keeps both)."""
    colors = torch.cat([params["features_dc"], params["features_rest"]], 1)
    return _gsplat_project(params["means"], params["quats"], torch.exp(params["scales"]),
                           torch.sigmoid(params["opacities"]).squeeze(-1), colors, viewmat[0:1], K[None], width,
                           height, SH_DEGREE, 0.01, 1e10, "RGB", "classic", viewmat[1:2], True)  # fmt: skip


def loss_gsplat(params, viewmat, K, gt, bg, width, height):
    kernels = upstream.gsplat_kernels()
    p = project(params, viewmat, K, width, height)
    tw, th = math.ceil(width / TILE_SIZE), math.ceil(height / TILE_SIZE)
    _, ids, flat = kernels.isect_tiles(p["means2d"], p["tile_radii"], p["depths"], TILE_SIZE, tw, th)
    offsets = kernels.isect_offset_encode(ids, 1, tw, th)
    render, alpha = kernels.rasterize_to_pixels(p["means2d"], p["conics"], p["colors"], p["opacities"], width,
                                                height, TILE_SIZE, offsets, flat)  # fmt: skip
    if p["means2d"].requires_grad:  # the entry-count pass runs under no_grad
        p["means2d"].retain_grad()
    return fused_photometric_loss(render, alpha, bg, gt[None], 0.2), p, int(ids.numel())


def loss_fixed(params, viewmat, K, gt, bg, width, height, capacity):
    kernels = upstream.gsplat_kernels()
    p = project(params, viewmat, K, width, height)
    tw, th = math.ceil(width / TILE_SIZE), math.ceil(height / TILE_SIZE)
    isect = isect_tiles_fixed(p["means2d"], p["tile_radii"], p["depths"], TILE_SIZE, tw, th, capacity)
    render, alpha = kernels.rasterize_to_pixels(p["means2d"], p["conics"], p["colors"], p["opacities"], width,
                                                height, TILE_SIZE, isect.isect_offsets, isect.flatten_ids,
                                                masks=isect.masks)  # fmt: skip
    if p["means2d"].requires_grad:  # the entry-count pass runs under no_grad
        p["means2d"].retain_grad()
    return fused_photometric_loss(render, alpha, bg, gt[None], 0.2), p, isect


def make_optimizer(params, capturable):
    lrs = {"means": 1.6e-4, "quats": 1e-3, "scales": 5e-3, "opacities": 5e-2, "features_dc": 2.5e-3,
           "features_rest": 1.25e-4}  # fmt: skip
    groups = [{"params": [params[k]], "lr": lr, "name": k} for k, lr in lrs.items()]
    return torch.optim.Adam(groups, eps=1e-15, fused=True, capturable=capturable)


def timed(fn, steps):
    for _ in range(10):
        fn(0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(steps):
        fn(i)
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gaussians", type=int, default=18000)
    parser.add_argument("--width", type=int, default=1500)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--cameras", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = []

    def report(**kw):
        kw.update(gaussians=args.gaussians, width=args.width, height=args.height)
        print(json.dumps(kw), flush=True)
        lines.append(kw)

    params, K, viewmats, gts = make_scene(args.gaussians, args.width, args.height, args.cameras)
    W, H, C = args.width, args.height, args.cameras
    bg = torch.rand(3, device="cuda")
    grad2d = torch.zeros(args.gaussians, device="cuda")
    count = torch.zeros(args.gaussians, device="cuda")

    # entry counts per camera, for the capacity
    counts = []
    with torch.no_grad():
        for c in range(C):
            _, _, n = loss_gsplat(params, viewmats[c], K, gts[c], bg, W, H)
            counts.append(n)
    capacity = int(max(counts) * 1.25) + 1024
    report(stage="counts", counts=counts, capacity=capacity)

    half_size = torch.tensor([W / 2.0, H / 2.0], device="cuda")  # made here: in a capture it would be a copy

    def stats(p):
        g = p["means2d"].grad
        grad2d.add_((g[0] * half_size).norm(dim=-1))
        count.add_((p["radii"][0] > 0).float())

    opt = make_optimizer(params, capturable=False)

    def eager_gsplat(i):
        opt.zero_grad(set_to_none=True)
        loss, p, _ = loss_gsplat(params, viewmats[i % C], K, gts[i % C], bg, W, H)
        loss.backward()
        stats(p)
        opt.step()

    def eager_fixed(i):
        opt.zero_grad(set_to_none=True)
        loss, p, isect = loss_fixed(params, viewmats[i % C], K, gts[i % C], bg, W, H, capacity)
        loss.backward()
        stats(p)
        opt.step()
        return isect

    for name, fn in (("eager-gsplat", eager_gsplat), ("eager-fixed", eager_fixed)):
        try:  # each stage on its own: a failure names it and the next stages still run
            report(stage=name, ms_per_step=timed(fn, args.steps))
        except Exception as error:
            report(stage=name, ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])

    # the graph: static inputs, warm-up on a side stream, capture, replay
    static_view, static_gt = viewmats[0].clone(), gts[0].clone()
    opt = make_optimizer(params, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    holder = {}

    def graph_step():
        opt.zero_grad(set_to_none=True)
        loss, p, isect = loss_fixed(params, static_view, K, static_gt, bg, W, H, capacity)
        loss.backward()
        stats(p)
        opt.step()
        holder.update(loss=loss, overflow=isect.overflow, n=isect.n_isects)

    try:
        with torch.cuda.stream(side):
            for _ in range(3):
                graph_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            graph_step()
    except Exception as error:  # which operation refused the capture
        report(stage="graph-capture", ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])
        if args.out:
            json.dump(lines, open(args.out, "w"), indent=1)
        return
    report(stage="graph-capture", ok=True)

    overflows = []

    def replay(i):
        static_view.copy_(viewmats[i % C])
        static_gt.copy_(gts[i % C])
        graph.replay()
        overflows.append(bool(holder["overflow"]))  # the one host read per step

    try:
        report(stage="graph", ms_per_step=timed(replay, args.steps), overflows=sum(overflows))
    except Exception as error:
        report(stage="graph", ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])

    # the graph's loss against the eager fixed path on the same state (one step, camera 1)
    try:
        snapshot = {k: v.detach().clone() for k, v in params.items()}
        static_view.copy_(viewmats[1])
        static_gt.copy_(gts[1])
        graph.replay()
        graph_loss = float(holder["loss"])
        with torch.no_grad():
            for k, v in params.items():
                v.copy_(snapshot[k])
        eager_loss, _, _ = loss_fixed(params, viewmats[1], K, gts[1], bg, W, H, capacity)
        report(stage="check", graph_loss=graph_loss, eager_loss=float(eager_loss))
    except Exception as error:
        report(stage="check", ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])

    # the design that keeps the optimizer out of the graph: forward + backward replayed, the overflow flag
    # read (a sync, so that an overflowing step can be redone before anything is updated), then the
    # densification sums and Adam eager (as the trainer runs them today)
    opt_eager = make_optimizer(params, capturable=False)
    for v in params.values():
        v.grad = None  # the backward in the capture allocates the gradients in the graph's pool
    fwd_holder = {}

    def forward_backward():
        loss, p, isect = loss_fixed(params, static_view, K, static_gt, bg, W, H, capacity)
        loss.backward()
        fwd_holder.update(loss=loss, p=p, overflow=isect.overflow)

    try:
        with torch.cuda.stream(side):
            forward_backward()
            for v in params.values():
                v.grad = None
        torch.cuda.current_stream().wait_stream(side)
        graph_fb = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph_fb):
            forward_backward()
    except Exception as error:
        report(stage="graph-fwd-bwd-capture", ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])
    else:

        def replay_fb(i):
            static_view.copy_(viewmats[i % C])
            static_gt.copy_(gts[i % C])
            graph_fb.replay()
            if bool(fwd_holder["overflow"]):
                raise RuntimeError("capacity overflow")
            stats(fwd_holder["p"])
            opt_eager.step()  # the gradients stay where the graph writes them: no zero_grad

        try:
            report(stage="graph-fwd-bwd", ms_per_step=timed(replay_fb, args.steps))
        except Exception as error:
            report(stage="graph-fwd-bwd", ok=False, error=repr(error), trace=traceback.format_exc()[-3000:])
    if args.out:
        json.dump(lines, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
