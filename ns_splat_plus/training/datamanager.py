"""SplatPlusDataManager: nerfstudio's FullImageDatamanager, with train images in host memory or streamed.

Camera selection is here (:meth:`SplatPlusDataManager.next_train`: one camera per step, or B batched,
from this rank's own shard of the cameras, ``parallel.sharding``); where the images live and how
they reach the device is :mod:`ns_splat_plus.training.images` (``cached_train`` is a store of this
rank's shard only: host memory or streaming, chosen at start-up, and ``_train_batch`` moves one
image per step, prefetched one step ahead). ``image_record`` says what this rank holds (count,
bytes, decoding seconds) and ``startup_times`` when parsing began and ended (``<run>/ranks/``).
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Type, Union

import torch
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager, FullImageDatamanagerConfig

from ns_splat_plus import upstream
from ns_splat_plus.errors import UserInputError, exit_on_user_error
from ns_splat_plus.evaluation.streamed import eval_camera_and_batch
from ns_splat_plus.model.cameras import HOST_IMAGE_SIZE, RENDER_CACHE, concatenated_cameras
from ns_splat_plus.parallel import agreement, collectives
from ns_splat_plus.parallel.schedule import cameras_per_step_of
from ns_splat_plus.parallel.sharding import camera_for_step, cameras_for_step, eval_share
from ns_splat_plus.training import colmap_checks, dataset_checks, inputs, sfm_points
from ns_splat_plus.training.images.photo import PhotoDataset
from ns_splat_plus.training.images.prefetch import DevicePrefetcher


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
        raise dataset_checks.unreadable_photo(*bad) from None


@dataclass
class SplatPlusDataManagerConfig(FullImageDatamanagerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusDataManager)
    image_memory: Literal["auto", "host", "stream"] = "auto"
    """Where train images live. auto: host memory (uint8, pinned on CUDA when they fit) if they take at most
    80 % of the available host memory, else stream; host: decode all at start-up; stream: decode from disk
    during training with --pipeline.datamanager.stream-workers threads. Never on the GPU."""
    stream_workers: int = 4
    """Streaming: decoding threads."""
    stream_buffer: int = 16
    """Streaming: decoded images kept at most (the next steps' images are decoded ahead)."""
    cameras_per_step: Union[int, Literal["auto"]] = 1
    """B cameras rendered per training step on each GPU, in one rasterizer call; the loss is the mean
    of their losses. The schedule is then scaled as for B GPUs (steps / B, learning rates x sqrt(B),
    Adam betas ^ B; with W GPUs: W x B). auto: B = 4 / W at launch (4 on one GPU, 2 on two, 1 from
    four), so W x B stays 4 (splat-plus-fast's; parallel/schedule.py). Each rank draws its B from its
    own fixed shard of the cameras, reshuffled every epoch (disjoint shards; the B of a step are
    distinct). Cameras of different sizes: only the step's cameras of the same size as its first drawn
    camera are rendered, the others are skipped for that epoch (a step may then render fewer than B).
    Not with the camera optimizer or bilateral grid; the fps sampling strategy is replaced by the
    seeded permutation."""
    # splatfacto's image placement: accepted, so that splatfacto's command lines run, and said to be ignored (in
    # --help, and at launch where set: training/images/plan.py)
    cache_images: Literal["cpu", "gpu"] = "gpu"
    """Ignored by splat-plus (splatfacto's option): train images never live on the GPU, see
    --pipeline.datamanager.image-memory; eval images stay in host memory."""
    images_on_gpu: bool = False
    """Ignored by splat-plus (splatfacto's option): each step's train image is copied to the GPU ahead of the
    step from host memory or the disk (--pipeline.datamanager.image-memory)."""


class SplatPlusDataManager(FullImageDatamanager[PhotoDataset]):
    # PhotoDataset: 16-bit grey, palette, 1-bit and CMYK photos read as 8-bit RGB(A) (upstream: low byte, indices)
    config: SplatPlusDataManagerConfig
    _prefetcher: DevicePrefetcher  # set when the images are loaded (training/images/load.py)

    def __init__(self, config: SplatPlusDataManagerConfig, *args, **kwargs) -> None:
        self.startup_times: Dict[str, float] = {"dataset_parse_start": time.time()}  # wall clock, for <run>/ranks/
        self.image_record: Dict[str, Any] = {
            "rank": collectives.get_rank(),
            "world_size": collectives.get_world_size(),
            "train": None,  # set when the images are loaded (training/images/load.py)
            "eval": None,
        }
        # the train split parsed without its SfM points, which are then read as arrays (sfm_points.py); a
        # damaged model file, a photo the dataparser opens or a bare assert of it named, shown and exited here
        # (status 2, "splat-plus: ..."): ns-eval, ns-viewer and ns-export parse the dataset again, without
        # ns-train's preflight or any handler of their own (a SplatPlusError printed bare and exited 1)
        fast_points = sfm_points.fast_points_apply(config.dataparser)
        with (
            exit_on_user_error(collectives.get_rank()),
            colmap_checks.damaged_files_named(config.dataparser),
            inputs.dataparser_errors(),
        ):
            with sfm_points.points_not_loaded(config.dataparser) if fast_points else contextlib.nullcontext():
                super().__init__(config, *args, **kwargs)
            if fast_points:
                points = sfm_points.load_train_points(self.dataparser, self.train_dataparser_outputs)
                self.train_dataparser_outputs.metadata.update(points)
                self.train_dataset.metadata.update(copy.deepcopy(points))  # the dataset holds a copy, as upstream
        self.startup_times["dataset_parse_end"] = time.time()
        if collectives.is_distributed():  # every rank parsed the same dataset: before the model or a photo is read
            agreement.agree_on_dataset(
                {"training": self.train_dataparser_outputs, "eval": upstream.dataparser_outputs(self.eval_dataset)},
                self.config.data,
            )
        if collectives.is_distributed():  # the single eval image of a step comes from this rank's share
            self.eval_unseen_cameras = self.eval_indices()
        if self.train_dataset.cameras.metadata is None:
            # nerfstudio 1.1.5's `ns-export cameras` asserts it (to set "cam_idx" for the camera optimizer) and
            # ended in an AssertionError; next_train gives each step's camera a dict the same way
            self.train_dataset.cameras.metadata = {}

    def create_eval_dataset(self) -> PhotoDataset:
        """nerfstudio's, without the SfM points: the model starts from the train split's, and nothing reads the
        eval split's. nerfstudio's colmap parser would read ``points3D`` again for it, point by point in Python
        (0.06 s of 0.08 s for plush-dog's 11k points, so about 6 s for a million)."""
        with sfm_points.points_not_loaded(getattr(self.dataparser, "config", None)):
            return super().create_eval_dataset()

    @cached_property  # read several times a step: derived once (the option and the world size are fixed)
    def per_step(self) -> int:
        """B, this rank's cameras per step (``cameras-per-step auto`` resolved for the world size)."""
        return cameras_per_step_of(self.config, collectives.get_world_size())

    def eval_indices(self) -> List[int]:
        """The eval images this rank holds and scores (all of them in one process)."""
        return eval_share(collectives.get_rank(), collectives.get_world_size(), len(self.eval_dataset))

    # the type: ignore: upstream returns a list of the same (camera, data) pairs; this Sequence makes them on access
    @property
    def fixed_indices_eval_dataloader(self) -> "HeldEvalViews":  # type: ignore[override]
        """This rank's eval (camera, data) pairs, each moved to the device only when read.

        Upstream's property copies every eval image to the device and indexes every eval image, but
        ``cached_eval`` holds only this rank's share: with several ranks it raised IndexError, and
        nerfstudio's viewer reads every public property of the pipeline at start-up (``parse_object``),
        so rank 0 of every multi-rank run with the viewer on died in set-up."""
        return HeldEvalViews(self)

    def next_train(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's camera for ``step``, from its own shard, reshuffled each epoch.

        Upstream pops from a shuffled list that is the same on every rank (each rank would render
        the same camera). Here the camera is a stateless function of (step, rank, world size,
        ``train_cameras_sampling_seed``), see ``parallel.sharding``; also on one GPU, so a
        resumed run continues the same order. ``fps`` sampling keeps upstream's sampler on one rank.
        """
        if self.per_step > 1:
            return self.next_train_batch(step)
        world_size = collectives.get_world_size()
        if self.config.train_cameras_sampling_strategy != "random" and world_size == 1:
            camera, data = super().next_train(step)
            assert camera.metadata is not None  # upstream's next_train sets cam_idx
            camera.metadata[HOST_IMAGE_SIZE] = self._train_image_sizes[camera.metadata["cam_idx"]]
            return camera, data
        image_idx = camera_for_step(
            step, collectives.get_rank(), world_size, len(self.train_dataset), self.config.train_cameras_sampling_seed
        )
        data = self._train_batch(step, image_idx)  # cached_train also sets self.train_cameras
        return self._single_camera(image_idx), data

    def _single_camera(self, image_idx: int) -> Cameras:
        """``train_cameras[image_idx]`` as a [1] Cameras, made once per camera and handed out at every
        step: slicing a Cameras is ~0.4 ms of host time on CUDA (a kernel per field). Its metadata
        carries ``cam_idx``, the host size and the model's render cache (view matrix, K)."""
        cameras = self.__dict__.setdefault("_single_cameras", {})
        camera = cameras.get(image_idx)
        if camera is None:
            camera = self.train_cameras[image_idx : image_idx + 1]
            if camera.camera_to_worlds.device != torch.device(self.device):  # on the device already: no copy
                camera = camera.to(self.device)
            camera.metadata = dict(camera.metadata or {})
            camera.metadata.update(
                {"cam_idx": image_idx, HOST_IMAGE_SIZE: self._train_image_sizes[image_idx], RENDER_CACHE: {}}
            )
            cameras[image_idx] = camera
        return camera

    # --- where train images live (training/images/) ------------------------------------------------

    @cached_property
    def cached_train(self):
        """The train images: a :class:`HostImageStore` or :class:`StreamingImageStore` (indexable like
        upstream's list), chosen by :func:`choose_image_memory`; sets ``train_cameras`` (device)."""
        from ns_splat_plus.training.images import load

        with photo_errors(self.train_dataset):  # a photo that cannot be decoded: one message naming it
            return load.load_train_images(self)

    @cached_property  # not a property: nerfstudio's viewer reads every property of the datamanager at set-up, which
    # decoded the photos before the dataset checks could name a missing one
    def image_plan(self):
        """Where the train images live (:class:`~ns_splat_plus.training.images.plan.ImageMemoryPlan`); loads them first."""
        self.cached_train  # noqa: B018
        return self._image_plan

    def _train_batch(self, step: int, image_idx: int) -> Dict:
        """This step's data dict, its image on the device; starts the copy of the next step's."""
        self._step_image_size = self._train_image_sizes[image_idx]  # named by an out-of-memory message
        self._step_image_count = 1
        data = self._prefetcher.get(image_idx)
        self._prefetcher.prefetch(self._upcoming_images(step))
        return data

    def _upcoming_images(self, step: int) -> List[int]:
        """The images of the next steps (the next step's B first), as many as the stream buffer can hold."""
        per_step = self.per_step
        ahead = max(1, (self.config.stream_buffer - per_step) // per_step) if self._image_plan.mode == "stream" else 1
        world_size, rank = collectives.get_world_size(), collectives.get_rank()
        n, seed = len(self.train_dataset), self.config.train_cameras_sampling_seed
        return [i for k in range(1, ahead + 1) for i in cameras_for_step(step + k, rank, world_size, n, seed, per_step)]

    def get_train_rays_per_batch(self) -> int:
        # upstream reads cached_train[0], a decode per call when streaming
        h, w = self._train_image_sizes[0]
        return int(h * w) * self.per_step

    def next_train_batch(self, step: int) -> Tuple[Cameras, Dict]:
        """This rank's ``cameras_per_step`` (B) cameras for ``step`` (see the option's doc): Cameras of
        shape [B'] and a batch whose tensors are stacked (``image`` [B', H, W, C], uint8 when cached so);
        B' <= B are the step's cameras of its first camera's size (B' = 1: that camera alone, as
        :meth:`next_train` hands it). ``cam_idx``: the B' dataset indices; the Cameras is the step's kept
        one-camera Cameras concatenated (their render caches serve the batch)."""
        indices = cameras_for_step(
            step, collectives.get_rank(), collectives.get_world_size(), len(self.train_dataset),
            self.config.train_cameras_sampling_seed, self.per_step,
        )  # fmt: skip
        sizes = self._train_image_sizes
        indices = [i for i in indices if sizes[i] == sizes[indices[0]]]  # one render size per step
        self._step_image_size, self._step_image_count = sizes[indices[0]], len(indices)  # for an OOM message
        self.cached_train  # noqa: B018 (loads the images and the prefetcher first)
        datas = [self._prefetcher.get(i) for i in indices]  # images on the device, copied one step ahead
        self._prefetcher.prefetch(self._upcoming_images(step), count=self.per_step)
        if len(indices) == 1:
            # the only camera of its size in this step: one camera as next_train hands it ([H, W, C]
            # image, [1] Cameras), which the model renders and scores as one, not a batch of one
            return self._single_camera(indices[0]), datas[0]
        batch: Dict = {}
        for key, value in datas[0].items():
            values = [d[key] for d in datas]
            batch[key] = self._stacked(key, values) if isinstance(value, torch.Tensor) else values
        # the kept [1] cameras concatenated: slicing train_cameras with host indices synchronises per field
        camera = concatenated_cameras([self._single_camera(i) for i in indices])
        assert camera.metadata is not None  # concatenated_cameras sets it
        camera.metadata["cam_idx"] = indices
        return camera, batch

    def _stacked(self, key: str, values: List[torch.Tensor]) -> torch.Tensor:
        """``values`` stacked [B', ...] on the device, in a buffer reused across steps (the step that
        reads it ends before the next one writes it, on one stream). Each host image goes over on its
        own, non-blocking from pinned memory, still as uint8: stacking on the host first would copy
        the step's images once more and make the transfer synchronous (pageable memory)."""
        device = torch.device(self.device)
        on_device = [v.to(device, non_blocking=True) for v in values]
        shape = (len(values), *values[0].shape)
        buffers = self.__dict__.setdefault("_batch_buffers", {})
        buffer = buffers.get(key)
        if buffer is None or buffer.shape != shape or buffer.dtype != values[0].dtype or buffer.device != device:
            buffer = buffers[key] = torch.empty(shape, dtype=values[0].dtype, device=device)
        return torch.stack(on_device, out=buffer)

    @cached_property
    def _train_image_sizes(self) -> List[Tuple[int, int]]:
        """(height, width) per training camera, read once from the dataset's host cameras (after
        ``cached_train``, whose undistortion may change them; ``train_cameras`` is on the GPU)."""
        self.cached_train  # noqa: B018 (undistortion may change the cameras first)
        cameras = self.train_dataset.cameras
        return list(zip(cameras.height.reshape(-1).tolist(), cameras.width.reshape(-1).tolist()))

    @cached_property
    def cached_eval(self):
        """This rank's eval images (:meth:`eval_indices`), by eval index, a :class:`HostImageStore`: in host
        memory whatever ``cache_images`` says; evaluation moves one at a time to the device (upstream
        keeps them all on the GPU with cache_images="gpu")."""
        from ns_splat_plus.training.images import load

        with photo_errors(self.eval_dataset):
            return load.load_eval_images(self)


class HeldEvalViews(Sequence):
    """The eval views a rank holds (``SplatPlusDataManager.eval_indices``), as upstream's
    ``fixed_indices_eval_dataloader`` list of ``(camera [1], data)`` pairs, but made on access: one
    image on the device at a time, never all of them."""

    def __init__(self, datamanager: SplatPlusDataManager) -> None:
        self._datamanager = datamanager
        self.indices: List[int] = datamanager.eval_indices()

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position):  # type: ignore[override]
        if isinstance(position, slice):
            return [self[k] for k in range(*position.indices(len(self)))]
        dm = self._datamanager
        return eval_camera_and_batch(dm, self.indices[position], torch.device(dm.device))
