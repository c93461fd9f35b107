"""Image metrics of one evaluation render: PSNR, SSIM, LPIPS (and their colour-corrected twins).

Entry point: :func:`image_metrics`, behind ``SplatPlusModel.get_image_metrics_and_images``. Renders
larger than training's pixel budget are scored on the host, so that the device never holds more
full-resolution images than training needs (same formulas, same numbers). LPIPS is ``None``,
never 0, when its weights are unavailable. With ``--pipeline.model.color-corrected-metrics True``
``cc_psnr`` / ``cc_ssim`` / ``cc_lpips`` are added, as splatfacto does (nerfstudio's ``color_correct``).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor


def psnr_on_device(pred: Tensor, gt: Tensor) -> Tensor:
    """PSNR of images in [0, 1] as a device tensor (torchmetrics' formula without its host sync)."""
    mse = torch.mean((pred - gt) ** 2)
    return -10.0 * torch.log10(mse)


def image_metrics(
    model, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]
) -> Tuple[Dict[str, Optional[float]], Dict[str, Tensor]]:
    """Metrics of ``outputs["rgb"]`` [H, W, 3] against ``batch["image"]`` and the side-by-side image."""
    import pytorch_msssim
    from nerfstudio.model_components.lib_bilagrid import color_correct
    from torchmetrics.functional.image import peak_signal_noise_ratio

    predicted_rgb = outputs["rgb"]
    H, W = predicted_rgb.shape[:2]
    budget = model.eval_pixel_budget()
    on_host = budget > 0 and H * W > budget
    if on_host:
        image = batch["image"].cpu()
        image = image.float() / 255.0 if image.dtype == torch.uint8 else image.float()
        gt_rgb = model.composite_with_background(image, outputs["background"].cpu())
        predicted_rgb = predicted_rgb.cpu()
    else:
        gt_rgb = model.composite_with_background(model.get_gt_img(batch["image"]), outputs["background"])

    def score(pred_hwc: Tensor, prefix: str) -> Dict[str, Optional[float]]:
        gt = torch.moveaxis(gt_rgb, -1, 0)[None, ...]
        pred = torch.moveaxis(pred_hwc, -1, 0)[None, ...]
        if on_host:
            psnr = peak_signal_noise_ratio(pred, gt, data_range=1.0)
            ssim = pytorch_msssim.ssim(gt, pred, data_range=1.0, size_average=True)
        else:
            psnr, ssim = model.psnr(gt, pred), model.ssim(gt, pred)
        lpips = None
        if model.lpips is not None:
            # nerfstudio's ns-train sets cudnn.benchmark, whose algorithm search for AlexNet at full
            # resolution can take gigabytes of workspace: heuristics instead, as for any one-off input size
            with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=False):
                lpips = float(model.lpips(gt.to(model.device), pred.to(model.device)))
        return {f"{prefix}psnr": float(psnr.item()), f"{prefix}ssim": float(ssim), f"{prefix}lpips": lpips}

    metrics = score(predicted_rgb, "")
    if model.config.color_corrected_metrics:
        metrics.update(score(color_correct(predicted_rgb, gt_rgb), "cc_"))
    return metrics, {"img": torch.cat([gt_rgb, predicted_rgb], dim=1)}
