"""A device out-of-memory error in a training step, as one message: :func:`out_of_memory_error`.

A bare CUDA OOM traceback says neither why memory ran out nor what to change. Memory in a training
step grows with the number of Gaussians (parameters, Adam state, gsplat's per-Gaussian buffers)
and with the pixels rendered (tile intersections, per-pixel buffers, the image itself);
the message names both and the settings that shrink them. Called by
:func:`ns_splat_plus.training.step.run_training_step` after the exception's frames are gone,
so that freeing here actually returns the step's tensors.
"""

from __future__ import annotations

import gc
from typing import Optional, Tuple

import torch

from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.upstream import TrainerLike


class DeviceOutOfMemoryError(SplatPlusError):
    """The device ran out of memory in a training step (exit status 1, one message)."""


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _step_image(trainer: TrainerLike) -> Tuple[Optional[Tuple[int, int]], int]:
    """((height, width) of this step's image, cameras per step) as the datamanager last fetched them."""
    datamanager = trainer.pipeline.datamanager
    size = getattr(datamanager, "_step_image_size", None)
    return size, int(getattr(datamanager, "_step_image_count", 1) or 1)


def free_after_oom(trainer: TrainerLike) -> None:
    """Drop what a failed step leaves behind (gradients, the rasterizer's info, the prefetched image)
    and return the cached blocks, so that the message (and a caller that catches it) has memory."""
    model = trainer.pipeline.model
    for param in model.parameters():
        param.grad = None
    if isinstance(getattr(model, "info", None), dict):
        model.info = {}
    prefetcher = getattr(trainer.pipeline.datamanager, "_prefetcher", None)
    if prefetcher is not None:
        prefetcher.clear()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def out_of_memory_error(
    trainer: TrainerLike, step: int, failure: str, where: Optional[str] = None
) -> DeviceOutOfMemoryError:
    """Free what can be freed and build the message (the caller raises it). ``where``: when it happened
    (default: "at step ``step``")."""
    free_after_oom(trainer)
    model = trainer.pipeline.model
    config = model.config
    num_gaussians = int(model.num_points)
    size, cameras = _step_image(trainer)
    if size is not None:
        image = f"a {size[1]}x{size[0]} image"
        downscale = getattr(model, "_get_downscale_factor", lambda: 1)()
        if downscale > 1:
            image += f" (rendered at 1/{downscale})"
    else:
        image = "an image of unknown size"
    per_step = f", {cameras} cameras per step" if cameras > 1 else ""
    device = torch.device(trainer.device)
    memory = ""
    if device.type == "cuda" and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(device).total_memory
        memory = f"; peak allocated {_gib(torch.cuda.max_memory_allocated(device))} of {_gib(total)}"
    strategy = getattr(config, "strategy", "default")
    fewer = []
    if strategy == "mcmc":
        fewer.append(
            f"a lower Gaussian cap: --pipeline.model.max-gs-num {max(1, config.max_gs_num // 2)} (now {config.max_gs_num})"
        )
    else:
        fewer.append(
            f"--pipeline.model.densify-grad-thresh {config.densify_grad_thresh * 2:g} (now {config.densify_grad_thresh:g}; "
            "higher: fewer Gaussians are split and duplicated)"
        )
        fewer.append("--pipeline.model.max-gs-num caps the count with --pipeline.model.strategy mcmc")
    fewer.append(
        f"--pipeline.model.cull-alpha-thresh {min(0.5, config.cull_alpha_thresh * 2):g} (now {config.cull_alpha_thresh:g}; "
        "higher: more transparent Gaussians are removed)"
    )
    what_to_do = (
        "use fewer Gaussians: "
        + "; ".join(fewer)
        + ". Use fewer pixels per step: fewer cameras per step, or smaller images (--pipeline.datamanager.camera-res-scale-factor 0.5,"
        " or the dataparser's --downscale-factor 2). Keep the train images off the device and out of host RAM: "
        "--pipeline.datamanager.image-memory stream. Memory fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    )
    return DeviceOutOfMemoryError(
        f"out of device memory {where or f'at step {step}'} with {num_gaussians:,} Gaussians, rendering {image}{per_step} on "
        f"{device}{memory} ({failure})",
        what_to_do,
    )
