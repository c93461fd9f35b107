"""The Triton kernel of the opacity-aware tile bounds: :func:`tile_radii_triton`.

The formula, its slacks and why they hold are in :mod:`ns_splat_plus.raster.tile_bounds`, which
calls this on CUDA and keeps the same formula in PyTorch (the CPU path and this kernel's oracle).
The slacks come in as arguments so that the one definition of each stays there.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ns_splat_plus.kernels.launch import KernelLauncher

BLOCK = 1024


@functools.lru_cache(maxsize=1)
def _launcher() -> KernelLauncher:
    """The kernel behind a KernelLauncher, defined on first use (Triton imported only where it runs)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n"])  # the Gaussian count changes at every refine: no compile for n % 16
    def opacity_tile_radii(
        radii_ptr,
        conics_ptr,
        opacities_ptr,
        out_ptr,
        n,
        ROUNDING: tl.constexpr,
        LEVEL_SLACK: tl.constexpr,
        PIXEL_SLACK: tl.constexpr,
        RADIUS_SLACK: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        radii = tl.load(radii_ptr + offsets, mask=inside, other=0)
        a = tl.load(conics_ptr + 3 * offsets, mask=inside, other=1.0).to(tl.float64)
        b = tl.load(conics_ptr + 3 * offsets + 1, mask=inside, other=0.0).to(tl.float64)
        c = tl.load(conics_ptr + 3 * offsets + 2, mask=inside, other=1.0).to(tl.float64)
        opacity = tl.load(opacities_ptr + offsets, mask=inside, other=1.0).to(tl.float64)
        level = tl.log(255.0 * opacity) + LEVEL_SLACK
        margin = ROUNDING * (tl.maximum(a, c) + tl.abs(b))
        a = a - margin
        c = c - margin
        det = a * c - b * b
        never = opacity == 0.0  # log(0): reaches 1/255 nowhere
        finite = (level == level) & (level < 1e300) & (level > -1e300)
        bounded = ((a > 0) & (det > 0) & finite) | never
        slack = PIXEL_SLACK + RADIUS_SLACK * radii.to(tl.float64)
        half_side = tl.sqrt(tl.maximum(2.0 * level * tl.maximum(a, c) / det, 0.0)) + slack
        tight = tl.where(level > 0, tl.ceil(half_side), 0.0)
        tight = tl.where(tight == tight, tight, 0.0)
        tight = tl.minimum(tight, radii.to(tl.float64))
        out = tl.where(bounded & (radii > 0), tight.to(tl.int32), radii)
        tl.store(out_ptr + offsets, out, mask=inside)

    return KernelLauncher(opacity_tile_radii)


def tile_radii_triton(
    radii: Tensor,
    conics: Tensor,
    opacities: Tensor,
    rounding: float,
    level_slack: float,
    pixel_slack: float,
    radius_slack: float,
) -> Tensor:
    """:func:`ns_splat_plus.raster.tile_bounds.tile_radii` in one Triton kernel (float64 inside).

    Args:
        radii: [C, N] int32, gsplat's 3-sigma radii. conics: [C, N, 3] float32. opacities: [C, N] float32.
        rounding, level_slack, pixel_slack, radius_slack: the slacks of raster/tile_bounds.py.

    Returns:
        [C, N] int32.
    """
    radii, conics, opacities = radii.contiguous(), conics.contiguous(), opacities.contiguous()
    out = torch.empty_like(radii)
    n = radii.numel()
    if n:
        _launcher()(
            ((n + BLOCK - 1) // BLOCK,),
            radii,
            conics,
            opacities,
            out,
            n,
            rounding,
            level_slack,
            pixel_slack,
            radius_slack,
            BLOCK,
        )
    return out
