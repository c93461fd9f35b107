"""One rasterization entry point, two backends: :func:`rasterize`.

``rasterize`` takes gsplat's ``rasterization`` arguments (the subset splatfacto uses) and returns
``(render, alpha, info)`` exactly as gsplat does. CUDA tensors go to gsplat; CPU tensors go to the
differentiable pure-PyTorch reference in :mod:`ns_splat_plus.raster.reference`, which fills the same
``info`` keys that gsplat's strategies read (means2d with its gradient and absgrad, radii, width,
height, n_cameras), so densification runs on CPU too.
"""

from __future__ import annotations

from typing import Dict, List, Literal, Optional, Sequence, Tuple

import math

import torch
from torch import Tensor

from ns_splat_plus import upstream

Backend = Literal["auto", "gsplat", "reference"]


def rasterize(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    colors: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    *,
    sh_degree: Optional[int] = None,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    render_mode: Literal["RGB", "RGB+ED"] = "RGB",
    absgrad: bool = False,
    rasterize_mode: Literal["classic", "antialiased"] = "classic",
    backend: Backend = "auto",
    rows: Optional[Sequence[Tuple[int, int]]] = None,
) -> Tuple[Tensor, Tensor, Dict]:
    """Render Gaussians to ``C`` images; see gsplat.rasterization for the argument conventions.

    Args:
        means: [N, 3] centres. quats: [N, 4] (wxyz, not necessarily normalised). scales: [N, 3].
        opacities: [N] in [0, 1]. colors: [N, D] or SH coefficients [N, K, 3] with ``sh_degree``.
        viewmats: [C, 4, 4] world-to-camera. Ks: [C, 3, 3]. width, height: the render size.
        render_mode: "RGB" or "RGB+ED" (expected depth as a 4th channel).
        backend: "auto" (gsplat for CUDA tensors, the reference for CPU ones), "gsplat" or "reference".

    Returns:
        ``(render [C, H, W, D], alpha [C, H, W, 1], info)``, ``info`` as gsplat's (``means2d``
        [C, N, 2] with its gradient, ``radii`` [C, N], ``width``, ``height``, ``n_cameras`` ...).

    ``rows``: render the image as horizontal strips [top, bottom) (tile-aligned tops), one after the
    other, with the projection of the whole image: the same pixels with a fraction of the
    rasterizer's memory (its tile-intersection buffers grow with the pixel count). No autograd.
    """
    if backend == "auto":
        backend = "gsplat" if means.is_cuda else "reference"
    if rows is not None and backend == "gsplat":
        _require_cuda(means)
        return _gsplat_strips(means, quats, scales, opacities, colors, viewmats, Ks, width, height, sh_degree,
                              near_plane, far_plane, render_mode, rasterize_mode, rows)
    common = dict(
        means=means, quats=quats, scales=scales, opacities=opacities, colors=colors, viewmats=viewmats, Ks=Ks,
        width=width, height=height, sh_degree=sh_degree, near_plane=near_plane, far_plane=far_plane,
        render_mode=render_mode, absgrad=absgrad, rasterize_mode=rasterize_mode,
    )
    if backend == "gsplat":
        _require_cuda(means)
        from gsplat.rendering import rasterization

        return rasterization(**common, packed=False, sparse_grad=False)
    if backend == "reference":
        from ns_splat_plus.raster.reference import reference_rasterization

        return reference_rasterization(**common, rows=rows)
    raise ValueError(f"unknown rasterization backend {backend!r} (expected auto, gsplat or reference)")


def _require_cuda(means: Tensor) -> None:
    if not means.is_cuda:
        from ns_splat_plus.errors import UserInputError

        raise UserInputError(
            "--pipeline.model.rasterizer gsplat needs a CUDA GPU, but this run is on the CPU: "
            "use --pipeline.model.rasterizer auto (the PyTorch reference on the CPU) or train on a GPU"
        )


@torch.no_grad()
def _gsplat_strips(means, quats, scales, opacities, colors, viewmats, Ks, width, height, sh_degree,
                   near_plane, far_plane, render_mode, rasterize_mode, rows) -> Tuple[Tensor, Tensor, Dict]:
    """gsplat's rasterization() pipeline (projection, SH, tiles, pixels), tiles and pixels per strip."""
    kernels = upstream.gsplat_kernels()
    fully_fused_projection, isect_tiles = kernels.fully_fused_projection, kernels.isect_tiles
    isect_offset_encode, rasterize_to_pixels = kernels.isect_offset_encode, kernels.rasterize_to_pixels
    spherical_harmonics = kernels.spherical_harmonics

    C = viewmats.shape[0]
    radii, means2d, depths, conics, compensations = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, eps2d=0.3, packed=False,
        near_plane=near_plane, far_plane=far_plane, calc_compensations=rasterize_mode == "antialiased",
    )  # fmt: skip
    opacities = opacities.repeat(C, 1)
    if compensations is not None:
        opacities = opacities * compensations
    if sh_degree is None:
        colors = colors.expand(C, -1, -1) if colors.dim() == 2 else colors
    else:
        dirs = means[None, :, :] - torch.inverse(viewmats)[:, None, :3, 3]
        shs = colors.expand(C, -1, -1, -1) if colors.dim() == 3 else colors
        colors = torch.clamp_min(spherical_harmonics(sh_degree, dirs, shs, masks=radii > 0) + 0.5, 0.0)
    if render_mode == "RGB+ED":
        colors = torch.cat((colors, depths[..., None]), dim=-1)
    tile_size = 16
    tile_width = math.ceil(width / tile_size)
    renders: List[Tensor] = []
    alphas: List[Tensor] = []
    for top, bottom in rows:
        strip_means2d = means2d.clone()
        strip_means2d[..., 1] -= top
        tile_height = math.ceil((bottom - top) / tile_size)
        _, isect_ids, flatten_ids = isect_tiles(
            strip_means2d, radii, depths, tile_size, tile_width, tile_height, packed=False, n_cameras=C
        )
        offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
        render, alpha = rasterize_to_pixels(
            strip_means2d, conics, colors, opacities, width, bottom - top, tile_size, offsets, flatten_ids
        )
        renders.append(render)
        alphas.append(alpha)
        del isect_ids, flatten_ids, offsets  # free before the next strip
    render_colors = torch.cat(renders, dim=1)
    render_alphas = torch.cat(alphas, dim=1)
    if render_mode == "RGB+ED":
        render_colors = torch.cat(
            [render_colors[..., :-1], render_colors[..., -1:] / render_alphas.clamp(min=1e-10)], dim=-1
        )
    info = {"radii": radii, "means2d": means2d, "depths": depths, "conics": conics, "width": width,
            "height": height, "n_cameras": C, "gaussian_ids": None, "camera_ids": None}  # fmt: skip
    return render_colors, render_alphas, info


__all__ = ["rasterize", "Backend"]
