"""Differentiable pure-PyTorch Gaussian rasterizer: the CPU backend and the oracle for gsplat.

It follows gsplat 1.4's CUDA rasterizer step by step, so images and gradients agree with it up to
float rounding: EWA projection (gsplat's own PyTorch projection code), depth-sorted front-to-back
alpha compositing per 16x16 tile with gsplat's thresholds (alpha < 1/255 skipped, alpha capped at
0.999, a pixel stops once transmittance would fall to 1e-4), SH colours shifted by +0.5 and clamped
at 0, and the same ``info`` dictionary (``means2d`` in the graph so ``.grad`` is filled, plus
``means2d.absgrad`` when asked, ``radii``, ``width``, ``height``, ``n_cameras``...).

Cost is O(pixels x Gaussians per tile): meant for small scenes (tests, CPU demos), not for real
captures.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.raster.tile_bounds import tile_radii_torch

_torch_impl = upstream.torch_reference_ops()
_fully_fused_projection = _torch_impl._fully_fused_projection
_quat_scale_to_covar_preci = _torch_impl._quat_scale_to_covar_preci
_spherical_harmonics = _torch_impl._spherical_harmonics

TILE_SIZE = 16
ALPHA_MIN = 1.0 / 255.0
ALPHA_MAX = 0.999
T_MIN = 1e-4


def reference_rasterization(
    means: Tensor,  # [N, 3]
    quats: Tensor,  # [N, 4]
    scales: Tensor,  # [N, 3]
    opacities: Tensor,  # [N]
    colors: Tensor,  # [N, D] or [N, K, 3] (SH)
    viewmats: Tensor,  # [C, 4, 4]
    Ks: Tensor,  # [C, 3, 3]
    width: int,
    height: int,
    sh_degree: Optional[int] = None,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    render_mode: str = "RGB",
    absgrad: bool = False,
    rasterize_mode: str = "classic",
    eps2d: float = 0.3,
    rows: Optional[Sequence[Tuple[int, int]]] = None,
    tight_tiles: bool = True,
    camtoworlds: Optional[Tensor] = None,  # [C, 4, 4] inverse(viewmats), when the caller keeps it
) -> Tuple[Tensor, Tensor, Dict]:
    if render_mode not in ("RGB", "RGB+ED"):
        raise ValueError(f"reference rasterizer supports render_mode RGB and RGB+ED, not {render_mode}")
    C = viewmats.shape[0]
    covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False, triu=False)
    radii, means2d, depths, conics, compensations = _project(
        means, covars, viewmats, Ks, width, height, eps2d=eps2d, near_plane=near_plane, far_plane=far_plane,
        calc_compensations=rasterize_mode == "antialiased",
    )  # fmt: skip
    opacities_c = opacities.unsqueeze(0).expand(C, -1)
    if compensations is not None:
        opacities_c = opacities_c * compensations

    if sh_degree is None:
        colors_c = colors.unsqueeze(0).expand(C, -1, -1) if colors.dim() == 2 else colors
    else:
        campos = (torch.inverse(viewmats) if camtoworlds is None else camtoworlds)[:, :3, 3]
        dirs = means[None, :, :] - campos[:, None, :]
        shs = colors.unsqueeze(0).expand(C, -1, -1, -1) if colors.dim() == 3 else colors
        colors_c = torch.clamp_min(_spherical_harmonics(sh_degree, dirs, shs) + 0.5, 0.0)
        colors_c = torch.where((radii > 0)[..., None], colors_c, torch.zeros_like(colors_c))
    if render_mode == "RGB+ED":
        colors_c = torch.cat([colors_c, depths[..., None]], dim=-1)
    # the tiles a Gaussian is listed in, as the gsplat path finds them (raster/tile_bounds.py)
    tile_radii = tile_radii_torch(radii, conics.detach(), opacities_c.detach()) if tight_tiles else radii

    absgrad_parts: List[Tensor] = []
    renders, alphas = [], []
    for c in range(C):
        strips = []
        for top, bottom in rows if rows is not None else [(0, height)]:
            # a strip is the image with the principal point moved up by `top` rows
            offset = torch.tensor([0.0, float(top)], dtype=means2d.dtype, device=means2d.device)
            strips.append(_composite_camera(
                means2d[c] - offset if top else means2d[c], conics[c], opacities_c[c], colors_c[c], depths[c], tile_radii[c], width,
                bottom - top, absgrad_sink=absgrad_parts if absgrad else None, camera_index=c,
            ))  # fmt: skip
        renders.append(torch.cat([r for r, _ in strips], dim=0))
        alphas.append(torch.cat([a for _, a in strips], dim=0))
    render_colors = torch.stack(renders, 0)
    render_alphas = torch.stack(alphas, 0)
    if render_mode == "RGB+ED":
        render_colors = torch.cat(
            [render_colors[..., :-1], render_colors[..., -1:] / render_alphas.clamp(min=1e-10)], dim=-1
        )

    if absgrad:
        # The hooks below run during backward and add each tile's per-pixel |d loss / d means2d|,
        # which is what gsplat's CUDA backward accumulates into means2d.absgrad.
        means2d.absgrad = torch.zeros_like(means2d)  # type: ignore[attr-defined]

        def _collect(grad: Tensor) -> Tensor:
            for cam, ids, g in absgrad_parts:
                means2d.absgrad[cam].index_add_(0, ids, g)  # type: ignore[attr-defined]
            absgrad_parts.clear()
            return grad  # unchanged

        if means2d.requires_grad:
            means2d.register_hook(_collect)

    info = {
        "camera_ids": None,
        "gaussian_ids": None,
        "radii": radii,
        "tile_radii": tile_radii,
        "means2d": means2d,
        "depths": depths,
        "conics": conics,
        "opacities": opacities_c,
        "width": width,
        "height": height,
        "tile_size": TILE_SIZE,
        "n_cameras": C,
    }
    return render_colors, render_alphas, info


def _project(means: Tensor, covars: Tensor, viewmats: Tensor, Ks: Tensor, width: int, height: int, **options):
    """gsplat's PyTorch projection (``radii`` [C, N], ``means2d`` [C, N, 2], ``depths`` [C, N],
    ``conics`` [C, N, 3], ``compensations`` [C, N] or None), with the culled (camera, Gaussian) pairs
    kept out of the graph, as gsplat's CUDA kernels keep them: zeros, and no gradient.

    gsplat's PyTorch code projects every pair and masks afterwards. A Gaussian on the camera plane
    (depth 0) gets infinite Jacobian entries there, and although nothing rendered depends on it,
    backward multiplies its zero gradient by infinity: NaN in means, quats and scales. So the culled
    pairs are found first (no graph), and only the others are projected with one.
    """
    with torch.no_grad():
        radii = _fully_fused_projection(means.detach(), covars.detach(), viewmats, Ks, width, height, **options)[0]
    visible = radii > 0
    if bool(visible.all()):
        return _fully_fused_projection(means, covars, viewmats, Ks, width, height, **options)
    C, N = radii.shape
    means2d = means.new_zeros((C, N, 2))
    depths = means.new_zeros((C, N))
    conics = means.new_zeros((C, N, 3))
    compensations = means.new_zeros((C, N)) if options.get("calc_compensations") else None
    for c in range(C):
        ids = visible[c].nonzero().squeeze(1)  # may be empty: the outputs still join the graph (zero gradient)
        _, m2d, d, con, comp = _fully_fused_projection(
            means.index_select(0, ids), covars.index_select(0, ids), viewmats[c : c + 1], Ks[c : c + 1], width, height,
            **options,
        )  # fmt: skip
        # out of place: each camera's rows join the graph through index_put, the others stay zero
        at = (torch.full_like(ids, c), ids)
        means2d = means2d.index_put(at, m2d[0])
        depths = depths.index_put(at, d[0])
        conics = conics.index_put(at, con[0])
        if compensations is not None:
            compensations = compensations.index_put(at, comp[0])
    return radii, means2d, depths, conics, compensations


def _composite_camera(
    means2d: Tensor,  # [N, 2]
    conics: Tensor,  # [N, 3]
    opacities: Tensor,  # [N]
    colors: Tensor,  # [N, D]
    depths: Tensor,  # [N]
    tile_radii: Tensor,  # [N]: the half-side of the square of tiles each Gaussian is listed in
    width: int,
    height: int,
    absgrad_sink: Optional[list],
    camera_index: int,
) -> Tuple[Tensor, Tensor]:
    D = colors.shape[-1]
    device, dtype = means2d.device, means2d.dtype
    visible = torch.nonzero(tile_radii > 0).squeeze(-1)  # gsplat's isect_tiles skips radius 0
    order = visible[torch.argsort(depths[visible], stable=True)]
    tiles_x = (width + TILE_SIZE - 1) // TILE_SIZE
    tiles_y = (height + TILE_SIZE - 1) // TILE_SIZE

    # Tile ranges each Gaussian touches, as gsplat's isect_tiles computes them.
    m = means2d.detach()[order]
    r = tile_radii[order].to(dtype)
    tmin_x = torch.clamp(torch.floor((m[:, 0] - r) / TILE_SIZE), 0, tiles_x)
    tmax_x = torch.clamp(torch.ceil((m[:, 0] + r) / TILE_SIZE), 0, tiles_x)
    tmin_y = torch.clamp(torch.floor((m[:, 1] - r) / TILE_SIZE), 0, tiles_y)
    tmax_y = torch.clamp(torch.ceil((m[:, 1] + r) / TILE_SIZE), 0, tiles_y)

    offs = torch.arange(TILE_SIZE, device=device, dtype=dtype) + 0.5
    out_rows = []
    alpha_rows = []
    for ty in range(tiles_y):
        row_c, row_a = [], []
        for tx in range(tiles_x):
            hit = (tmin_x <= tx) & (tx < tmax_x) & (tmin_y <= ty) & (ty < tmax_y)
            ids = order[hit]
            h = min(TILE_SIZE, height - ty * TILE_SIZE)
            w = min(TILE_SIZE, width - tx * TILE_SIZE)
            if ids.numel() == 0:
                row_c.append(torch.zeros(h, w, D, device=device, dtype=dtype))
                row_a.append(torch.zeros(h, w, 1, device=device, dtype=dtype))
                continue
            py = (ty * TILE_SIZE + offs[:h])[:, None].expand(h, w).reshape(-1)
            px = (tx * TILE_SIZE + offs[:w])[None, :].expand(h, w).reshape(-1)
            mu = means2d.index_select(0, ids)  # [n, 2]
            mu_pix = mu.unsqueeze(0).expand(px.shape[0], -1, -1)  # [P, n, 2]
            if absgrad_sink is not None and mu_pix.requires_grad:
                mu_pix.register_hook(_absgrad_hook(absgrad_sink, camera_index, ids))
            dx = mu_pix[..., 0] - px[:, None]
            dy = mu_pix[..., 1] - py[:, None]
            con = conics.index_select(0, ids)
            sigma = 0.5 * (con[:, 0] * dx * dx + con[:, 2] * dy * dy) + con[:, 1] * dx * dy
            alpha = torch.clamp_max(opacities.index_select(0, ids) * torch.exp(-sigma), ALPHA_MAX)
            alpha = torch.where((sigma >= 0) & (alpha >= ALPHA_MIN), alpha, torch.zeros_like(alpha))
            one_minus = 1.0 - alpha
            T_incl = torch.cumprod(one_minus, dim=1)
            T_excl = torch.cat([torch.ones_like(T_incl[:, :1]), T_incl[:, :-1]], dim=1)
            keep = (T_incl > T_MIN).to(dtype)  # a pixel stops before the Gaussian that would end it
            weights = alpha * T_excl * keep  # [P, n]
            rgb = weights @ colors.index_select(0, ids)  # [P, D]
            acc = weights.sum(dim=1, keepdim=True)
            row_c.append(rgb.reshape(h, w, D))
            row_a.append(acc.reshape(h, w, 1))
        out_rows.append(torch.cat(row_c, dim=1))
        alpha_rows.append(torch.cat(row_a, dim=1))
    return torch.cat(out_rows, dim=0), torch.cat(alpha_rows, dim=0)


def _absgrad_hook(sink: list, camera_index: int, ids: Tensor):
    def hook(grad: Tensor) -> None:
        sink.append((camera_index, ids, grad.abs().sum(dim=0)))

    return hook
