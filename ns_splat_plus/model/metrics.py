"""Image metrics of one evaluation render: PSNR, SSIM, LPIPS (and their colour-corrected twins).

Entry point: :func:`image_metrics`, behind ``SplatPlusModel.get_image_metrics_and_images``. Renders
larger than training's pixel budget are scored on the host, so that the device never holds more
full-resolution images than training needs (same formulas, same numbers); LPIPS runs on the host
where its activations would take the device above the training peak (:func:`lpips_device`). LPIPS is ``None``,
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


LPIPS_BYTES_PER_PIXEL = 400
"""Device memory that LPIPS (AlexNet on both images: their features, normalised copies and
differences, and cuDNN's workspace) is given per pixel of the image, with room to spare. The
estimate decides where LPIPS runs; ``tests/test_gpu_paths.py`` checks the eval peak on the GPU."""


def lpips_device(
    device: torch.device, height: int, width: int, limit_bytes: Optional[int], allocated_bytes: int
) -> torch.device:
    """Where LPIPS of one ``height`` x ``width`` image runs: on ``device`` when its activations fit
    under ``limit_bytes`` (the training peak) beside the ``allocated_bytes`` already held, else on the
    host (the same network and numbers to float rounding, slower), so that evaluation never needs
    more device memory than training. No limit known, or not CUDA: ``device``."""
    device = torch.device(device)
    if device.type != "cuda" or not limit_bytes:
        return device
    fits = allocated_bytes + LPIPS_BYTES_PER_PIXEL * height * width <= limit_bytes
    return device if fits else torch.device("cpu")


def _lpips_on(model, device: torch.device):
    """``model.lpips`` on ``device``: the module itself on the model's device, a host copy (made once) on the CPU."""
    if device.type == torch.device(model.device).type:
        return model.lpips
    host = getattr(model, "_lpips_host", None)
    if host is None:
        import copy

        host = copy.deepcopy(model.lpips).to(device)
        model._lpips_host = host
    return host


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
            device = torch.device(model.device)
            allocated = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
            where = lpips_device(device, H, W, getattr(model, "eval_memory_limit_bytes", None), allocated)
            with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=False):
                lpips = float(_lpips_on(model, where)(gt.to(where), pred.to(where)))
        return {f"{prefix}psnr": float(psnr.item()), f"{prefix}ssim": float(ssim), f"{prefix}lpips": lpips}

    metrics = score(predicted_rgb, "")
    if model.config.color_corrected_metrics:
        metrics.update(score(color_correct(predicted_rgb, gt_rgb), "cc_"))
    return metrics, {"img": torch.cat([gt_rgb, predicted_rgb], dim=1)}
