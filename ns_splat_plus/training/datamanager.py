"""SplatPlusDataManager: nerfstudio's FullImageDatamanager (cached full images)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Type

import torch

from nerfstudio.cameras.cameras import Cameras
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager, FullImageDatamanagerConfig

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.model.render import HOST_IMAGE_SIZE
from ns_splat_plus.parallel import camera_for_step, collectives


def first_undecodable_photo(dataset) -> Optional[Tuple[Path, Exception]]:
    """The first photo of ``dataset`` that PIL cannot fully decode, with its error (None: all decode)."""
    from PIL import Image

    for path in dataset.image_filenames:
        try:
            with Image.open(path) as im:
                im.load()
        except Exception as exc:  # noqa: BLE001 (OSError "image file is truncated", SyntaxError, zlib errors...)
            return Path(path), exc
    return None


@contextlib.contextmanager
def photo_errors(dataset) -> Iterator[None]:
    """A photo that fails to decode while caching (truncated data behind a valid header, which the
    preflight's header check cannot see) becomes one UserInputError naming the photo: the error
    surfaces in a worker thread without the file name, so the photos are re-checked to find it."""
    try:
        yield
    except UserInputError:
        raise
    except Exception:
        bad = first_undecodable_photo(dataset)
        if bad is None:
            raise  # not a photo problem
        path, exc = bad
        raise UserInputError(
            f"photo {path} cannot be decoded ({type(exc).__name__}: {exc}): the file is damaged or truncated",
            "restore the photo, or remove it from the dataset",
        ) from None


@dataclass
class SplatPlusDataManagerConfig(FullImageDatamanagerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusDataManager)


class SplatPlusDataManager(FullImageDatamanager):
    config: SplatPlusDataManagerConfig

    def next_train(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's camera for ``step``: disjoint shards of one permutation per epoch.

        Upstream pops from a shuffled list that is the same on every rank (each rank would render
        the same camera). Here the camera is a stateless function of (step, rank, world size,
        ``train_cameras_sampling_seed``), see ``parallel.camera_for_step``; also on one GPU, so a
        resumed run continues the same order. ``fps`` sampling keeps upstream's sampler on one rank.
        """
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

    @cached_property
    def cached_train(self) -> List[Dict[str, torch.Tensor]]:
        with photo_errors(self.train_dataset):
            return FullImageDatamanager.cached_train.func(self)

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

        with photo_errors(self.eval_dataset):
            return load_eval_images_on_host(self)
