"""splatfacto's photometric loss, written once: :func:`photometric_loss`.

The PyTorch form in :func:`reference_photometric_loss` is the definition: the render composited over
the background, ``rgb = clamp(colors + (1 - alphas) * background, 0, 1)``, against the ground truth
(``uint8 / 255``), both multiplied by the mask where there is one, and
``(1 - lambda) * mean |gt - rgb| + lambda * (1 - SSIM(gt, rgb))`` (nerfstudio 1.1.5's splatfacto).

The fused Triton kernels (:mod:`.fused_loss`, ``--pipeline.model.fused-loss``) are a
backend of this function, not a second definition: :func:`photometric_loss` hands them a step only
where they compute the same function (no mask, the render before its composite, an RGB ground truth
of the render's size, CUDA or Triton's interpreter, sizes the kernels take) and runs the reference
everywhere else. tests/kernels/test_photometric_loss.py runs both on the same inputs, so that an edit to the
reference that the kernels do not follow fails there.

In an eager step on CUDA the reference runs from CUDA graphs where it can (:mod:`.loss_graphs`,
``--pipeline.model.loss-cuda-graph``): the same kernels, bitwise the same loss and gradients, less host time.

The fused path is on in splat-plus-lite (5 runs against 5 on plush-dog at one commit: no loss of PSNR
or SSIM, a shorter step; benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite/) and off
elsewhere (docs/speed-and-memory.md).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import torch

from ns_splat_plus.model.fused_loss import fused_loss_applies, fused_photometric_loss
from ns_splat_plus.model.images import TrainingOutputs
from ns_splat_plus.model.ssim import TrainingSSIM


def photometric_loss(
    outputs: Mapping[str, torch.Tensor],
    gt: torch.Tensor,
    ssim: TrainingSSIM,
    ssim_lambda: float,
    mask: Optional[torch.Tensor] = None,
    fused: bool = False,
    graphs: Optional[Callable[..., Optional[torch.Tensor]]] = None,
) -> torch.Tensor:
    """splatfacto's main loss of one training step (the mean of the B cameras' losses).

    Args:
        outputs: the model's training outputs: the render before its composite (``"render_colors"``
            [B, H, W, 3], ``"render_alphas"`` [B, H, W, 1], ``"background"`` [3]; ``"rgb"``, the
            composite, made on first read, as :class:`~ns_splat_plus.model.images.TrainingOutputs`
            does), or the composited ``"rgb"`` alone ([B, H, W, 3] or [H, W, 3], e.g. after the
            bilateral grid).
        gt: [B, H, W, 3] or [H, W, 3] ground truth at the render's size, on its device: uint8
            (divided by 255 here, as splatfacto's ``get_gt_img``) or float in [0, 1].
        ssim: the SSIM term's kernels (fused or pytorch_msssim, :class:`~ns_splat_plus.model.ssim.TrainingSSIM`).
        ssim_lambda: the weight of the SSIM term (splatfacto's ``ssim_lambda``).
        mask: [B, H, W, 1] or [H, W, 1], or None.
        fused: try the fused kernels (--pipeline.model.fused-loss); the reference runs where they do not apply.
        graphs: the reference's CUDA graphs (:class:`~ns_splat_plus.model.loss_graphs.LossGraphs`,
            --pipeline.model.loss-cuda-graph), tried where the fused kernels do not run; each returns None where it
            does not apply.

    Returns:
        [] float32, differentiable in the render.
    """
    if fused and mask is None and "render_colors" in outputs:
        colors, alphas, background = outputs["render_colors"], outputs["render_alphas"], outputs["background"]
        gt_batch = gt if gt.dim() == 4 else gt[None]
        if fused_loss_applies(ssim, colors, alphas, background, gt_batch):
            return fused_photometric_loss(colors, alphas, background, gt_batch, ssim_lambda)
    if graphs is not None and mask is None and isinstance(outputs, TrainingOutputs):
        colors, alphas, background = outputs["render_colors"], outputs["render_alphas"], outputs["background"]
        replayed = graphs(colors, alphas, background, gt, outputs.batched, ssim, ssim_lambda)
        if replayed is not None:
            return replayed
    return reference_photometric_loss(outputs["rgb"], gt, ssim, ssim_lambda, mask)


def reference_photometric_loss(
    rgb: torch.Tensor, gt: torch.Tensor, ssim: TrainingSSIM, ssim_lambda: float, mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """The definition, in PyTorch: ``(1 - lambda) * L1 + lambda * (1 - SSIM)`` of the composite ``rgb``
    (splatfacto's, :func:`~ns_splat_plus.model.images.composite`) against ``gt``, masks applied to both.

    Args:
        rgb: [B, H, W, 3] or [H, W, 3] the composited render. gt: the same shape, uint8 or float.
        mask: [B, H, W, 1] or [H, W, 1], or None. ssim, ssim_lambda: as :func:`photometric_loss`.
    """
    if gt.dtype == torch.uint8:
        gt = gt.float() / 255.0
    if rgb.dim() == 3:  # one camera: splatfacto's [1, 3, H, W] SSIM input
        rgb, gt, mask = rgb[None], gt[None], None if mask is None else mask[None]
    if mask is not None:
        if mask.shape[:-1] != gt.shape[:-1] or rgb.shape[:-1] != gt.shape[:-1]:
            raise ValueError(f"mask {tuple(mask.shape)} does not fit the render {tuple(rgb.shape)}")
        gt, rgb = gt * mask, rgb * mask
    l1 = torch.abs(gt - rgb).mean()
    ssim_loss = 1 - ssim(gt.permute(0, 3, 1, 2), rgb.permute(0, 3, 1, 2))
    return (1 - ssim_lambda) * l1 + ssim_lambda * ssim_loss
