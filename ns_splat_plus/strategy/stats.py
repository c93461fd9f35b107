"""Statistics behind densification decisions, computed on the device.

Entry points: :func:`grad2d_statistics` (the accumulated 2D gradient at a refine),
:func:`opacity_statistics` (MCMC), :func:`dense_norms` (gsplat's screen-space gradient norms of one
step without its boolean index, so without a host sync) and :func:`write_step_stats`.

Tensor shapes follow gsplat: ``N`` Gaussians, ``C`` cameras of one step, ``nnz`` projected entries
(packed mode).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

# --- statistics -----------------------------------------------------------------------------------


def _quantiles(sorted_values: Tensor, qs: Sequence[float]) -> List[Tensor]:
    """Linear-interpolated quantiles (torch.quantile's default) of an ascending 1-D tensor, which
    may be longer than torch.quantile's 16M limit. The length is known on the host: no sync."""
    n = sorted_values.numel()
    out = []
    for q in qs:
        pos = q * (n - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, n - 1)
        frac = pos - lo
        out.append(sorted_values[lo] * (1.0 - frac) + sorted_values[hi] * frac)
    return out


@torch.no_grad()
def grad2d_statistics(grad2d: Tensor, count: Tensor, threshold: Optional[float]) -> Dict[str, Any]:
    """Statistics of the accumulated averaged 2D gradient (gsplat's ``grad2d / count``) over the
    Gaussians seen since the last refine, and how many exceed ``threshold`` (gsplat's test)."""
    averaged = grad2d / count.clamp_min(1)
    visible = averaged[count > 0]  # one sync (boolean index); refine steps only
    n = visible.numel()
    stats: Dict[str, Any] = {"threshold": threshold, "num_visible": n}
    if n == 0:
        stats.update(
            mean=0.0, median=0.0, p90=0.0, p99=0.0, max=0.0, num_over_threshold=0 if threshold is not None else None
        )
        return stats
    ordered = visible.sort().values
    parts = [visible.mean(), *_quantiles(ordered, (0.5, 0.9, 0.99)), ordered[-1]]
    if threshold is not None:
        parts.append((averaged > threshold).sum().to(averaged.dtype))
    values = torch.stack(parts).tolist()
    stats.update(zip(("mean", "median", "p90", "p99", "max"), values[:5]))
    stats["num_over_threshold"] = int(values[5]) if threshold is not None else None
    return stats


@torch.no_grad()
def opacity_statistics(opacity_logits: Tensor, threshold: float) -> Dict[str, Any]:
    opacities = torch.sigmoid(opacity_logits.flatten())
    n = opacities.numel()
    if n == 0:
        return {"threshold": threshold, "num_below_threshold": 0, "num_gaussians": 0}
    ordered = opacities.sort().values
    values = torch.stack(
        [opacities.mean(), *_quantiles(ordered, (0.1, 0.5, 0.9)), (opacities <= threshold).sum().to(opacities.dtype)]
    ).tolist()
    return {
        "mean": values[0],
        "p10": values[1],
        "median": values[2],
        "p90": values[3],
        "threshold": threshold,
        "num_below_threshold": int(values[4]),
        "num_gaussians": n,
    }


def dense_norms(info: Dict[str, Any], key: str, absgrad: bool, packed: bool) -> Optional[Tuple[Tensor, Tensor]]:
    """gsplat's screen-space norms of the 2D gradient (``DefaultStrategy._update_state``) without
    its boolean index, so without a host sync: ``(norms [C, N], visible [C, N])`` with norms zero
    where not visible; packed: ``(norms [nnz], gaussian ids [nnz])``. None when there is no gradient
    (backward never reached means2d)."""
    means2d = info.get(key)
    if means2d is None or means2d.grad is None:
        return None
    grads = getattr(means2d, "absgrad", None) if absgrad else means2d.grad
    if grads is None:
        return None
    # gsplat scales x and y in place on a clone (three kernels); one multiply by the same two factors,
    # rounded to the gradient's dtype as the in-place product rounds them, gives the same bits
    scale = _screen_scale(info["width"], info["height"], info["n_cameras"], grads.device, grads.dtype)
    norms = (grads * scale).norm(dim=-1)
    if packed:
        return norms, info["gaussian_ids"]
    visible = info["radii"] > 0.0
    return torch.where(visible, norms, 0.0), visible


@functools.lru_cache(maxsize=32)
def _screen_scale(width: int, height: int, n_cameras: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """``[width / 2 * C, height / 2 * C]`` on the device, made once per image size (never written to)."""
    return torch.tensor([width / 2.0 * n_cameras, height / 2.0 * n_cameras], dtype=dtype, device=device)


StepGradients = Tuple[Tensor, Tensor, bool]
"""``(norms, where, packed)`` of one step, as :func:`dense_norms` returns them, plus ``packed``."""


def write_step_stats(row: Tensor, grads: Optional[StepGradients]) -> None:
    """(sum, max, count) of this step's visible norms into the 3-vector ``row`` on the device:
    three reductions written in place (no stacking, no copy, no sync; this runs every step)."""
    if grads is None or grads[0].numel() == 0:
        row.zero_()
        return
    norms, where, packed = grads
    dims = tuple(range(norms.dim()))
    torch.sum(norms, dim=dims, out=row[0])
    torch.amax(norms, dim=dims, out=row[1])
    if packed:
        row[2].fill_(float(norms.numel()))
    else:
        torch.sum(where, dim=dims, dtype=row.dtype, out=row[2])
