"""Image metrics of one evaluation render: PSNR, SSIM, LPIPS (and their colour-corrected twins).

Entry point: :func:`image_metrics`, behind ``SplatPlusModel.get_image_metrics_and_images``. Evaluation
never needs more device memory than training (the training peak is the limit). SSIM and LPIPS of an
image whose whole-image computation would pass it run over row strips that fit (:func:`rows_per_strip`;
the same value, float rounding aside), and on the host only where not even a strip of
:data:`MIN_STRIP_ROWS` rows fits; so do renders larger than training's pixel budget, so that the device
never holds more full-resolution images than training needs. Until 2026-11-30 the whole metric went to
the host instead, which took ns-eval of splat-plus-lite on fox (9 images at 1920x1080) to 23.6 s against
splatfacto's 7.8 s. LPIPS is ``None``, never 0, when its weights are unavailable. With
``--pipeline.model.color-corrected-metrics True`` ``cc_psnr`` / ``cc_ssim`` / ``cc_lpips`` are added, as
splatfacto does (nerfstudio's ``color_correct``).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

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
and cuDNN's workspace), with room: its tensors peaked at 255 B/px whole and at 109-125 B per crop pixel
in strips (the host at 800x600, counted by a dispatch mode), cuDNN's workspace not included."""


MIN_STRIP_ROWS = 64
"""The fewest image rows a metric strip may hold; below it the metric runs on the host."""


def rows_per_strip(
    height: int, width: int, bytes_per_pixel: int, halo_rows: int, free_bytes: Optional[int]
) -> Optional[int]:
    """Image rows per strip for a metric of a ``height`` x ``width`` image within ``free_bytes`` of device
    memory (the training peak less what the device holds now): None where the whole image fits (or no
    limit is known: off CUDA, or no training peak yet), 0 where not even :data:`MIN_STRIP_ROWS` rows and
    the ``halo_rows`` a strip reads beyond them fit (the host then). The per-pixel estimates above decide;
    ``tests/training/test_gpu_paths.py`` checks the eval peak on the GPU."""
    if free_bytes is None or bytes_per_pixel * height * width <= free_bytes:
        return None
    rows = max(0, free_bytes) // (bytes_per_pixel * width) - halo_rows
    return rows if rows >= MIN_STRIP_ROWS else 0


def ssim_in_row_strips(ssim: torch.nn.Module, img1: Tensor, img2: Tensor, rows: int) -> Tensor:
    """``ssim(img1, img2)`` (pytorch_msssim's ``SSIM``, ``size_average=True``: the mean over the valid
    map) over strips of ``rows`` valid rows, each read with the window's ``win - 1`` rows below it.

    Args:
        ssim: pytorch_msssim's ``SSIM`` module (its ``win``: [C, 1, 1, win]).
        img1, img2: [1, C, H, W] images.
        rows: valid (output) rows per strip.

    Returns:
        A scalar tensor: the strips' means weighted by their rows, the whole-image mean."""
    reach = _window_rows(ssim) - 1
    valid = img1.shape[-2] - reach
    total = img1.new_zeros(())
    for start in range(0, valid, rows):
        stop = min(valid, start + rows)
        total = total + ssim(img1[:, :, start : stop + reach], img2[:, :, start : stop + reach]) * (stop - start)
    return total / valid


def _window_rows(ssim: torch.nn.Module) -> int:
    window: Any = ssim.win  # pytorch_msssim's Gaussian window, [C, 1, 1, win]
    return int(window.shape[-1])


def _free_bytes(device: torch.device, limit_bytes: Optional[int]) -> Optional[int]:
    if device.type != "cuda" or not limit_bytes:
        return None
    return limit_bytes - torch.cuda.memory_allocated(device)


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


def _lpips(model, gt: Tensor, pred: Tensor, on_host: bool, limit: Optional[int]) -> float:
    """LPIPS of [1, 3, H, W] images: whole, in row strips, or on the host (see the module's docstring)."""
    H, W = gt.shape[-2:]
    device = gt.device
    geometry = upstream.lpips_strip_geometry(model.lpips)
    halo = upstream.lpips_strip_halo(geometry) if geometry is not None else H
    rows = 0 if on_host else rows_per_strip(H, W, LPIPS_BYTES_PER_PIXEL, halo, _free_bytes(device, limit))
    # nerfstudio's ns-train sets cudnn.benchmark, whose algorithm search for AlexNet at full resolution
    # can take gigabytes of workspace: heuristics instead, as for any one-off input size
    with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=False):
        if rows is None:
            return float(model.lpips(gt, pred))
        if rows == 0 or geometry is None:
            host = torch.device("cpu")
            return float(_lpips_on(model, host)(gt.to(host), pred.to(host)))
        return float(upstream.lpips_in_row_strips(model.lpips, gt, pred, rows))


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
    reach = _window_rows(model.ssim) - 1
    ssim_rows = rows_per_strip(H, W, SSIM_BYTES_PER_PIXEL, reach, _free_bytes(device, limit))
    on_host = (budget > 0 and H * W > budget) or ssim_rows == 0
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
        elif ssim_rows is None:
            ssim = model.ssim(gt, pred)
        else:
            ssim = ssim_in_row_strips(model.ssim, gt, pred, ssim_rows)
        lpips = None
        if model.lpips is None and collectives.get_rank() == 0:
            upstream.warn_lpips_unavailable()  # said once, where LPIPS would have been computed
        if model.lpips is not None:
            lpips = _lpips(model, gt, pred, on_host, limit)
        return {f"{prefix}psnr": float(psnr.item()), f"{prefix}ssim": float(ssim), f"{prefix}lpips": lpips}

    metrics = score(predicted_rgb, "")
    if model.config.color_corrected_metrics:
        metrics.update(score(color_correct(predicted_rgb, gt_rgb), "cc_"))
    return metrics, {"img": torch.cat([gt_rgb, predicted_rgb], dim=1)}
