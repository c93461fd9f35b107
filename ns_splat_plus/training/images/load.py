"""Loading the train and eval images at start-up: the memory plan, the store, the cameras.

Entry points: :func:`load_train_images` (backs ``SplatPlusDataManager.cached_train``: this rank's
shard of the cameras only (``parallel.camera_shard``); chooses host memory or streaming from the
shard's sizes and the available host memory, prints one line, builds the store and the device
prefetcher, writes the undistorted intrinsics into the dataset's cameras as nerfstudio's
``_load_images`` does) and :func:`load_eval_images` (backs ``cached_eval``: this rank's share of the
eval images, ``parallel.eval_share``, with the same decoder, always into host memory). Both record
on the datamanager's ``image_record`` what this rank holds and how long decoding took.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
import time
from typing import Any, Callable, Dict, List, Sequence

import torch
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.sharding import camera_shard, eval_share
from ns_splat_plus.training.images import decode as image_decode
from ns_splat_plus.training.images import plan as image_plan
from ns_splat_plus.training.images.prefetch import DevicePrefetcher
from ns_splat_plus.training.images.stores import HostImageStore, StreamingImageStore, load_host_images


class DecodeClock:
    """CPU seconds the decoding threads spent in ``decode`` (summed over threads: the work, which
    falls as 1/W with shards whatever the cores), and how many images they decoded."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0
        self.images = 0
        self._lock = threading.Lock()

    def timed(self, decode: Callable[..., Dict[str, torch.Tensor]]) -> Callable[..., Dict[str, torch.Tensor]]:
        def timed_decode(*args, **kwargs):
            started = time.thread_time()
            try:
                return decode(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with self._lock:
                    self.cpu_seconds += spent
                    self.images += 1

        return timed_decode


def _rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 (psutil missing: no RSS in the record)
        return 0


def _record(store, total: int, wall: float, clock: DecodeClock, rss_before: int, **extra: Any) -> Dict[str, Any]:
    held = getattr(store, "nbytes", None)
    return {
        "started_at": time.time() - wall,
        "count": len(store),
        "of": total,
        "indices": list(store.indices),
        "bytes": held,
        "decode_seconds": wall,
        "decode_cpu_seconds": clock.cpu_seconds,
        "decoded": clock.images,
        "rss_growth_bytes": _rss_bytes() - rss_before if rss_before else None,
        **extra,
    }


def _cuda_in_use(device) -> bool:
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def load_train_images(datamanager):
    """Choose where this rank's train images live, build that store and the prefetcher (on the datamanager)."""
    started = time.perf_counter()
    rss_before = _rss_bytes()
    config = datamanager.config
    dataset = datamanager.train_dataset
    world_size, rank = collectives.get_world_size(), collectives.get_rank()
    shard = list(camera_shard(rank, world_size, len(dataset), config.train_cameras_sampling_seed))
    # the cameras as the dataparser gave them: undistortion needs the distorted ones, and writes
    # the undistorted intrinsics into dataset.cameras (what the model and the viewer use)
    originals = copy.deepcopy(dataset.cameras)
    sizes = list(zip(originals.height.reshape(-1).tolist(), originals.width.reshape(-1).tolist()))
    cuda = _cuda_in_use(datamanager.device)
    plan = image_plan.choose_image_memory(
        [sizes[i] for i in shard],
        image_plan.available_host_bytes(),
        config.image_memory,
        cuda=cuda,
        dtype=config.cache_images_type,
        workers=config.stream_workers,
        buffered=config.stream_buffer,
        shard_of=len(dataset) if world_size > 1 else 0,
        ranks_on_node=min(image_plan.ranks_on_this_node(), world_size) if world_size > 1 else 1,
    )
    if plan.mode == "host":  # start-up decoding: as many threads as nerfstudio's option allows
        plan = dataclasses.replace(
            plan, workers=image_plan.default_workers(config.max_thread_workers, plan.ranks_on_node)
        )
    if rank == 0:
        CONSOLE.print(plan.describe())
        ignored = image_plan.ignored_placement_note(config.cache_images, config.images_on_gpu)
        if ignored is not None:
            CONSOLE.print(ignored, soft_wrap=True, markup=False)

    clock = DecodeClock()
    decode = clock.timed(image_decode.image_decoder(dataset, originals, config.cache_images_type))
    if plan.mode == "host":
        store = load_host_images(
            functools.partial(decode, record_intrinsics=True), shard, plan.workers, pin=plan.pinned
        )
        _undistort_others(dataset, originals, shard)  # the other ranks' cameras: intrinsics, no decoding
    else:
        image_decode.undistort_cameras_without_decoding(dataset.cameras, originals)
        named = image_decode.naming_the_photo(decode, dataset)  # a photo gone or damaged later: named
        store = StreamingImageStore(named, shard, plan.workers, plan.buffered, pin=cuda)
    datamanager._image_plan = plan
    datamanager._prefetcher = DevicePrefetcher(store, datamanager.device)
    datamanager.train_cameras = dataset.cameras.to(datamanager.device)
    datamanager._train_images_seconds = time.perf_counter() - started
    datamanager.image_record["train"] = _record(
        store, len(dataset), datamanager._train_images_seconds, clock, rss_before, mode=plan.mode
    )
    return store


def load_eval_images(datamanager) -> HostImageStore:
    """This rank's share of the eval images (``parallel.eval_share``: all of them in one process), decoded
    and undistorted as nerfstudio's ``_load_images`` does, in host memory, by eval index (backs
    ``SplatPlusDataManager.cached_eval``; evaluation moves one at a time to the device).

    nerfstudio pins each eval image on its own, which torch rounds up to a power of two (a 24.9 MB
    4K frame takes 32 MiB); here, with CUDA, they share page-locked blocks as the train images do.
    Undistortion rewrites the eval cameras' intrinsics, so this must run exactly once per datamanager.
    """
    started, rss_before = time.perf_counter(), _rss_bytes()
    dataset, config = datamanager.eval_dataset, datamanager.config
    share = eval_share(collectives.get_rank(), collectives.get_world_size(), len(dataset))
    originals = copy.deepcopy(dataset.cameras)
    clock = DecodeClock()
    decode = clock.timed(image_decode.image_decoder(dataset, originals, config.cache_images_type))
    store = load_host_images(
        functools.partial(decode, record_intrinsics=True), share,
        image_plan.default_workers(config.max_thread_workers, image_plan.ranks_on_this_node()),
        pin=_cuda_in_use(datamanager.device), description="Decoding eval images",
    )  # fmt: skip
    _undistort_others(dataset, originals, share)
    datamanager.image_record["eval"] = _record(store, len(dataset), time.perf_counter() - started, clock, rss_before)
    return store


def _undistort_others(dataset, originals, held: Sequence[int]) -> None:
    """The undistorted intrinsics of the cameras whose images another rank holds (no decoding)."""
    owned = set(held)
    others: List[int] = [i for i in range(len(dataset)) if i not in owned]
    if others:
        image_decode.undistort_cameras_without_decoding(dataset.cameras, originals, others)
