"""Spherical harmonics colours in two Triton kernels, forward and backward: :func:`spherical_harmonics_triton`.

The render a CUDA graph records cannot use gsplat 1.4.0's SH kernels, which launch on the legacy stream
(:func:`ns_splat_plus.upstream.recordable_spherical_harmonics`); gsplat's PyTorch version runs instead,
about a hundred small kernels forward and backward. These two kernels compute the same function on the
current stream: gsplat's basis (Sloan's, as ``_eval_sh_bases_fast``) of the normalised direction, the
colour as the coefficients' weighted sum, zero where the mask is False; the backward gives the gradients
of the coefficients and of the (unnormalised) directions, as autograd gives them through gsplat's PyTorch
version (that version is the oracle of the tests).

They pay: at plush-dog's sizes the recorded SH take 0.05 against 0.31 ms per step, forward and backward,
and splat-plus-lite's recorded step 2.58 against 3.13 ms with :mod:`.isect_fill`'s kernel (one H200;
benchmarks/2026-11-29-h200x2-cuda-graph-lite-default/). gsplat's PyTorch version stays beyond degree 3.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ns_splat_plus.kernels.launch import KernelLauncher

BLOCK = 128


@functools.lru_cache(maxsize=1)
def _launchers() -> tuple[KernelLauncher, KernelLauncher]:
    """The forward and backward kernels, from :mod:`.sh_triton` on first use (Triton imported only where they run)."""
    from ns_splat_plus.kernels import sh_triton

    return KernelLauncher(sh_triton.sh_forward), KernelLauncher(sh_triton.sh_backward)


class _SphericalHarmonics(torch.autograd.Function):
    @staticmethod
    def forward(ctx, degree: int, dirs: Tensor, coeffs: Tensor, masks: Tensor) -> Tensor:
        lead = dirs.shape[:-1]
        K = coeffs.shape[-2]
        dirs_rows = dirs.reshape(-1, 3).contiguous()
        coeff_rows = coeffs.reshape(-1, K, 3).contiguous()
        mask_rows = masks.reshape(-1).to(torch.uint8).contiguous()
        rows = dirs_rows.shape[0]
        out = torch.empty(rows, 3, dtype=dirs.dtype, device=dirs.device)
        if rows:
            forward_kernel, _ = _launchers()
            forward_kernel(((rows + BLOCK - 1) // BLOCK,), dirs_rows, coeff_rows, mask_rows, out, rows,
                           coeff_rows.shape[0], K, degree, BLOCK)  # fmt: skip
        ctx.save_for_backward(dirs_rows, coeff_rows, mask_rows)
        ctx.degree, ctx.lead, ctx.coeff_shape = degree, lead, coeffs.shape
        return out.reshape(*lead, 3)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        dirs_rows, coeff_rows, mask_rows = ctx.saved_tensors
        rows, K = dirs_rows.shape[0], coeff_rows.shape[1]
        grad_rows = grad_out.reshape(-1, 3).contiguous()
        grad_coeffs = torch.zeros(rows, K, 3, dtype=coeff_rows.dtype, device=coeff_rows.device)
        grad_dirs = torch.empty_like(dirs_rows)
        if rows:
            _, backward_kernel = _launchers()
            backward_kernel(((rows + BLOCK - 1) // BLOCK,), dirs_rows, coeff_rows, mask_rows, grad_rows, grad_coeffs,
                            grad_dirs, rows, coeff_rows.shape[0], K, ctx.degree, BLOCK)  # fmt: skip
        if coeff_rows.shape[0] != rows:  # coefficients shared by the cameras: sum the cameras' rows
            grad_coeffs = grad_coeffs.reshape(-1, coeff_rows.shape[0], K, 3).sum(0)
        return None, grad_dirs.reshape(*ctx.lead, 3), grad_coeffs.reshape(ctx.coeff_shape), None


def spherical_harmonics_triton(degree: int, dirs: Tensor, coeffs: Tensor, masks: Tensor) -> Tensor:
    """gsplat's ``spherical_harmonics(degree, dirs, coeffs, masks=masks)`` in two Triton kernels.

    Args:
        degree: 0 to 3, the degree to use. dirs: [C, N, 3] view directions (normalised here, as gsplat does).
        coeffs: [C, N, K, 3] or [N, K, 3] (shared by the cameras), K >= (degree + 1) ** 2, float32.
        masks: [C, N] bool, False where the colour (and its gradients) is zero.

    Returns:
        [C, N, 3] colours.
    """
    if not 0 <= degree <= 3:
        raise ValueError(f"SH degree {degree}: these kernels cover 0 to 3")
    return _SphericalHarmonics.apply(degree, dirs, coeffs, masks)
