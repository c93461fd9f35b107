"""SplatPlusDataManager: nerfstudio's FullImageDatamanager (cached full images), one camera per
step or B cameras batched (:meth:`SplatPlusDataManager.next_train`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, List, Tuple, Type

import torch

from nerfstudio.cameras.cameras import Cameras
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager, FullImageDatamanagerConfig

from ns_splat_plus.model.render import HOST_IMAGE_SIZE
from ns_splat_plus.parallel import camera_for_step, cameras_for_step, collectives


@dataclass
class SplatPlusDataManagerConfig(FullImageDatamanagerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusDataManager)
    cameras_per_step: int = 1
    """B cameras rendered per training step on each GPU, in one rasterizer call; the loss is the mean
    of their losses. The schedule is then scaled as for B GPUs (steps / B, learning rates x sqrt(B),
    Adam betas ^ B; with W GPUs: W x B). On W ranks, rank r at step s takes the draws (s*W + r)*B ...
    + B-1 of the shared per-epoch permutation (disjoint shards). Cameras of different sizes: only the
    step's cameras of the same size as its first drawn camera are rendered, the others are skipped for
    that epoch (a step may then render fewer than B). Not with the camera optimizer or bilateral grid;
    the fps sampling strategy is replaced by the seeded permutation."""


class SplatPlusDataManager(FullImageDatamanager):
    config: SplatPlusDataManagerConfig

    def next_train(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's camera for ``step``: disjoint shards of one permutation per epoch.

        Upstream pops from a shuffled list that is the same on every rank (each rank would render
        the same camera). Here the camera is a stateless function of (step, rank, world size,
        ``train_cameras_sampling_seed``), see ``parallel.camera_for_step``; also on one GPU, so a
        resumed run continues the same order. ``fps`` sampling keeps upstream's sampler on one rank.
        """
        if self.config.cameras_per_step > 1:
            return self.next_train_batch(step)
        world_size = collectives.get_world_size()
        if self.config.train_cameras_sampling_strategy != "random" and world_size == 1:
            camera, data = super().next_train(step)
            camera.metadata[HOST_IMAGE_SIZE] = self._train_image_sizes[camera.metadata["cam_idx"]]
            return camera, data
        image_idx = camera_for_step(
            step, collectives.get_rank(), world_size, len(self.train_dataset), self.config.train_cameras_sampling_seed
        )
        data = self.cached_train[image_idx].copy()  # cached_train also sets self.train_cameras
        data["image"] = data["image"].to(self.device)
        camera = self.train_cameras[image_idx : image_idx + 1].to(self.device)
        if camera.metadata is None:
            camera.metadata = {}
        camera.metadata["cam_idx"] = image_idx
        camera.metadata[HOST_IMAGE_SIZE] = self._train_image_sizes[image_idx]
        return camera, data

    def next_train_batch(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's ``cameras_per_step`` (B) cameras for ``step`` (see the option's doc): Cameras of
        shape [B'] and a batch whose tensors are stacked (``image`` [B', H, W, C], uint8 when cached so);
        B' <= B are the step's cameras of its first camera's size. ``cam_idx``: the B' dataset indices."""
        indices = cameras_for_step(
            step, collectives.get_rank(), collectives.get_world_size(), len(self.train_dataset),
            self.config.train_cameras_sampling_seed, self.config.cameras_per_step,
        )  # fmt: skip
        sizes = self._train_image_sizes
        indices = [i for i in indices if sizes[i] == sizes[indices[0]]]  # one render size per step
        cached = self.cached_train
        batch: Dict = {}
        for key, value in cached[indices[0]].items():
            values = [cached[i][key] for i in indices]
            batch[key] = self._stacked(key, values) if isinstance(value, torch.Tensor) else values
        camera = self.train_cameras[torch.tensor(indices)].to(self.device)
        if camera.metadata is None:
            camera.metadata = {}
        camera.metadata["cam_idx"] = indices
        camera.metadata[HOST_IMAGE_SIZE] = sizes[indices[0]]
        return camera, batch

    def _stacked(self, key: str, values: List[torch.Tensor]) -> torch.Tensor:
        """``values`` stacked [B', ...] on the device. Images cached on the device are stacked into
        a buffer reused across steps (no per-step allocation; the step that reads it ends before the
        next one writes it, on one stream); host images go over non-blocking, still as uint8."""
        if values[0].device != torch.device(self.device):
            return torch.stack(values).to(self.device, non_blocking=True)
        shape = (len(values), *values[0].shape)
        buffers = self.__dict__.setdefault("_batch_buffers", {})
        buffer = buffers.get(key)
        if buffer is None or buffer.shape != shape or buffer.dtype != values[0].dtype:
            buffer = buffers[key] = torch.empty(shape, dtype=values[0].dtype, device=values[0].device)
        return torch.stack(values, out=buffer)

    def get_train_rays_per_batch(self) -> int:
        return super().get_train_rays_per_batch() * max(1, self.config.cameras_per_step)

    @cached_property
    def _train_image_sizes(self) -> List[Tuple[int, int]]:
        """(height, width) per training camera, read once from the dataset's host cameras (after
        ``cached_train``, whose undistortion may change them; ``train_cameras`` is on the GPU)."""
        self.cached_train  # noqa: B018 (loads and undistorts the images first)
        cameras = self.train_dataset.cameras
        return list(zip(cameras.height.reshape(-1).tolist(), cameras.width.reshape(-1).tolist()))

    @cached_property
    def cached_eval(self) -> List[Dict[str, torch.Tensor]]:
        """Eval images stay in host memory whatever ``cache_images`` says; evaluation moves one at a
        time to the device (upstream keeps them all on the GPU with cache_images="gpu")."""
        from ns_splat_plus.evaluation import load_eval_images_on_host

        return load_eval_images_on_host(self)
