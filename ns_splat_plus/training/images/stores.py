"""Training images in host memory or streamed from disk: the two stores.

Entry points: :func:`load_host_images` (decode each image once, uint8, pinned or not) wrapped in
:class:`HostImageStore`, and :class:`StreamingImageStore` (a thread pool decodes on demand and keeps
at most ``buffered`` decoded images). Both hold only the images they were given (this rank's shard,
``parallel.camera_shard``), indexed by the dataset's (global) index: ``store[i]["image"]`` [H, W, 3]
is nerfstudio's data dict, so code that indexes ``cached_train`` keeps working, and an index outside
the shard raises (a rank asking for another rank's image is a bug). Their per-step move to the
device is :mod:`.prefetch`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

import torch
from rich.progress import track

Decode = Callable[[int], Dict[str, torch.Tensor]]
Indices = Union[int, Sequence[int]]
"""The images a store holds: their dataset indices, or a count n meaning 0 ... n-1 (one process)."""


def _index_list(indices: Indices) -> List[int]:
    return list(range(indices)) if isinstance(indices, int) else [int(i) for i in indices]


def _outside(idx: int, held: int) -> IndexError:
    return IndexError(
        f"train image {idx} is not among the {held} images this rank holds (its shard of the cameras): "
        "a rank may only render its own shard"
    )


def _pinned(data: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    out = dict(data)
    out["image"] = data["image"].pin_memory()
    if isinstance(data.get("mask"), torch.Tensor):
        out["mask"] = data["mask"].pin_memory()
    return out


SLAB_BYTES = 1 << 30
_ALIGN = 64


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class PinnedSlabs:
    """Page-locked host memory in a few large blocks, handed out as views.

    torch's pinned-memory allocator rounds every allocation up to a power of two (its caching host
    allocator indexes free lists by size), so one pinned 3840x2160 RGB uint8 image (24.9 MB) takes
    32 MiB: a thousand 4K images needed 35.8 GiB of host RSS for 20.3 GiB of pixels (H200 run,
    benchmarks/2026-11-23-h200-1000x4k-images/). Blocks of a power-of-two size hold many images each and lose only the last block's tail.

    Args:
        slab_bytes: size of each block (a power of two; one larger block for a tensor that does not fit).
        pin: page-locked blocks (False: ordinary memory, same layout: the CPU tests).
    """

    def __init__(self, slab_bytes: int = SLAB_BYTES, pin: bool = True) -> None:
        self.slab_bytes = _next_pow2(slab_bytes)
        self.pin = pin
        self.slabs: List[torch.Tensor] = []
        self._free_at = 0  # first free byte of the last slab
        self._lock = threading.Lock()

    def _reserve(self, nbytes: int) -> torch.Tensor:
        """``nbytes`` of uint8 in a block (a new block when the last one is full)."""
        with self._lock:
            start = -(-self._free_at // _ALIGN) * _ALIGN
            if not self.slabs or start + nbytes > self.slabs[-1].numel():
                size = max(self.slab_bytes, _next_pow2(nbytes))
                self.slabs.append(torch.empty(size, dtype=torch.uint8, pin_memory=self.pin))
                start = 0
            self._free_at = start + nbytes
            return self.slabs[-1][start : start + nbytes]

    def copy_in(self, tensor: torch.Tensor) -> torch.Tensor:
        """A copy of ``tensor`` (any shape and dtype) inside a block."""
        nbytes = tensor.numel() * tensor.element_size()
        out = self._reserve(nbytes).view(tensor.dtype).view(tensor.shape)
        out.copy_(tensor)
        return out

    @property
    def reserved_bytes(self) -> int:
        return sum(slab.numel() for slab in self.slabs)


def slab_size_for(per_image: int, num_images: int, largest: int = SLAB_BYTES) -> int:
    """The power-of-two block size (at most ``largest`` unless one image is larger) that reserves the
    least memory for ``num_images`` images of ``per_image`` bytes; the larger size on a tie."""
    step = -(-per_image // _ALIGN) * _ALIGN
    best = None
    size = _next_pow2(per_image)
    while True:
        per_slab = max(1, size // step)
        reserved = -(-num_images // per_slab) * size
        if best is None or reserved <= best[0]:
            best = (reserved, size)
        if size >= largest or per_slab >= num_images:
            return best[1]
        size *= 2


def _copied_into(data: Dict[str, torch.Tensor], slabs: PinnedSlabs) -> Dict[str, torch.Tensor]:
    out = dict(data)
    out["image"] = slabs.copy_in(data["image"])
    if isinstance(data.get("mask"), torch.Tensor):
        out["mask"] = slabs.copy_in(data["mask"])
    return out


def _contiguous(data: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    # undistortion crops with a view: keep only the crop, not the whole decoded frame behind it
    out = dict(data)
    out["image"] = data["image"].contiguous()
    return out


class HostImageStore:
    """Images in host memory, by dataset index (``store[i]`` is a data dict; only the held indices)."""

    def __init__(self, images: Dict[int, Dict[str, torch.Tensor]]) -> None:
        self._images = dict(sorted(images.items()))
        self.slabs: Optional["PinnedSlabs"] = None  # the page-locked blocks holding them, if pinned

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        try:
            return self._images[idx]
        except KeyError:
            raise _outside(idx, len(self._images)) from None

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        """The held data dicts, by ascending index (as iterating upstream's list does)."""
        return iter(self._images.values())

    @property
    def indices(self) -> List[int]:
        return list(self._images)

    @property
    def nbytes(self) -> int:
        """Bytes of the held tensors (images, masks)."""
        return sum(
            v.numel() * v.element_size()
            for d in self._images.values()
            for v in d.values()
            if isinstance(v, torch.Tensor)
        )

    def request(self, idx: int) -> None:
        """Nothing to prepare: every held image is already decoded (an index outside the shard raises)."""
        if idx not in self._images:
            raise _outside(idx, len(self._images))

    def ready(self, idx: int) -> bool:
        return idx in self._images

    def close(self) -> None:
        pass


def load_host_images(
    decode: Decode,
    indices: Indices,
    workers: int,
    pin: bool,
    slab_bytes: Optional[int] = None,
    description: str = "Decoding train images",
) -> HostImageStore:
    """Decode the images ``indices`` (dataset indices; an int n: 0 ... n-1) with ``workers`` threads
    (PIL and OpenCV release the GIL) into host memory; ``pin``: into page-locked :class:`PinnedSlabs`
    (``slab_bytes``: their block size; default: :func:`slab_size_for` the first image's size)."""
    wanted = _index_list(indices)
    if not wanted:
        return HostImageStore({})
    first = _contiguous(decode(wanted[0]))
    slabs = None
    if pin:
        if slab_bytes is None:
            per_image = sum(v.numel() * v.element_size() for v in first.values() if isinstance(v, torch.Tensor))
            slab_bytes = slab_size_for(per_image, len(wanted))
        slabs = PinnedSlabs(slab_bytes)

    def one(idx: int) -> Dict[str, torch.Tensor]:
        data = first if idx == wanted[0] else _contiguous(decode(idx))
        return _copied_into(data, slabs) if slabs is not None else data

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="splat-plus-decode") as pool:
        images = list(track(pool.map(one, wanted), description=description, transient=True, total=len(wanted)))
    store = HostImageStore(dict(zip(wanted, images)))
    store.slabs = slabs
    return store


class StreamingImageStore:
    """Images decoded from disk on demand by ``workers`` threads; at most ``buffered`` decoded
    images (finished or in flight) are kept, the least recently requested dropped first."""

    def __init__(self, decode: Decode, indices: Indices, workers: int, buffered: int, pin: bool = False) -> None:
        if buffered < 1:
            raise ValueError("the streaming buffer must hold at least one image")
        self._decode = decode
        self._held = frozenset(_index_list(indices))  # dataset indices this store may decode (the shard)
        self._pin = pin
        self.buffered = buffered
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="splat-plus-stream")
        self._futures: "OrderedDict[int, Future]" = OrderedDict()
        self._lock = threading.Lock()
        self.decoded = 0  # images decoded so far (tests and diagnostics)
        self.max_held = 0

    def __len__(self) -> int:
        return len(self._held)

    @property
    def indices(self) -> List[int]:
        return sorted(self._held)

    def _work(self, idx: int) -> Dict[str, torch.Tensor]:
        data = _contiguous(self._decode(idx))
        with self._lock:
            self.decoded += 1
        return _pinned(data) if self._pin else data

    def _submit(self, idx: int) -> Future:
        """The future of image ``idx``, submitted if needed, marked most recently used."""
        if idx not in self._held:
            raise _outside(idx, len(self._held))
        with self._lock:
            future = self._futures.get(idx)
            if future is None:
                future = self._pool.submit(self._work, idx)
                self._futures[idx] = future
            self._futures.move_to_end(idx)
            while len(self._futures) > self.buffered:
                _, old = self._futures.popitem(last=False)
                old.cancel()  # not started yet: never decoded; running: its result is dropped
            self.max_held = max(self.max_held, len(self._futures))
            return future

    def request(self, idx: int) -> None:
        """Start decoding ``idx`` in the background (a later ``store[idx]`` finds it ready)."""
        self._submit(idx)

    def ready(self, idx: int) -> bool:
        with self._lock:
            future = self._futures.get(idx)
        return future is not None and future.done()

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        return self._submit(idx).result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._futures.clear()
