"""Loading the train and eval images at start-up: the memory plan, the store, the cameras.

Entry points: :func:`load_train_images` (backs ``SplatPlusDataManager.cached_train``: chooses host
memory or streaming from the cameras' sizes and the available host memory, prints one line, builds
the store and the device prefetcher, writes the undistorted intrinsics into the dataset's cameras
as nerfstudio's ``_load_images`` does) and :func:`load_eval_images` (backs ``cached_eval``: the same
decoder, always into host memory).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from typing import Dict, List

import torch
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus.training.images import decode as image_decode
from ns_splat_plus.training.images import plan as image_plan
from ns_splat_plus.training.images.prefetch import DevicePrefetcher
from ns_splat_plus.training.images.stores import StreamingImageStore, load_host_images


def _cuda_in_use(device) -> bool:
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def load_train_images(datamanager):
    """Choose where the train images live, build that store and the prefetcher (on the datamanager)."""
    started = time.perf_counter()
    config = datamanager.config
    dataset = datamanager.train_dataset
    # the cameras as the dataparser gave them: undistortion needs the distorted ones, and writes
    # the undistorted intrinsics into dataset.cameras (what the model and the viewer use)
    originals = copy.deepcopy(dataset.cameras)
    sizes = list(zip(originals.height.reshape(-1).tolist(), originals.width.reshape(-1).tolist()))
    cuda = _cuda_in_use(datamanager.device)
    plan = image_plan.choose_image_memory(
        sizes,
        image_plan.available_host_bytes(),
        config.image_memory,
        cuda=cuda,
        dtype=config.cache_images_type,
        workers=config.stream_workers,
        buffered=config.stream_buffer,
    )
    if plan.mode == "host":  # start-up decoding: as many threads as nerfstudio's option allows
        plan = dataclasses.replace(plan, workers=image_plan.default_workers(config.max_thread_workers))
    CONSOLE.print(plan.describe())

    decode = image_decode.image_decoder(dataset, originals, config.cache_images_type)
    if plan.mode == "host":
        store = load_host_images(
            functools.partial(decode, record_intrinsics=True), len(dataset), plan.workers, pin=plan.pinned
        )
    else:
        image_decode.undistort_cameras_without_decoding(dataset.cameras, originals)
        named = image_decode.naming_the_photo(decode, dataset)  # a photo gone or damaged later: named
        store = StreamingImageStore(named, len(dataset), plan.workers, plan.buffered, pin=cuda)
    datamanager._image_plan = plan
    datamanager._prefetcher = DevicePrefetcher(store, datamanager.device)
    datamanager.train_cameras = dataset.cameras.to(datamanager.device)
    datamanager._train_images_seconds = time.perf_counter() - started
    return store


def load_eval_images(datamanager) -> List[Dict[str, torch.Tensor]]:
    """The eval images, decoded and undistorted as nerfstudio's ``_load_images`` does, in host memory
    (backs ``SplatPlusDataManager.cached_eval``; evaluation moves one at a time to the device).

    nerfstudio pins each eval image on its own, which torch rounds up to a power of two (a 24.9 MB
    4K frame takes 32 MiB); here, with CUDA, they share page-locked blocks as the train images do.
    Undistortion rewrites the eval cameras' intrinsics, so this must run exactly once per datamanager.
    """
    dataset, config = datamanager.eval_dataset, datamanager.config
    decode = image_decode.image_decoder(dataset, copy.deepcopy(dataset.cameras), config.cache_images_type)
    store = load_host_images(
        functools.partial(decode, record_intrinsics=True), len(dataset), image_plan.default_workers(config.max_thread_workers),
        pin=_cuda_in_use(datamanager.device), description="Decoding eval images",
    )  # fmt: skip
    return [store[i] for i in range(len(store))]
