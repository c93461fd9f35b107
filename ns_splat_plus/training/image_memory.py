"""Where training images live: the memory plan and the one per-image decode path.

nerfstudio's ``FullImageDatamanager.cached_train`` decodes every training image at start-up into one
cache (on the GPU by default, float32 unless ``cache_images_type="uint8"``): a thousand 4K images
need 23 GiB as uint8 and run out of device (or host) memory. splat-plus keeps training images
either in host memory (``host``: uint8, pinned when CUDA is available and they fit the pinned
budget) or decodes them from disk on demand (``stream``: a small thread pool, a bounded number of
decoded images); :mod:`.image_store` holds them and moves one per step to the device.

Entry points: :func:`choose_image_memory` (a pure function of the image sizes, the available host
memory and ``--pipeline.datamanager.image-memory``; its :meth:`ImageMemoryPlan.describe` is the one
start-up console line), :func:`available_host_bytes`, :func:`decode_image` (nerfstudio's
per-image processing: decode, then ``_undistort_image`` as ``_load_images`` does, without touching
the dataset's cameras) and :func:`undistorted_intrinsics` (the cameras after undistortion, from the
camera alone, so that streaming knows them before decoding any image).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Literal, Optional, Sequence, Tuple

import numpy as np
import torch

from ns_splat_plus import upstream

ImageMemory = Literal["auto", "host", "stream"]
GIB = float(1 << 30)

HOST_FRACTION = 0.8
"""``auto`` keeps the images in host memory when they take at most this fraction of the available memory."""
PINNED_FRACTION = 0.5
"""Pinned (page-locked) memory cannot be swapped out: pin only when the images take at most this fraction."""


@dataclass(frozen=True)
class ImageMemoryPlan:
    mode: Literal["host", "stream"]
    pinned: bool
    num_images: int
    total_bytes: int
    available_bytes: int
    image_size: Tuple[int, int]  # (height, width) of the largest image
    dtype: str
    workers: int
    buffered: int
    chosen_by: Literal["auto", "option"]

    def describe(self) -> str:
        """The one console line, e.g. ``Train images: 1000 x 3840x2160 uint8 = 23.2 GiB in host memory (pinned)``."""
        h, w = self.image_size
        head = f"Train images: {self.num_images} x {w}x{h} {self.dtype}"
        need = format_bytes(self.total_bytes)
        avail = f"{format_bytes(self.available_bytes)} available"
        why = "" if self.chosen_by == "auto" else ", --pipeline.datamanager.image-memory"
        if self.mode == "host":
            where = "pinned" if self.pinned else "pageable"
            return f"{head} = {need} in host memory ({where}; {avail}{why})"
        return (
            f"{head}: streaming from disk, {self.workers} workers, {self.buffered} images buffered "
            f"(images need {need}, {avail}{why})"
        )


def format_bytes(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def image_bytes(image_sizes: Sequence[Tuple[int, int]], dtype: str = "uint8", channels: int = 3) -> int:
    """Bytes of the decoded images, from their (height, width) alone (no decoding)."""
    per_value = 1 if dtype == "uint8" else 4
    return int(sum(int(h) * int(w) for h, w in image_sizes)) * channels * per_value


def choose_image_memory(
    image_sizes: Sequence[Tuple[int, int]],
    available_bytes: int,
    option: ImageMemory = "auto",
    *,
    cuda: bool = False,
    dtype: str = "uint8",
    workers: int = 4,
    buffered: int = 16,
) -> ImageMemoryPlan:
    """Host memory when the images fit (``HOST_FRACTION`` of ``available_bytes``), else streaming;
    ``option`` other than ``auto`` forces the mode. Pinned only with CUDA and within ``PINNED_FRACTION``."""
    if option not in ("auto", "host", "stream"):
        raise ValueError(f"image memory must be auto, host or stream, got {option!r}")
    total = image_bytes(image_sizes, dtype)
    if option == "auto":
        mode = "host" if total <= HOST_FRACTION * available_bytes else "stream"
    else:
        mode = option
    pinned = bool(cuda and mode == "host" and total <= PINNED_FRACTION * available_bytes)
    largest = max(image_sizes, key=lambda s: int(s[0]) * int(s[1])) if len(image_sizes) else (0, 0)
    return ImageMemoryPlan(
        mode=mode, pinned=pinned, num_images=len(image_sizes), total_bytes=total, available_bytes=int(available_bytes),
        image_size=(int(largest[0]), int(largest[1])), dtype=dtype, workers=max(1, workers),
        buffered=max(2, buffered), chosen_by="auto" if option == "auto" else "option",
    )


def available_host_bytes() -> int:
    """Host memory available to this process now (psutil, else /proc/meminfo's MemAvailable)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # psutil comes with nerfstudio; /proc/meminfo is the fallback on Linux
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 0


def default_workers(configured: Optional[int]) -> int:
    return configured if configured else max(1, min(8, os.cpu_count() or 1))


# --- one image: nerfstudio's per-image processing ---------------------------------------------------


def is_distorted(camera) -> bool:
    return camera.distortion_params is not None and not bool(torch.all(camera.distortion_params == 0))


def decode_image(dataset, camera, idx: int, image_type: str) -> Tuple[Dict[str, torch.Tensor], Optional[np.ndarray]]:
    """Image ``idx`` of ``dataset`` decoded and undistorted exactly as nerfstudio 1.1.5's
    ``_load_images`` does (its inner ``undistort_idx``), but with ``camera`` the *original*
    (distorted) camera ``idx`` and without writing the dataset's cameras. Returns the data dict and
    the new intrinsics (None when the camera has no distortion)."""
    data = dataset.get_data(idx, image_type=image_type)
    h, w = int(camera.height.item()), int(camera.width.item())
    if data["image"].shape[0] != h or data["image"].shape[1] != w:
        raise ValueError(
            f"image {idx} is {data['image'].shape[1]}x{data['image'].shape[0]} but its camera says {w}x{h}"
        )
    if not is_distorted(camera):
        return data, None
    K = camera.get_intrinsics_matrices().numpy()
    K, image, mask = upstream.undistort_image(camera, camera.distortion_params.numpy(), data, data["image"].numpy(), K)
    data["image"] = torch.from_numpy(image)
    if mask is not None:
        data["mask"] = mask
    return data, K


def image_decoder(dataset, originals, image_type: str):
    """``decode(idx, record_intrinsics=False)``: image ``idx`` of ``dataset`` by :func:`decode_image`
    from ``originals`` (a copy of the dataset's cameras as the dataparser gave them: undistortion
    needs the distorted ones); ``record_intrinsics`` writes the undistorted intrinsics of the image
    actually decoded into ``dataset.cameras``, as ``_load_images`` does."""

    def decode(idx: int, record_intrinsics: bool = False) -> Dict[str, torch.Tensor]:
        data, K = decode_image(dataset, originals[idx].reshape(()), idx, image_type)
        if record_intrinsics and K is not None:
            set_intrinsics(dataset.cameras, idx, K, data["image"].shape[0], data["image"].shape[1])
        return data

    return decode


def undistorted_intrinsics(camera) -> Tuple[np.ndarray, int, int]:
    """(K, height, width) after undistortion, from the camera alone: nerfstudio's ``_undistort_image``
    on a black image (the new intrinsics and crop depend only on the camera, not on the pixels)."""
    h, w = int(camera.height.item()), int(camera.width.item())
    blank = np.zeros((h, w, 3), dtype=np.uint8)
    K = camera.get_intrinsics_matrices().numpy()
    K, image, _ = upstream.undistort_image(camera, camera.distortion_params.numpy(), {"image": blank}, blank, K)
    return K, int(image.shape[0]), int(image.shape[1])


def set_intrinsics(cameras, idx: int, K: np.ndarray, height: int, width: int) -> None:
    """What ``_load_images`` writes into the dataset's cameras after undistorting image ``idx``."""
    cameras.fx[idx] = float(K[0, 0])
    cameras.fy[idx] = float(K[1, 1])
    cameras.cx[idx] = float(K[0, 2])
    cameras.cy[idx] = float(K[1, 2])
    cameras.width[idx] = width
    cameras.height[idx] = height


def undistort_cameras_without_decoding(cameras, originals) -> None:
    """Write the undistorted intrinsics of every distorted camera into ``cameras`` (streaming mode),
    computing them once per distinct camera model (a COLMAP scene usually has one)."""
    seen: Dict[tuple, Tuple[np.ndarray, int, int]] = {}
    for idx in range(len(originals)):
        camera = originals[idx].reshape(())
        if not is_distorted(camera):
            continue
        key = (
            int(camera.camera_type.item()), float(camera.fx.item()), float(camera.fy.item()), float(camera.cx.item()),
            float(camera.cy.item()), int(camera.width.item()), int(camera.height.item()),
            tuple(camera.distortion_params.reshape(-1).tolist()),
            repr(sorted((camera.metadata or {}).items())),
        )
        if key not in seen:
            seen[key] = undistorted_intrinsics(camera)
        K, h, w = seen[key]
        set_intrinsics(cameras, idx, K, h, w)
