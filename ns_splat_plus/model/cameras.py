"""The model's cameras: intrinsics without host-device round trips, and what it keeps per camera.

Entry points: :func:`render_intrinsics` (``K`` [C, 3, 3] and the render size of a camera at a
scale), :func:`view_matrices` and :func:`camera_intrinsics` (a camera's view matrices and intrinsics,
kept in a training camera's render cache; a step's B cameras, :func:`concatenated_cameras`, assembled
from theirs), and the camera metadata keys the datamanager fills: :data:`HOST_IMAGE_SIZE` (so that
the size is never read back from the device) and :data:`RENDER_CACHE`.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from nerfstudio.cameras.cameras import Cameras

HOST_IMAGE_SIZE = "host_image_size"
"""Camera metadata key: (height, width) of the training camera as host ints, so that the model
never reads the size back from the device (``.item()`` synchronises with the GPU)."""

RENDER_CACHE = "render_cache"
"""Camera metadata key: a dict in which the model keeps what it derives from a camera that does not
change (its view matrix, its ``K`` per scale). The datamanager gives each training camera one, on
the Cameras it makes once per camera and hands out at every step (:func:`cached_for_camera`)."""


def cached_for_camera(camera: Cameras, key, make):
    """``make()``, kept in ``camera``'s :data:`RENDER_CACHE` under ``key`` when it has one: each is
    a dozen small kernels and their host work, the same numbers at every step of that camera."""
    cache = (camera.metadata or {}).get(RENDER_CACHE)
    if cache is None:
        return make()
    if key not in cache:
        cache[key] = make()
    return cache[key]


BATCH_MEMBERS = "batch_members"
"""Camera metadata key: the [1] training Cameras (each with its :data:`RENDER_CACHE`) that a batch of
cameras was concatenated from (:func:`concatenated_cameras`); the batch's view matrices and ``K`` are
their cached ones concatenated."""


def concatenated_cameras(members: List[Cameras]) -> Cameras:
    """One [B] Cameras of the B [1] Cameras ``members``, their fields concatenated on their device.

    Slicing the device-resident training cameras with a host index tensor (``train_cameras[idx]``)
    copies the index to the device and synchronises the host with the GPU, once per field (about
    eight per step); concatenating the cameras the datamanager keeps launches kernels and waits for
    nothing. The metadata names the members (:data:`BATCH_MEMBERS`): :func:`view_matrices` and
    :func:`camera_intrinsics` assemble the batch's from their render caches.
    """

    def cat(name: str) -> Optional[torch.Tensor]:
        values = [getattr(camera, name) for camera in members]
        return None if values[0] is None else torch.cat(values)

    def cat_set(name: str) -> torch.Tensor:  # a field every Cameras has (poses, intrinsics, camera type)
        return torch.cat([getattr(camera, name) for camera in members])

    first = members[0]
    return Cameras(
        camera_to_worlds=cat_set("camera_to_worlds"), fx=cat_set("fx"), fy=cat_set("fy"), cx=cat_set("cx"),
        cy=cat_set("cy"),
        width=cat("width"), height=cat("height"), distortion_params=cat("distortion_params"),
        camera_type=cat_set("camera_type"), times=cat("times"),
        metadata={BATCH_MEMBERS: list(members), HOST_IMAGE_SIZE: (first.metadata or {}).get(HOST_IMAGE_SIZE)},
    )  # fmt: skip


def world_to_camera(camera_to_worlds: torch.Tensor) -> torch.Tensor:
    """splatfacto's ``get_viewmat``, run eagerly: gsplat's world-to-camera matrices of nerfstudio's poses
    (OpenGL axes: y and z flipped), the rotation transposed and the translation ``-R^T t``.

    nerfstudio wraps ``get_viewmat`` in ``torch.compile``: Inductor compiles its dozen small ops at a
    process's first render (and again for a new batch size), seconds of every ``ns-train`` / ``ns-eval``
    start, for matrices the model computes once per camera.

    Args:
        camera_to_worlds: [C, 3, 4] (or [C, 4, 4]) nerfstudio camera-to-world poses.

    Returns:
        [C, 4, 4] world-to-camera matrices.
    """
    R = camera_to_worlds[:, :3, :3] * camera_to_worlds.new_tensor([1.0, -1.0, -1.0])
    T = camera_to_worlds[:, :3, 3:4]
    R_inv = R.transpose(1, 2)
    viewmat = torch.zeros(R.shape[0], 4, 4, device=R.device, dtype=R.dtype)
    viewmat[:, :3, :3] = R_inv
    viewmat[:, :3, 3:4] = -torch.bmm(R_inv, T)
    viewmat[:, 3, 3] = 1.0
    return viewmat


def view_matrices(camera: Cameras) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(viewmat [C, 4, 4], camtoworlds [C, 4, 4])`` of ``camera``'s own poses: :func:`world_to_camera`
    and its inverse (the camera centres of the spherical harmonics), kept in the
    camera's render cache; for a batch (:data:`BATCH_MEMBERS`), its members' concatenated.
    ``torch.inverse`` on CUDA checks its result on the host (a synchronisation): once per camera."""
    members = (camera.metadata or {}).get(BATCH_MEMBERS)
    if members is not None:
        pairs = [view_matrices(member) for member in members]
        return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    viewmat = cached_for_camera(camera, "viewmat", lambda: world_to_camera(camera.camera_to_worlds))
    camtoworlds = cached_for_camera(camera, "camtoworlds", lambda: torch.inverse(viewmat))
    return viewmat, camtoworlds


def camera_intrinsics(camera: Cameras, scale: float) -> Tuple[torch.Tensor, int, int]:
    """:func:`render_intrinsics`, kept in the camera's render cache per scale; for a batch
    (:data:`BATCH_MEMBERS`, cameras of one size) its members' ``K`` concatenated and their size."""
    members = (camera.metadata or {}).get(BATCH_MEMBERS)
    if members is not None:
        parts = [camera_intrinsics(member, scale) for member in members]
        return torch.cat([K for K, _, _ in parts]), parts[0][1], parts[0][2]
    return cached_for_camera(camera, ("intrinsics", scale), lambda: render_intrinsics(camera, scale))


def render_intrinsics(camera: Cameras, scale: float) -> Tuple[torch.Tensor, int, int]:
    """``(K [C, 3, 3], width, height)`` of ``camera`` rendered at ``scale`` times its resolution.

    The same numbers as splatfacto's ``rescale_output_resolution`` / ``get_intrinsics_matrices`` /
    ``width.item()``, without their host-device round trips (each of those synchronises with the
    GPU, several times per training step): K is assembled on the camera's device, and the size
    comes from the host copy the datamanager puts in the camera's metadata when there is one.
    """
    fx, fy, cx, cy = (getattr(camera, name).reshape(-1) * scale for name in ("fx", "fy", "cx", "cy"))
    zero, one = torch.zeros_like(fx), torch.ones_like(fx)
    # float32 as splatfacto's (get_intrinsics_matrices fills a float32 K): nerfstudio's blender parser gives
    # float64 focal lengths, which gsplat's kernels and the Gaussians' float32 would refuse
    K = torch.stack((fx, zero, cx, zero, fy, cy, zero, zero, one), dim=-1).view(-1, 3, 3).to(torch.float32)
    size = (camera.metadata or {}).get(HOST_IMAGE_SIZE)
    height, width = size if size is not None else (int(camera.height.reshape(-1)[0]), int(camera.width.reshape(-1)[0]))
    # nerfstudio's floor rounding, in its float32 arithmetic
    scaled = (torch.tensor([height, width]) * torch.tensor([scale])).to(torch.int64).tolist()
    return K, scaled[1], scaled[0]
