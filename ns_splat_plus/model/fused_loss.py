"""The fused backend of :func:`ns_splat_plus.model.loss.photometric_loss`: splatfacto's photometric
loss in the fused SSIM kernels, background composite and L1 included.

The loss is defined once, in PyTorch, by :func:`~ns_splat_plus.model.loss.reference_photometric_loss`;
this module computes that function another way, and runs only through ``photometric_loss`` (which
checks :func:`fused_loss_applies` first). In PyTorch the composite, the conversion, the L1 term and
their backward are some twenty elementwise kernels over the image besides the SSIM (1.7 of 23 ms
per step for four full-size fox images, and as many launches from the host). Here they are folded
into the SSIM kernels of :mod:`ns_splat_plus.kernels.ssim`: the render, alpha and ground truth are
read where the SSIM reads its images, and the backward pass writes the gradients of the colors and
alphas directly. The reference's weighting maps onto the kernels' ``Weights`` in :func:`_weights`.

Not bitwise the reference: float32 sums in another order. tests/kernels/test_photometric_loss.py runs both
on the same inputs (and the kernels against a float64 form).
"""

from __future__ import annotations

from typing import Optional

import torch

from ns_splat_plus.kernels import ssim as kernels
from ns_splat_plus.kernels.ssim import MAX_ELEMENTS, WINDOW_SIZE
from ns_splat_plus.model.ssim import TrainingSSIM, check_images, on_device_of, window_on


def fused_loss_applies(
    ssim: TrainingSSIM, colors: torch.Tensor, alphas: torch.Tensor, background: torch.Tensor, gt: Optional[torch.Tensor]
) -> bool:
    """Whether :func:`fused_photometric_loss` can compute this step's loss (else splatfacto's PyTorch
    path runs): the SSIM's fused kernels are on for this device, the images are large enough and
    below the kernels' size limit, and the ground truth is RGB (uint8 or float32) of the render's size."""
    if not ssim.fused_on(colors.device) or gt is None:
        return False
    if colors.dim() != 4 or colors.shape[-1] != 3 or alphas.shape != (*colors.shape[:-1], 1):
        return False
    if background.shape != (3,) or background.requires_grad or gt.requires_grad:
        return False
    if gt.shape != colors.shape or gt.dtype not in (torch.uint8, torch.float32) or gt.device != colors.device:
        return False
    return min(colors.shape[1:3]) >= WINDOW_SIZE and colors.numel() < MAX_ELEMENTS


class _FusedPhotometricLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, colors, alphas, background, gt, window, ssim_lambda: float):
        images = _images(colors, alphas, background, gt)
        weights = _weights(ssim_lambda)
        needs_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        value, derivatives = kernels.forward(images, window, weights, keep_derivatives=needs_grad)
        if derivatives is not None:
            ctx.save_for_backward(colors, alphas, background, gt, window, derivatives)
            ctx.ssim_lambda = ssim_lambda
        return value

    @staticmethod
    def backward(ctx, grad_out):
        colors, alphas, background, gt, window, derivatives = ctx.saved_tensors
        images = _images(colors, alphas, background, gt)
        grad_x, grad_alpha = kernels.backward(grad_out, images, window, _weights(ctx.ssim_lambda), derivatives)
        # back from the kernels' [N, C, H, W] views to the render's [N, H, W, C] layout
        return grad_x.permute(0, 2, 3, 1), grad_alpha.permute(0, 2, 3, 1), None, None, None, None


def _images(colors, alphas, background, gt) -> kernels.Images:
    return kernels.Images(colors.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2), alphas.permute(0, 3, 1, 2), background)


def _weights(ssim_lambda: float) -> kernels.Weights:
    return kernels.Weights(ssim_weight=-ssim_lambda, ssim_offset=ssim_lambda, l1_weight=1.0 - ssim_lambda)


def fused_photometric_loss(
    colors: torch.Tensor, alphas: torch.Tensor, background: torch.Tensor, gt: torch.Tensor, ssim_lambda: float
) -> torch.Tensor:
    """splatfacto's ``(1 - ssim_lambda) * L1 + ssim_lambda * (1 - SSIM)`` of the composited render.

    Args:
        colors: [B, H, W, 3] the rasterizer's colors (any strides; gradient).
        alphas: [B, H, W, 1] its accumulated opacity (gradient).
        background: [3] composited where the render is transparent (no gradient).
        gt: [B, H, W, 3] the ground truth on the render's device: uint8 (divided by 255 as
            splatfacto's ``get_gt_img``) or float32 in [0, 1] (no gradient).
        ssim_lambda: splatfacto's weight of the SSIM term.

    Returns:
        [] float32; gradients flow to ``colors`` and ``alphas``.
    """
    if gt.requires_grad:
        raise ValueError("fused_photometric_loss: the ground truth takes no gradient")
    check_images("fused_photometric_loss", colors.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2))
    if alphas.shape != (*colors.shape[:-1], 1) or background.shape != (colors.shape[-1],):
        raise ValueError(
            f"fused_photometric_loss: alphas {tuple(alphas.shape)} and background "
            f"{tuple(background.shape)} do not match colors {tuple(colors.shape)}"
        )
    with on_device_of(colors):
        return _FusedPhotometricLoss.apply(colors, alphas, background, gt, window_on(colors.device), float(ssim_lambda))
