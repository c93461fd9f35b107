"""Image metrics of one evaluation render: PSNR, SSIM, LPIPS (and their colour-corrected twins).

Entry point: :func:`image_metrics`, behind ``SplatPlusModel.get_image_metrics_and_images``. Evaluation
never needs more device memory than training (the training peak is the limit). SSIM and LPIPS of an
image whose whole-image computation would pass it run over row strips that fit (:func:`device_rows`;
the same value, float rounding aside), and on the host only where not even a strip of
:data:`MIN_STRIP_ROWS` rows fits. Renders larger than training's pixel budget are rasterized in strips
to the host, so that the device never holds more full-resolution images than training needs: their
PSNR is computed there, and their SSIM and LPIPS on the device in crops, within the same limit. LPIPS
is ``None``, never 0, when its weights are unavailable. With ``--pipeline.model.color-corrected-metrics
True`` ``cc_psnr`` / ``cc_ssim`` / ``cc_lpips`` are added, as splatfacto does (nerfstudio's ``color_correct``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional, Tuple

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
and cuDNN's workspace), with room: its tensors peaked at 255 B/px whole and at 91-116 B per crop pixel
in strips of 256-64 rows (the host at 800x600, counted by a dispatch mode), cuDNN's workspace not included."""


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


def ssim_in_row_strips(
    ssim: torch.nn.Module, img1: Tensor, img2: Tensor, rows: int, device: Optional[torch.device] = None
) -> float:
    """``ssim(img1, img2)`` (pytorch_msssim's ``SSIM``, ``size_average=True``: the mean over the valid
    map) over strips of ``rows`` valid rows, each read with the window's ``win - 1`` rows below it.

    Args:
        ssim: pytorch_msssim's ``SSIM`` module (its ``win``: [C, 1, 1, win]).
        img1, img2: [1, C, H, W] images.
        rows: valid (output) rows per strip.
        device: where each strip is computed (the module's device; crops are copied there), or None:
            where the images are.

    Returns:
        The strips' means weighted by their rows: the whole image's mean."""
    reach = _window_rows(ssim) - 1
    valid = img1.shape[-2] - reach
    total = 0.0
    for start in range(0, valid, rows):
        stop = min(valid, start + rows)
        a, b = (img[:, :, start : stop + reach].to(device or img.device) for img in (img1, img2))
        total += float(ssim(a, b)) * (stop - start)
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


IMAGE_COPIES_BYTES_PER_PIXEL = 24
"""The two float RGB crops a strip copies to the device when the images are held on the host."""


def device_rows(
    height: int, width: int, bytes_per_pixel: int, halo_rows: int, free_bytes: Optional[int], held_on_host: bool
) -> Optional[int]:
    """Where a metric of an image runs: None, whole, on the device the images are on; 0, on the host; else
    in strips of that many rows on the device. Images held on the host (renders over training's pixel
    budget) go to the device only in crops, and only within a known limit."""
    if not held_on_host:
        return rows_per_strip(height, width, bytes_per_pixel, halo_rows, free_bytes)
    if free_bytes is None:  # no training peak known, or no CUDA: scored where they are
        return 0
    rows = rows_per_strip(height, width, bytes_per_pixel + IMAGE_COPIES_BYTES_PER_PIXEL, halo_rows, free_bytes)
    return height if rows is None else rows  # the whole image as one strip


def metric_place(rows: Optional[int]) -> str:
    """Where a metric of one image ran, from :func:`device_rows`' answer: ``"whole"`` (the whole image at
    once), ``"strips"`` (row strips or crops on the device) or ``"host"``."""
    return "whole" if rows is None else ("host" if rows == 0 else "strips")


def _ssim(model, gt: Tensor, pred: Tensor, rows: Optional[int], device: torch.device) -> float:
    import pytorch_msssim

    if rows is None:
        return float(model.ssim(gt, pred))
    if rows == 0:
        return float(pytorch_msssim.ssim(gt.cpu(), pred.cpu(), data_range=1.0, size_average=True))
    return ssim_in_row_strips(model.ssim, gt, pred, rows, device)


@contextlib.contextmanager
def _cudnn_heuristics() -> Iterator[None]:
    """cuDNN's heuristics, not its benchmark: nerfstudio's ns-train sets cudnn.benchmark, whose algorithm
    search for AlexNet at full resolution can take gigabytes of workspace. Every other cuDNN setting (TF32,
    deterministic) stays the user's (``cudnn.flags`` would reset them to its defaults)."""
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = saved


def _lpips(model, gt: Tensor, pred: Tensor, device: torch.device, limit: Optional[int]) -> Tuple[float, str]:
    """LPIPS of [1, 3, H, W] images, and where it ran (:func:`metric_place`): whole, in row strips, or on
    the host (see the module's docstring)."""
    H, W = gt.shape[-2:]
    geometry = upstream.lpips_strip_geometry(model.lpips)
    halo = upstream.lpips_strip_halo(geometry) if geometry is not None else H
    held_on_host = gt.device.type != device.type
    rows = device_rows(H, W, LPIPS_BYTES_PER_PIXEL, halo, _free_bytes(device, limit), held_on_host)
    if rows is not None and geometry is None:
        rows = 0  # an LPIPS of another structure is never split
    with _cudnn_heuristics():
        if rows is None:
            value = float(model.lpips(gt, pred))
        elif rows == 0:
            host = torch.device("cpu")
            value = float(_lpips_on(model, host)(gt.to(host), pred.to(host)))
        else:
            value = upstream.lpips_in_row_strips(model.lpips, gt, pred, rows, device)
    return value, metric_place(rows)


def image_metrics(
    model, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]
) -> Tuple[Dict[str, Optional[float]], Dict[str, Tensor]]:
    """Metrics of ``outputs["rgb"]`` [H, W, 3] against ``batch["image"]`` and the side-by-side image. Where each
    of SSIM and LPIPS ran (:func:`metric_place`) is left in ``model.metric_places`` (``{"ssim": "strips", ...}``),
    for the evaluation's report."""
    from nerfstudio.model_components.lib_bilagrid import color_correct

    upstream.import_torchmetrics()
    from torchmetrics.functional.image import peak_signal_noise_ratio

    predicted_rgb = outputs["rgb"]
    H, W = predicted_rgb.shape[:2]
    device = torch.device(model.device)
    limit = getattr(model, "eval_memory_limit_bytes", None)  # the training peak, set by the evaluation
    budget = model.eval_pixel_budget()
    held_on_host = (budget > 0 and H * W > budget) and device.type != "cpu"  # rendered in strips to the host
    reach = _window_rows(model.ssim) - 1
    ssim_rows = device_rows(H, W, SSIM_BYTES_PER_PIXEL, reach, _free_bytes(device, limit), held_on_host)
    if held_on_host or ssim_rows == 0:  # not even a strip of SSIM fits beside them: PSNR and SSIM on the host
        image = batch["image"].cpu()
        image = image.float() / 255.0 if image.dtype == torch.uint8 else image.float()
        gt_rgb = model.composite_with_background(image, outputs["background"].cpu())
        predicted_rgb = predicted_rgb.cpu()
    else:
        gt_rgb = model.composite_with_background(model.get_gt_img(batch["image"]), outputs["background"])

    places: Dict[str, str] = {}

    def score(pred_hwc: Tensor, prefix: str) -> Dict[str, Optional[float]]:
        gt = torch.moveaxis(gt_rgb, -1, 0)[None, ...]
        pred = torch.moveaxis(pred_hwc, -1, 0)[None, ...]
        psnr = peak_signal_noise_ratio(pred, gt, data_range=1.0)  # splatfacto's PeakSignalNoiseRatio(data_range=1.0)
        ssim = _ssim(model, gt, pred, ssim_rows, device)
        places[f"{prefix}ssim"] = metric_place(ssim_rows)
        lpips = None
        if model.lpips is None and collectives.get_rank() == 0:
            upstream.warn_lpips_unavailable()  # said once, where LPIPS would have been computed
        if model.lpips is not None:
            lpips, places[f"{prefix}lpips"] = _lpips(model, gt, pred, device, limit)
        return {f"{prefix}psnr": float(psnr.item()), f"{prefix}ssim": ssim, f"{prefix}lpips": lpips}

    metrics = score(predicted_rgb, "")
    if model.config.color_corrected_metrics:
        metrics.update(score(color_correct(predicted_rgb, gt_rgb), "cc_"))
    model.metric_places = places
    return metrics, {"img": torch.cat([gt_rgb, predicted_rgb], dim=1)}
