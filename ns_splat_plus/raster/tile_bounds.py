"""Opacity-aware tile bounds: :func:`tile_radii`, the square of tiles each projected Gaussian is sorted into.

gsplat 1.4.0 puts a Gaussian into every 16 x 16 tile that a square of half-side ``radii`` (3 sigma of
its largest eigenvalue) around its centre touches. Its rasterizer then skips the Gaussian at every
pixel where ``alpha = opacity * exp(-sigma) < 1/255``, so wherever that holds for a whole tile the
tile's list carries an entry that only costs: a sort key, a load per pixel batch, an evaluation per
pixel, forward and backward. A Gaussian of opacity ``o`` can reach 1/255 only where
``sigma = d^T Q d / 2 <= ln(255 o)`` (``Q`` its conic): inside an ellipse whose bounding box has
half-sides ``sqrt(2 ln(255 o) (Q^-1)_xx)`` and ``sqrt(2 ln(255 o) (Q^-1)_yy)``, often far inside the
3-sigma square (a Gaussian of opacity 0.05 reaches 2.3 sigma; an opaque one elongated at 45 degrees
0.78 of the square's half-side, sqrt(ln 255) / 3). Trainers built for speed (FlashGS, Speedy-Splat, FastGS) bound tiles this way.

:func:`tile_radii` returns ``min(radii, ceil(that half-side))`` for isect_tiles, and leaves gsplat's
``radii`` for everything else (the densification statistics, the projection's backward). Every pixel
where the rasterizer lets a Gaussian contribute stays inside its square, so the images are bitwise
gsplat's and the gradients differ only by the order of its atomic adds (``pytest -m gpu
tests/raster/test_raster.py``). The bound allows for the rasterizer's float32 arithmetic (``sigma`` in
float32 with ``--use_fast_math``): ``Q`` is shrunk by ``2 * ROUNDING * m`` on its diagonal, where
``m |d|^2`` bounds the magnitude of the terms of ``sigma`` (a float32 sum of them is off by at most a
few units of 6e-8 of it), the level gets ``LEVEL_SLACK`` for ``__expf`` and the product with the
opacity, and the half-side ``PIXEL_SLACK`` for the rounding of the pixel offsets and of the tile
ranges. Where the shrunk ``Q`` is not positive definite (an axis ratio beyond ~800:1 in sigma) or a
value is not finite, gsplat's radius is kept.

On CUDA one Triton kernel computes it (in float64, :mod:`ns_splat_plus.kernels.tile_bounds`); elsewhere
:func:`tile_radii_torch`, the same formula in PyTorch, which the CPU reference rasterizer uses and the
tests compare with.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ns_splat_plus.kernels.tile_bounds import tile_radii_triton

ROUNDING = 1e-6
"""Relative error allowed for the rasterizer's float32 ``sigma`` (16 units of 2^-24)."""
LEVEL_SLACK = 1e-4
"""Added to ``ln(255 o)``: ``__expf`` and the opacity product off by up to 1e-4 relative."""
PIXEL_SLACK = 0.01
"""Added to the half-side in pixels, plus ``RADIUS_SLACK`` of gsplat's radius: the rasterizer's float32 pixel
offsets and isect_tiles' float32 tile ranges are off by up to 6e-8 of the centre's coordinate, and a centre
that reaches the image lies within gsplat's radius of it (5e-4 px at 8,192 px)."""
RADIUS_SLACK = 1e-6
"""Added to the half-side per pixel of gsplat's radius (see ``PIXEL_SLACK``)."""


def tile_radii(radii: Tensor, conics: Tensor, opacities: Tensor) -> Tensor:
    """The half-side, in pixels, of the square of tiles each (camera, Gaussian) pair is sorted into.

    Args:
        radii: [C, N] int32, gsplat's 3-sigma radii (0: culled).
        conics: [C, N, 3] float32, the inverse 2D covariances (a, b, c: ``sigma = (a dx^2 + c dy^2) / 2
            + b dx dy``).
        opacities: [C, N] float32, the opacities the rasterizer reads (with the antialiased
            compensation already applied).

    Returns:
        [C, N] int32, never above ``radii``; 0 where the Gaussian reaches 1/255 nowhere.
    """
    if radii.is_cuda:
        return _tile_radii_triton(radii, conics, opacities)
    return tile_radii_torch(radii, conics, opacities)


def tile_radii_torch(radii: Tensor, conics: Tensor, opacities: Tensor) -> Tensor:
    """:func:`tile_radii` in PyTorch (float64): the CPU path and the kernel's oracle."""
    a, b, c = conics.double().unbind(-1)
    level = torch.log(255.0 * opacities.double()) + LEVEL_SLACK  # sigma's largest value that can reach 1/255
    margin = ROUNDING * (torch.maximum(a, c) + b.abs())  # 2 * ROUNDING * m, m = (max(a, c) + |b|) / 2
    a, c = a - margin, c - margin
    det = a * c - b * b
    bounded = (a > 0) & (det > 0) & torch.isfinite(level) | (level == float("-inf"))
    slack = PIXEL_SLACK + RADIUS_SLACK * radii.double()
    half_side = torch.sqrt((2.0 * level * torch.maximum(a, c) / det).clamp_min(0.0)) + slack
    tight = torch.where(level > 0, torch.ceil(half_side), torch.zeros_like(half_side))
    tight = torch.minimum(torch.nan_to_num(tight, nan=0.0), radii.double())
    return torch.where(bounded & (radii > 0), tight, radii.double()).to(torch.int32)


def _tile_radii_triton(radii: Tensor, conics: Tensor, opacities: Tensor) -> Tensor:
    return tile_radii_triton(radii, conics, opacities, ROUNDING, LEVEL_SLACK, PIXEL_SLACK, RADIUS_SLACK)


__all__ = ["tile_radii", "tile_radii_torch"]
