"""Side by side (issue 48, commit e232c2f): the fused loss's kernels with the image strides specialized (the
kernels/ssim.py of e232c2f^, loaded from --old) and unspecialized (the package's), at lite's and splat-plus's
image sizes, one process: forward + backward of splatfacto's loss, median of 200 timed calls each after 20
warm-up calls, CUDA events (GPU time), interleaved in 5 rounds. Prints JSON lines.
Usage: python benchmarks/2026-11-29-h200-kernel-strides-and-fixed-isect/ssim_specialization_bench.py --old /tmp/ssim_old.py
(git show e232c2f^:ns_splat_plus/kernels/ssim.py > /tmp/ssim_old.py)"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys

import torch

from ns_splat_plus.kernels import ssim as new
from ns_splat_plus.model.ssim import window_on

SIZES = [(1080, 1920), (540, 960), (1000, 1500), (500, 750), (250, 375)]


def load_old(path):
    spec = importlib.util.spec_from_file_location("ssim_specialized", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def inputs(height, width, gt_uint8):
    g = torch.Generator().manual_seed(0)
    alphas = torch.rand((1, height, width, 1), generator=g).cuda()
    colors = ((1.4 * torch.rand((1, height, width, 3), generator=g) - 0.2)).cuda() * alphas
    background = torch.rand(3, generator=g).cuda()
    gt = (torch.randint(0, 256, (1, height, width, 3), generator=g, dtype=torch.uint8) if gt_uint8
          else torch.rand((1, height, width, 3), generator=g)).cuda()  # fmt: skip
    return colors, alphas, background, gt


def one_call(module, colors, alphas, background, gt, window):
    images = module.Images(colors.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2), alphas.permute(0, 3, 1, 2), background)
    weights = module.Weights(ssim_weight=-0.2, ssim_offset=0.2, l1_weight=0.8)
    value, derivatives = module.forward(images, window, weights, keep_derivatives=True)
    module.backward(torch.ones((), device="cuda"), images, window, weights, derivatives)
    return value


def gpu_ms(module, args, calls):
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        one_call(module, *args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True)
    args = parser.parse_args()
    old = load_old(args.old)
    window = window_on(torch.device("cuda"))
    for height, width in SIZES:
        gt_uint8 = (height, width) in ((1080, 1920), (1000, 1500))  # full size: uint8 as the trainer reads it
        data = (*inputs(height, width, gt_uint8), window)
        same = bool(one_call(old, *data) == one_call(new, *data))
        rounds = {"specialized": [], "unspecialized": []}
        for _ in range(5):
            for name, module in (("specialized", old), ("unspecialized", new)):
                gpu_ms(module, data, 20)
                rounds[name].append(gpu_ms(module, data, 200))
        print(json.dumps({"size": f"{width}x{height}", "gt_uint8": gt_uint8, "same_value": same,
                          **{k: [round(v, 4) for v in vs] for k, vs in rounds.items()},
                          "median_ratio": statistics.median(rounds["unspecialized"]) /
                          statistics.median(rounds["specialized"])}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
