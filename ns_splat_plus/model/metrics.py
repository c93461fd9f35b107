"""Image metrics of one evaluation render: PSNR, SSIM, LPIPS (and their colour-corrected twins).

Entry point: :func:`image_metrics`, behind ``SplatPlusModel.get_image_metrics_and_images``. Renders
larger than training's pixel budget are scored on the host, so that the device never holds more
full-resolution images than training needs (same formulas, same numbers), and so are those whose
SSIM or LPIPS would take the device above the training peak (:func:`fits_on_device`). LPIPS is ``None``,
never 0, when its weights are unavailable. With ``--pipeline.model.color-corrected-metrics True``
``cc_psnr`` / ``cc_ssim`` / ``cc_lpips`` are added, as splatfacto does (nerfstudio's ``color_correct``).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.parallel import collectives


def psnr_on_device(pred: Tensor, gt: Tensor) -> Tensor:
    """PSNR of images in [0, 1] as a device tensor (torchmetrics' formula without its host sync)."""
    mse = torch.mean((pred - gt) ** 2)
    return -10.0 * torch.log10(mse)


SSIM_BYTES_PER_PIXEL = 256
"""Device memory that PSNR and pytorch_msssim's SSIM of one image take per pixel (its five Gaussian-
filtered maps and their products): 233 measured on an H200 at 1500x1000, with room."""
LPIPS_BYTES_PER_PIXEL = 400
"""The same for LPIPS (AlexNet on both images: their features, normalised copies and differences,
and cuDNN's workspace), an estimate with room."""


def fits_on_device(device: torch.device, need_bytes: int, limit_bytes: Optional[int], allocated_bytes: int) -> bool:
    """Whether ``need_bytes`` more on ``device``, beside the ``allocated_bytes`` already held, stay
    within ``limit_bytes`` (the training peak). Where a metric does not fit, it runs on the host (the
    same formula; float rounding aside, the same number), so that evaluation never needs more device
    memory than training. Always True off CUDA or without a known limit. The estimates above decide;
    ``tests/training/test_gpu_paths.py`` checks the eval peak on the GPU."""
    if torch.device(device).type != "cuda" or not limit_bytes:
        return True
    return allocated_bytes + need_bytes <= limit_bytes


def _allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


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
    device = torch.device(model.device)
    limit = getattr(model, "eval_memory_limit_bytes", None)  # the training peak, set by the evaluation
    budget = model.eval_pixel_budget()
    on_host = (budget > 0 and H * W > budget) or not fits_on_device(
        device, SSIM_BYTES_PER_PIXEL * H * W, limit, _allocated(device)
    )
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
        psnr = peak_signal_noise_ratio(pred, gt, data_range=1.0)  # splatfacto's PeakSignalNoiseRatio(data_range=1.0)
        if on_host:
            ssim = pytorch_msssim.ssim(gt, pred, data_range=1.0, size_average=True)
        else:
            ssim = model.ssim(gt, pred)
        lpips = None
        if model.lpips is None and collectives.get_rank() == 0:
            upstream.warn_lpips_unavailable()  # said once, where LPIPS would have been computed
        if model.lpips is not None:
            need = LPIPS_BYTES_PER_PIXEL * H * W
            where = device if fits_on_device(device, need, limit, _allocated(device)) else torch.device("cpu")
            # nerfstudio's ns-train sets cudnn.benchmark, whose algorithm search for AlexNet at full
            # resolution can take gigabytes of workspace: heuristics instead, as for any one-off input size
            with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=False):
                lpips = float(_lpips_on(model, where)(gt.to(where), pred.to(where)))
        return {f"{prefix}psnr": float(psnr.item()), f"{prefix}ssim": float(ssim), f"{prefix}lpips": lpips}

    metrics = score(predicted_rgb, "")
    if model.config.color_corrected_metrics:
        metrics.update(score(color_correct(predicted_rgb, gt_rgb), "cc_"))
    return metrics, {"img": torch.cat([gt_rgb, predicted_rgb], dim=1)}
