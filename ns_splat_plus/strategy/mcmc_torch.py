"""Pure-PyTorch versions of gsplat's CUDA-only MCMC pieces, so that MCMC trains on the CPU too.

:func:`compute_relocation_torch` (Eq. 9 of 3DGS-as-MCMC), :func:`relocate_torch`,
:func:`sample_add_torch` and :func:`inject_noise_torch` mirror ``gsplat.relocation`` and
``gsplat.strategy.ops`` (gsplat 1.4.0); the GPU tests compare them with the CUDA kernels.
Shapes: ``opacities`` [N], ``scales`` [N, 3], ``ratios`` [N], ``binoms`` [n_max, n_max].
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from ns_splat_plus import upstream


def compute_relocation_torch(
    opacities: Tensor, scales: Tensor, ratios: Tensor, binoms: Tensor
) -> Tuple[Tensor, Tensor]:
    """Pure-PyTorch ``gsplat.relocation.compute_relocation`` (Eq. 9 of 3DGS-as-MCMC), for the CPU.

    The double sum over i <= n, k < i of binom(i-1, k) * (-1)^k / sqrt(k+1) * o'^(k+1) is a single
    sum over k with the column sums of the binomial table: sum_{i=1..n} binom(i-1, k).
    """
    n_max = binoms.shape[0]
    ratios = ratios.clamp(min=1, max=n_max).to(torch.int64)
    new_opacities = 1.0 - torch.pow(1.0 - opacities, 1.0 / ratios.to(opacities.dtype))
    row_sums = torch.cumsum(binoms.to(opacities.dtype), dim=0)  # [n_max, n_max]: sum over i-1 = 0..n-1
    k = torch.arange(n_max, device=opacities.device, dtype=opacities.dtype)
    signs = torch.where(k.to(torch.int64) % 2 == 0, 1.0, -1.0).to(opacities.dtype) / torch.sqrt(k + 1.0)
    powers = new_opacities[:, None] ** (k[None, :] + 1.0)  # [N, n_max]
    denom = (row_sums[ratios - 1] * signs[None, :] * powers).sum(dim=-1)
    new_scales = (opacities / denom)[:, None] * scales
    return new_opacities, new_scales


def _relocation(opacities, scales, ratios, binoms):
    if opacities.is_cuda:
        from gsplat.relocation import compute_relocation

        return compute_relocation(opacities=opacities, scales=scales, ratios=ratios, binoms=binoms)
    return compute_relocation_torch(opacities, scales, ratios, binoms)


def _relocated_writer(params, opacities: Tensor, sampled_idxs: Tensor, binoms: Tensor, min_opacity: float):
    """The MCMC relocation of the sampled Gaussians (the paper's Eq. 9, shared by relocate and add):
    a function writing their new opacity and scale into a parameter tensor, as gsplat's ops do."""
    new_opacities, new_scales = _relocation(
        opacities[sampled_idxs].flatten(),
        torch.exp(params["scales"])[sampled_idxs],
        torch.bincount(sampled_idxs)[sampled_idxs] + 1,
        binoms,
    )
    new_opacities = torch.clamp(new_opacities, max=1.0 - torch.finfo(torch.float32).eps, min=min_opacity)

    def write(name: str, p: Tensor) -> None:
        if name == "opacities":
            p[sampled_idxs] = torch.logit(new_opacities).reshape(p[sampled_idxs].shape)
        elif name == "scales":
            p[sampled_idxs] = torch.log(new_scales)

    return write


@torch.no_grad()
def relocate_torch(params, optimizers, mask: Tensor, binoms: Tensor, min_opacity: float) -> None:
    """gsplat.strategy.ops.relocate with a device-independent relocation formula."""
    opacities = torch.sigmoid(params["opacities"])
    dead_indices = mask.nonzero(as_tuple=True)[0]
    alive_indices = (~mask).nonzero(as_tuple=True)[0]
    probs = opacities[alive_indices].flatten()
    sampled_idxs = alive_indices[upstream.multinomial_sample(probs, len(dead_indices), replacement=True)]
    write_relocated = _relocated_writer(params, opacities, sampled_idxs, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        write_relocated(name, p)
        p[dead_indices] = p[sampled_idxs]
        return torch.nn.Parameter(p)

    def optimizer_fn(key: str, v: Tensor) -> Tensor:
        v[sampled_idxs] = 0
        return v

    upstream.update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


@torch.no_grad()
def sample_add_torch(params, optimizers, n: int, binoms: Tensor, min_opacity: float) -> None:
    """gsplat.strategy.ops.sample_add with a device-independent relocation formula."""
    opacities = torch.sigmoid(params["opacities"])
    sampled_idxs = upstream.multinomial_sample(opacities.flatten(), n, replacement=True)
    write_relocated = _relocated_writer(params, opacities, sampled_idxs, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        write_relocated(name, p)
        return torch.nn.Parameter(torch.cat([p, p[sampled_idxs]]))

    def optimizer_fn(key: str, v: Tensor) -> Tensor:
        return torch.cat([v, torch.zeros((len(sampled_idxs), *v.shape[1:]), device=v.device, dtype=v.dtype)])

    upstream.update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


@torch.no_grad()
def inject_noise_torch(params, scaler: float) -> None:
    """gsplat.strategy.ops.inject_noise_to_position with PyTorch covariances, for the CPU."""
    opacities = torch.sigmoid(params["opacities"].flatten())
    covars, _ = upstream.torch_reference_ops()._quat_scale_to_covar_preci(
        params["quats"], torch.exp(params["scales"]), compute_covar=True, compute_preci=False, triu=False
    )
    gate = 1 / (1 + torch.exp(-100 * ((1 - opacities) - 0.995)))
    noise = torch.randn_like(params["means"]) * gate.unsqueeze(-1) * scaler
    params["means"].add_(torch.einsum("bij,bj->bi", covars, noise))
