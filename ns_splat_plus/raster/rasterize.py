"""One rasterization entry point, two backends: :func:`rasterize` (re-exported by :mod:`ns_splat_plus.raster`).

``rasterize`` takes gsplat's ``rasterization`` arguments (the subset splatfacto uses) and returns
``(render, alpha, info)`` exactly as gsplat does. CUDA tensors go to gsplat; CPU tensors go to the
differentiable pure-PyTorch reference in :mod:`ns_splat_plus.raster.reference`, which fills the same
``info`` keys that gsplat's strategies read (means2d with its gradient and absgrad, radii, width,
height, n_cameras), so densification runs on CPU too.

On CUDA the stages of ``gsplat.rasterization`` (projection, spherical harmonics, tiles, pixels) are
composed here (:func:`_gsplat_render`), with the same calls in the same order, so that a caller can
hand in what does not change between steps: gsplat's ``torch.inverse(viewmats)`` costs a cuSOLVER
factorisation and an error check that synchronises the host with the GPU, on every step, for the
camera centres of the spherical harmonics; ``camtoworlds`` passes them in. Between projection and
tiles, each Gaussian's square of tiles is bounded by where its opacity lets it reach alpha 1/255
(:mod:`ns_splat_plus.raster.tile_bounds`), not by gsplat's 3 sigma: the same images, fewer tile entries.
"""

from __future__ import annotations

import math
from typing import Dict, List, Literal, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.raster.fixed_capacity_isect import isect_tiles_fixed
from ns_splat_plus.raster.tile_bounds import tile_radii as tight_tile_radii

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
    camtoworlds: Optional[Tensor] = None,
    tight_tiles: bool = True,
    isect_capacity: Optional[int] = None,
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

    ``camtoworlds``: [C, 4, 4] ``torch.inverse(viewmats)``, when the caller keeps it (computed here
    otherwise): the camera centres of the spherical harmonics.

    ``tight_tiles``: sort each Gaussian into the tiles where its opacity can reach alpha 1/255
    (:func:`~ns_splat_plus.raster.tile_bounds.tile_radii`) instead of its whole 3-sigma square: the
    same images, fewer tile entries; ``info["radii"]`` stays gsplat's either way.

    ``isect_capacity``: list the (Gaussian, tile) intersections in this many slots, without reading their
    count on the host (:mod:`~ns_splat_plus.raster.fixed_capacity_isect`), so that the render can be
    recorded in a CUDA graph: the same pixels while the count fits. The spherical harmonics are then
    two Triton kernels (:func:`~ns_splat_plus.kernels.spherical_harmonics.spherical_harmonics_triton`;
    beyond degree 3 gsplat's PyTorch operations, :func:`~ns_splat_plus.upstream.recordable_spherical_harmonics`):
    gsplat 1.4.0's SH kernels launch where a recording does not see them. ``info["isect_overflow"]`` ([] bool,
    on the device) says whether entries were dropped, ``info["isect_count"]`` ([] int64) how many there
    were. gsplat only, whole images; the reference backend lists no tiles and ignores it. With
    ``sh_degree`` it needs ``camtoworlds``: ``torch.inverse`` cannot run while a graph records.

    ``rows``: render the image as horizontal strips [top, bottom) (tile-aligned tops), one after the
    other, with the projection of the whole image: the same pixels with a fraction of the
    rasterizer's memory (its tile-intersection buffers grow with the pixel count). No autograd.
    """
    if backend == "auto":
        backend = "gsplat" if means.is_cuda else "reference"
    if isect_capacity is not None and sh_degree is not None and camtoworlds is None:
        raise ValueError("rasterize(isect_capacity=..., sh_degree=...) needs camtoworlds: a CUDA graph cannot record "
                         "torch.inverse(viewmats)")  # fmt: skip
    if backend == "gsplat":
        _require_cuda(means)
        stages = (
            means,
            quats,
            scales,
            opacities,
            colors,
            viewmats,
            Ks,
            width,
            height,
            sh_degree,
            near_plane,
            far_plane,
            render_mode,
            rasterize_mode,
            camtoworlds,
            tight_tiles,
        )
        if rows is not None:
            if isect_capacity is not None:
                raise ValueError("isect_capacity renders whole images: it does not combine with rows")
            with torch.no_grad():
                return _gsplat_strips(_gsplat_project(*stages), width, height, render_mode, rows)
        projected = _gsplat_project(*stages, recordable=isect_capacity is not None)
        return _gsplat_render(projected, width, height, render_mode, absgrad, isect_capacity)
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
            rows=rows,
            tight_tiles=tight_tiles,
            camtoworlds=camtoworlds,
        )
    raise ValueError(f"unknown rasterization backend {backend!r} (expected auto, gsplat or reference)")


def _require_cuda(means: Tensor) -> None:
    if not means.is_cuda:
        from ns_splat_plus.errors import UserInputError

        raise UserInputError(
            "--pipeline.model.rasterizer gsplat needs a CUDA GPU, but this run is on the CPU: "
            "use --pipeline.model.rasterizer auto (the PyTorch reference on the CPU) or train on a GPU"
        )


TILE_SIZE = 16  # gsplat.rasterization's default
MAX_SH_DEGREE = 4
"""The highest spherical-harmonics degree gsplat 1.4.0 evaluates (its CUDA kernels, and the PyTorch version the
reference uses): the coefficients of a higher degree would be kept and trained, but never rendered."""


def _triton_spherical_harmonics(degree: int, dirs: Tensor, coeffs: Tensor, masks: Tensor) -> Tensor:
    from ns_splat_plus.kernels.spherical_harmonics import spherical_harmonics_triton

    return spherical_harmonics_triton(degree, dirs, coeffs, masks)


def _gsplat_project(
    means,
    quats,
    scales,
    opacities,
    colors,
    viewmats,
    Ks,
    width,
    height,
    sh_degree,
    near_plane,
    far_plane,
    render_mode,
    rasterize_mode,
    camtoworlds,
    tight_tiles,
    recordable: bool = False,
) -> Dict:
    """gsplat 1.4.0 ``rasterization``'s projection and colours (unpacked, pinhole, one rank), the same
    calls in the same order; returns its ``meta`` so far plus ``colors`` [C, N, D] for the pixels and
    ``tile_radii`` [C, N] for the tiles (gsplat's ``radii`` without ``tight_tiles``). ``recordable``:
    every kernel on the current stream, for a CUDA graph (the spherical harmonics in PyTorch)."""
    kernels = upstream.gsplat_kernels()
    C = viewmats.shape[0]
    radii, means2d, depths, conics, compensations = kernels.fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, eps2d=0.3, packed=False, near_plane=near_plane,
        far_plane=far_plane, radius_clip=0.0, sparse_grad=False, calc_compensations=rasterize_mode == "antialiased",
    )  # fmt: skip
    # gsplat repeats the opacities C times; for one camera a view is the same numbers with one copy less
    opacities = opacities[None] if C == 1 else opacities.repeat(C, 1)  # [C, N]
    if compensations is not None:
        opacities = opacities * compensations
    if sh_degree is None:
        colors = colors.expand(C, -1, -1) if colors.dim() == 2 else colors
    else:
        if camtoworlds is None:
            camtoworlds = torch.inverse(viewmats)  # [C, 4, 4]
        dirs = means[None, :, :] - camtoworlds[:, None, :3, 3]  # [C, N, 3]
        shs = colors.expand(C, -1, -1, -1) if colors.dim() == 3 else colors  # [C, N, K, 3]
        sh = kernels.spherical_harmonics
        if recordable:  # Triton's kernels launch on the recording stream; gsplat's PyTorch SH beyond degree 3
            sh = _triton_spherical_harmonics if sh_degree <= 3 else upstream.recordable_spherical_harmonics
        colors = sh(sh_degree, dirs, shs, masks=radii > 0)
        colors = torch.clamp_min(colors + 0.5, 0.0)
    if render_mode == "RGB+ED":
        colors = torch.cat((colors, depths[..., None]), dim=-1)
    tile_radii = tight_tile_radii(radii, conics.detach(), opacities.detach()) if tight_tiles else radii
    return {"camera_ids": None, "gaussian_ids": None, "radii": radii, "means2d": means2d, "depths": depths,
            "conics": conics, "opacities": opacities, "colors": colors, "n_cameras": C,
            "tile_radii": tile_radii}  # fmt: skip


def _expected_depth(render_colors: Tensor, render_alphas: Tensor) -> Tensor:
    """gsplat's "RGB+ED": the accumulated depth divided by the accumulated opacity."""
    return torch.cat([render_colors[..., :-1], render_colors[..., -1:] / render_alphas.clamp(min=1e-10)], dim=-1)


def _gsplat_render(
    projected: Dict, width: int, height: int, render_mode: str, absgrad: bool, isect_capacity: Optional[int] = None
) -> Tuple[Tensor, Tensor, Dict]:
    """gsplat 1.4.0 ``rasterization``'s tiles and pixels of the whole image: ``(render, alpha, meta)``
    with its ``meta`` keys (``means2d`` keeps its gradient for the densification strategies); with
    ``isect_capacity``, the intersections in that many slots (see :func:`rasterize`)."""
    kernels = upstream.gsplat_kernels()
    meta = dict(projected)
    colors = meta.pop("colors")
    C = meta["n_cameras"]
    tile_width, tile_height = math.ceil(width / float(TILE_SIZE)), math.ceil(height / float(TILE_SIZE))
    masks = None
    if isect_capacity is None:
        tiles_per_gauss, isect_ids, flatten_ids = kernels.isect_tiles(
            meta["means2d"], meta["tile_radii"], meta["depths"], TILE_SIZE, tile_width, tile_height, packed=False,
            n_cameras=C, camera_ids=None, gaussian_ids=None,
        )  # fmt: skip
        isect_offsets = kernels.isect_offset_encode(isect_ids, C, tile_width, tile_height)
    else:  # one more (masked) row of tiles spans the unused slots
        fixed = isect_tiles_fixed(
            meta["means2d"], meta["tile_radii"], meta["depths"], TILE_SIZE, tile_width, tile_height, isect_capacity
        )
        tiles_per_gauss, isect_ids, flatten_ids = fixed.tiles_per_gauss, fixed.isect_ids, fixed.flatten_ids
        isect_offsets, masks = fixed.isect_offsets, fixed.masks
        meta.update({"isect_overflow": fixed.overflow, "isect_count": fixed.n_isects})
    meta.update({"tile_width": tile_width, "tile_height": tile_height, "tiles_per_gauss": tiles_per_gauss,
                 "isect_ids": isect_ids, "flatten_ids": flatten_ids, "isect_offsets": isect_offsets, "width": width,
                 "height": height, "tile_size": TILE_SIZE, "n_cameras": C})  # fmt: skip
    render_colors, render_alphas = kernels.rasterize_to_pixels(
        meta["means2d"], meta["conics"], colors, meta["opacities"], width, height, TILE_SIZE, isect_offsets,
        flatten_ids, backgrounds=None, masks=masks, packed=False, absgrad=absgrad,
    )  # fmt: skip
    if render_mode == "RGB+ED":
        render_colors = _expected_depth(render_colors, render_alphas)
    return render_colors, render_alphas, meta


def _gsplat_strips(projected: Dict, width: int, height: int, render_mode: str, rows) -> Tuple[Tensor, Tensor, Dict]:
    """The tiles and pixels of ``_gsplat_render``, strip by strip (no autograd)."""
    kernels = upstream.gsplat_kernels()
    means2d, tile_radii, depths = projected["means2d"], projected["tile_radii"], projected["depths"]
    C = projected["n_cameras"]
    tile_width = math.ceil(width / TILE_SIZE)
    renders: List[Tensor] = []
    alphas: List[Tensor] = []
    for top, bottom in rows:
        strip_means2d = means2d.clone()
        strip_means2d[..., 1] -= top
        tile_height = math.ceil((bottom - top) / TILE_SIZE)
        _, isect_ids, flatten_ids = kernels.isect_tiles(
            strip_means2d, tile_radii, depths, TILE_SIZE, tile_width, tile_height, packed=False, n_cameras=C
        )
        offsets = kernels.isect_offset_encode(isect_ids, C, tile_width, tile_height)
        render, alpha = kernels.rasterize_to_pixels(
            strip_means2d, projected["conics"], projected["colors"], projected["opacities"], width, bottom - top,
            TILE_SIZE, offsets, flatten_ids,
        )  # fmt: skip
        renders.append(render)
        alphas.append(alpha)
        del isect_ids, flatten_ids, offsets  # free before the next strip
    render_colors = torch.cat(renders, dim=1)
    render_alphas = torch.cat(alphas, dim=1)
    if render_mode == "RGB+ED":
        render_colors = _expected_depth(render_colors, render_alphas)
    info = {key: projected[key] for key in ("radii", "means2d", "depths", "conics", "gaussian_ids", "camera_ids")}
    info.update({"width": width, "height": height, "n_cameras": C})
    return render_colors, render_alphas, info
