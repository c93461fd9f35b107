"""The training loss's SSIM on the GPU: pytorch_msssim (splatfacto's) against the fused kernels.

    python scripts/bench_ssim.py --out /tmp/ssim            # fox, B=4 fox, plush-dog, 4K sizes
    python scripts/bench_ssim.py --sizes 1x1080x1920 4x1080x1920 --repeats 200
    python scripts/bench_ssim.py --column-tiles 1x256 4x128 8x128 16x64   # tile shapes of the column passes

For each size (B x H x W, three channels, the render's [B, H, W, 3] layout read through a permute
as the loss does) it times forward + backward of ``1 - ssim(gt, pred)`` with CUDA events: median of
``--repeats`` after ``--warmup`` calls, inputs rotated among four sets so that repeats do not run
from the cache, both versions in one process side by side. It also reports the largest difference
of value and gradient between the two (pytorch_msssim runs its convolutions as cuDNN picks, TF32
allowed) and the peak memory of each. Writes OUT/bench_ssim.json and prints a table. Entry point:
:func:`main` (``scripts/bench_ssim.py``; needs a CUDA GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import List, Optional

import torch
from pytorch_msssim import SSIM

from splatbench.runtime import fused_ssim, ssim_kernels

DEFAULT_SIZES = ["1x1080x1920", "4x1080x1920", "1x1000x1500", "4x1000x1500", "1x270x480", "1x2160x3840"]


def _inputs(batch, height, width, sets, device):
    generator = torch.Generator(device=device).manual_seed(0)
    out = []
    for _ in range(sets):
        gt = torch.rand((batch, height, width, 3), device=device, generator=generator)
        pred = (gt + 0.1 * torch.randn(gt.shape, device=device, generator=generator)).clamp(0, 1)
        out.append((gt, pred.requires_grad_()))
    return out


def _time(loss_of, inputs, warmup, repeats):
    """Median ms of forward + backward, and the peak memory above the inputs (GiB)."""
    for i in range(warmup):
        gt, pred = inputs[i % len(inputs)]
        loss_of(gt, pred).backward()
        pred.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    times = []
    for i in range(repeats):
        gt, pred = inputs[i % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss_of(gt, pred).backward()
        end.record()
        pred.grad = None
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), (torch.cuda.max_memory_allocated() - base) / 2**30


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bench_ssim.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="BxHxW")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--column-tiles", nargs="*", default=[], help="also time these RxC tiles of the column passes")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_ssim.py needs a CUDA GPU")
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True  # as ns-train sets it
    reference = SSIM(data_range=1.0, size_average=True, channel=3)

    def msssim_loss(gt, pred):
        return 1 - reference(gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2))

    def fused_loss(gt, pred):
        return 1 - fused_ssim(pred.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2))

    rows = []
    for size in args.sizes:
        batch, height, width = (int(v) for v in size.split("x"))
        inputs = _inputs(batch, height, width, 4, device)
        gt, pred = inputs[0]
        values, grads = [], []
        for loss_of in (msssim_loss, fused_loss):
            value = loss_of(gt, pred)
            value.backward()
            values.append(float(value))
            grads.append(pred.grad.clone())
            pred.grad = None
        grad_rel = float((grads[1] - grads[0]).norm() / grads[0].norm())
        ms_ref, peak_ref = _time(msssim_loss, inputs, args.warmup, args.repeats)
        ms_fused, peak_fused = _time(fused_loss, inputs, args.warmup, args.repeats)
        tiles = {}
        default_tile = ssim_kernels.COLUMN_TILE
        for tile in args.column_tiles:  # other tile shapes of the column passes, for tuning
            ssim_kernels.COLUMN_TILE = tuple(int(v) for v in tile.split("x"))
            tiles[tile] = _time(fused_loss, inputs, args.warmup, args.repeats)[0]
        ssim_kernels.COLUMN_TILE = default_tile
        rows.append(
            {
                "size": size,
                "pytorch_msssim_ms": ms_ref,
                "fused_ms": ms_fused,
                "speedup": ms_ref / ms_fused,
                "pytorch_msssim_peak_gib": peak_ref,
                "fused_peak_gib": peak_fused,
                "loss_abs_diff": abs(values[1] - values[0]),
                "grad_rel_diff": grad_rel,
                "fused_ms_by_column_tile": tiles,
            }
        )
        print(
            f"{size:>12}: pytorch_msssim {ms_ref:7.3f} ms, fused {ms_fused:7.3f} ms ({ms_ref / ms_fused:4.1f}x); "
            f"peak {peak_ref:.2f} / {peak_fused:.2f} GiB; |loss diff| {rows[-1]['loss_abs_diff']:.2e}, "
            f"grad rel diff {grad_rel:.2e}" + "".join(f"; tile {t}: {ms:.3f} ms" for t, ms in tiles.items()),
            flush=True,
        )
        del inputs, gt, pred, grads
        torch.cuda.empty_cache()
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "repeats": args.repeats, "rows": rows}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_ssim.json").write_text(json.dumps(result, indent=2))
