"""One rasterization entry point, two backends.

``rasterize`` takes gsplat's ``rasterization`` arguments (the subset splatfacto uses) and returns
``(render, alpha, info)`` exactly as gsplat does. CUDA tensors go to gsplat; CPU tensors go to the
differentiable pure-PyTorch reference in :mod:`ns_splat_plus.raster.reference`, which fills the same
``info`` keys that gsplat's strategies read (means2d with its gradient and absgrad, radii, width,
height, n_cameras), so densification runs on CPU too.
"""

from __future__ import annotations

from typing import Dict, Literal, Optional, Tuple

import torch
from torch import Tensor

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
) -> Tuple[Tensor, Tensor, Dict]:
    """Render Gaussians to ``C`` images; see gsplat.rasterization for the argument conventions."""
    if backend == "auto":
        backend = "gsplat" if means.is_cuda else "reference"
    if backend == "gsplat":
        if not means.is_cuda:
            raise ValueError("the gsplat backend needs CUDA tensors; use backend='reference' on the CPU")
        from gsplat.rendering import rasterization

        return rasterization(
            means=means,
            quats=quats,
            scales=scales,
            opacities=opacities,
            colors=colors,
            viewmats=viewmats,
            Ks=Ks,
            width=width,
            height=height,
            packed=False,
            near_plane=near_plane,
            far_plane=far_plane,
            render_mode=render_mode,
            sh_degree=sh_degree,
            sparse_grad=False,
            absgrad=absgrad,
            rasterize_mode=rasterize_mode,
        )
    if backend == "reference":
        from ns_splat_plus.raster.reference import reference_rasterization

        return reference_rasterization(
            means=means,
            quats=quats,
            scales=scales,
            opacities=opacities,
            colors=colors,
            viewmats=viewmats,
            Ks=Ks,
            width=width,
            height=height,
            sh_degree=sh_degree,
            near_plane=near_plane,
            far_plane=far_plane,
            render_mode=render_mode,
            absgrad=absgrad,
            rasterize_mode=rasterize_mode,
        )
    raise ValueError(f"unknown rasterization backend {backend!r} (expected auto, gsplat or reference)")


__all__ = ["rasterize", "Backend"]
