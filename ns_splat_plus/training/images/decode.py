"""One training image: nerfstudio's per-image processing (decode, then undistort), and the cameras after it.

Entry points: :func:`decode_image` (decode, then ``_undistort_image`` as nerfstudio's
``_load_images`` does, without touching the dataset's cameras), :func:`image_decoder` (the
``decode(idx)`` the stores call), :func:`naming_the_photo` (streaming: a photo that cannot be read
during training becomes one :class:`PhotoReadError` naming it), :func:`undistorted_intrinsics` and
:func:`undistort_cameras_without_decoding` (the cameras after undistortion, from the camera alone,
so that streaming knows them before decoding any image).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from ns_splat_plus import upstream
from ns_splat_plus.errors import UserInputError


class PhotoReadError(UserInputError):
    """A training photo that could not be read while streaming (``--pipeline.datamanager.image-memory
    stream``): deleted, moved, truncated or replaced after start-up. The training loop ends the run with
    a checkpoint of the last finished step and this one message (:func:`ns_splat_plus.training.loop.train_loop`)."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        self.path = Path(path)
        self.cause = f"{type(cause).__name__}: {cause}".strip()
        super().__init__(f"photo {self.path} cannot be read ({self.cause})")


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


def naming_the_photo(
    decode: Callable[[int], Dict[str, torch.Tensor]], dataset
) -> Callable[[int], Dict[str, torch.Tensor]]:
    """``decode`` whose failures (FileNotFoundError for a deleted photo, ``OSError: image file is
    truncated``, a photo replaced by one of another size...) are one :class:`PhotoReadError` naming the
    photo: streaming decodes in worker threads during training, where the error would otherwise reach
    the user as a traceback without the file name."""

    def decode_named(idx: int) -> Dict[str, torch.Tensor]:
        try:
            return decode(idx)
        except Exception as exc:  # noqa: BLE001 (PIL raises OSError, SyntaxError, zlib.error, ValueError...)
            raise PhotoReadError(dataset.image_filenames[idx], exc) from None

    return decode_named


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


def undistort_cameras_without_decoding(cameras, originals, indices: Optional[Sequence[int]] = None) -> None:
    """Write the undistorted intrinsics of every distorted camera (of ``indices``, default all) into
    ``cameras`` (streaming mode, and the cameras of other ranks' shards), computing them once per
    distinct camera model (a COLMAP scene usually has one)."""
    seen: Dict[tuple, Tuple[np.ndarray, int, int]] = {}
    for idx in range(len(originals)) if indices is None else indices:
        camera = originals[idx].reshape(())
        if not is_distorted(camera):
            continue
        key = (
            int(camera.camera_type.item()),
            float(camera.fx.item()),
            float(camera.fy.item()),
            float(camera.cx.item()),
            float(camera.cy.item()),
            int(camera.width.item()),
            int(camera.height.item()),
            tuple(camera.distortion_params.reshape(-1).tolist()),
            repr(sorted((camera.metadata or {}).items())),
        )
        if key not in seen:
            seen[key] = undistorted_intrinsics(camera)
        K, h, w = seen[key]
        set_intrinsics(cameras, idx, K, h, w)
