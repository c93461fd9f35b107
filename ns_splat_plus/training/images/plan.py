"""Where training images live: the memory plan, a pure function of the image sizes and free memory.

nerfstudio's ``FullImageDatamanager.cached_train`` decodes every training image at start-up into one
cache (on the GPU by default, float32 unless ``cache_images_type="uint8"``): a thousand 4K images
need 23 GiB as uint8 and run out of device (or host) memory. splat-plus keeps training images
either in host memory (``host``: uint8, pinned when CUDA is available and they fit the pinned
budget) or decodes them from disk on demand (``stream``: a small thread pool, a bounded number of
decoded images); :mod:`.stores` holds them and :mod:`.prefetch` moves one per step to the device.
On several ranks each rank plans for its own shard of the cameras only, against its part of the
node's memory (the ranks of a node share it).

Entry points: :func:`choose_image_memory` (from the image sizes, the available host memory and
``--pipeline.datamanager.image-memory``; its :meth:`ImageMemoryPlan.describe` is the one start-up
console line), :func:`available_host_bytes`, :func:`default_workers` and :func:`ignored_placement_note`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, Optional, Sequence, Tuple

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
    shard_of: int = 0  # cameras of all ranks' shards together (0: one process, no shards)
    ranks_on_node: int = 1  # ranks sharing the node's available memory
    mixed_sizes: bool = False  # the images are not all of image_size

    def describe(self) -> str:
        """The one console line, e.g. ``Train images: 1000 x 3840x2160 uint8 = 23.2 GiB in host memory (pinned)``."""
        h, w = self.image_size
        shard = f" (this rank's shard: {self.num_images} of {self.shard_of} cameras)" if self.shard_of else ""
        up_to = "up to " if self.mixed_sizes else ""  # the largest size of several
        head = f"Train images{shard}: {self.num_images} x {up_to}{w}x{h} {self.dtype}"
        need = format_bytes(self.total_bytes)
        avail = f"{format_bytes(self.available_bytes)} available"
        if self.ranks_on_node > 1:
            avail += f" to {self.ranks_on_node} ranks on this node"
        why = "" if self.chosen_by == "auto" else ", --pipeline.datamanager.image-memory"
        if self.mode == "host":
            where = "pinned" if self.pinned else "pageable"
            return f"{head} = {need} in host memory ({where}; {avail}{why})"
        return (
            f"{head}: streaming from disk, {self.workers} workers, {self.buffered} images buffered "
            f"(images need {need}, {avail}{why})"
        )


def ignored_placement_note(cache_images: str, images_on_gpu: bool) -> Optional[str]:
    """One console line where splatfacto's own placement options were set away from their defaults
    (``--pipeline.datamanager.cache-images cpu``, ``--pipeline.datamanager.images-on-gpu True``): splat-plus
    accepts them so that splatfacto's command lines run, and says that the plan above decides instead."""
    given = [f"cache-images {cache_images}"] if cache_images != "gpu" else []
    given += ["images-on-gpu True"] if images_on_gpu else []
    if not given:
        return None
    options = " and ".join(f"--pipeline.datamanager.{option}" for option in given)
    return (
        f"{options}: ignored (splatfacto's). splat-plus keeps train images in host memory or streams them from "
        "disk, never on the GPU, and copies each step's image ahead of the step (--pipeline.datamanager.image-memory)"
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
    shard_of: int = 0,
    ranks_on_node: int = 1,
) -> ImageMemoryPlan:
    """Host memory when the images fit (``HOST_FRACTION`` of ``available_bytes``), else streaming;
    ``option`` other than ``auto`` forces the mode. Pinned only with CUDA and within ``PINNED_FRACTION``.

    Several ranks: ``image_sizes`` are this rank's shard (of ``shard_of`` cameras), and each of the
    ``ranks_on_node`` ranks of this node may take its part of ``available_bytes``."""
    if option not in ("auto", "host", "stream"):
        raise ValueError(f"image memory must be auto, host or stream, got {option!r}")
    total = image_bytes(image_sizes, dtype)
    budget = available_bytes / max(1, ranks_on_node)
    mode: Literal["host", "stream"]
    if option == "auto":
        mode = "host" if total <= HOST_FRACTION * budget else "stream"
    else:
        mode = "host" if option == "host" else "stream"  # checked above: host or stream
    pinned = bool(cuda and mode == "host" and total <= PINNED_FRACTION * budget)
    largest = max(image_sizes, key=lambda s: int(s[0]) * int(s[1])) if len(image_sizes) else (0, 0)
    return ImageMemoryPlan(
        mode=mode,
        pinned=pinned,
        num_images=len(image_sizes),
        total_bytes=total,
        available_bytes=int(available_bytes),
        image_size=(int(largest[0]), int(largest[1])),
        mixed_sizes=len({(int(h), int(w)) for h, w in image_sizes}) > 1,
        dtype=dtype,
        workers=max(1, workers),
        buffered=max(2, buffered),
        chosen_by="auto" if option == "auto" else "option",
        shard_of=int(shard_of),
        ranks_on_node=max(1, int(ranks_on_node)),
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


def ranks_on_this_node() -> int:
    """Ranks sharing this node's memory: torchrun's LOCAL_WORLD_SIZE, srun's SLURM_NTASKS_PER_NODE, else 1."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        value = os.environ.get(name, "").split("(")[0]  # SLURM may write "4(x2)"
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def default_workers(configured: Optional[int], ranks_on_node: int = 1) -> int:
    """Decoding threads of one rank: nerfstudio's ``max_thread_workers`` when set, else up to 8 of the CPUs
    this process may run on (its affinity: what SLURM or taskset gave it, not the whole node), shared by
    the ``ranks_on_node`` ranks of the node (each decodes only its own shard)."""
    if configured:
        return configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // max(1, ranks_on_node)))
