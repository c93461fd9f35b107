"""The training cameras' pictures in the viewer, from the photos already in host memory:
:func:`viewer_dataset`.

nerfstudio's ``Viewer.init_scene`` (1.1.5) draws each training camera (up to 512) with its photo. It reads the
photo as ``train_dataset[i]["image"]``, and ``InputDataset`` decodes the file again, to float32 at full size, only
to shrink it to 100 pixels. That runs between the warmup and step 0 of every run with the viewer on (the
default). On fox (58 photos of 1080x1920) it took 1.28 of that stretch's 1.55 s on the development machine; on
an H200 machine the stretch took 4.5-4.8 s (``benchmarks/2026-11-30-h200x2-eval-strips-and-ns-eval``).

The photos this rank holds in host memory are decoded already (:class:`~.stores.HostImageStore`), so
:class:`ThumbnailDataset` gives ``init_scene`` each one shrunk as it shrinks them (torchvision's ``resize`` to 100
pixels, ``antialias=None``). These are the same bytes. For a camera with lens distortion the picture is the
undistorted photo that training uses, whose intrinsics the viewer draws with (nerfstudio's is the distorted
file). Photos held elsewhere (another rank's shard, or a streamed store, whose buffer the viewer must not churn)
are read as nerfstudio reads them, but on several threads at once rather than one after the other, and shrunk
there: with streaming (thousands of photos) init_scene read up to 512 of them in turn.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, Optional, Sequence

import torch

from ns_splat_plus.training.images import plan as image_plan
from ns_splat_plus.training.images.stores import HostImageStore, StreamingImageStore

THUMBNAIL_PIXELS = 100
"""The shorter side of a camera's picture: ``init_scene``'s ``resize(image, 100)``."""


def thumbnail(image: torch.Tensor) -> torch.Tensor:
    """The camera picture ``init_scene`` makes of a photo, from the photo as the store holds it.

    Args:
        image: [H, W, C] uint8 (0-255), or float in [0, 1].

    Returns:
        [h, w, C] float32 in [0, 1], with min(h, w) = :data:`THUMBNAIL_PIXELS`: ``init_scene`` turns it into
        uint8 with ``(x * 255).type(torch.uint8)``, which gives back exactly the bytes of the shrunk uint8 photo
        (float32's k / 255 * 255 is k for every byte k).
    """
    import torchvision.transforms.functional as TF

    uint8 = image if image.dtype == torch.uint8 else (image * 255).type(torch.uint8)  # init_scene's own cast
    small = TF.resize(uint8.permute(2, 0, 1), THUMBNAIL_PIXELS, antialias=None).permute(1, 2, 0)
    return small.float() / 255.0


class ThumbnailDataset:
    """What ``init_scene`` reads of the train dataset (its length, ``cameras`` and ``[i]["image"]``), with the
    pictures of held photos made from memory (:func:`thumbnail`) and those of the other ``drawn`` photos read
    by the dataset on ``workers`` threads, started at construction."""

    def __init__(self, dataset: Any, held: Optional[HostImageStore], drawn: Sequence[int], workers: int) -> None:
        self.dataset = dataset
        self.held = held
        self.cameras = dataset.cameras
        to_read = [i for i in drawn if held is None or not held.ready(i)]
        self._read: Dict[int, Future] = {}
        if to_read:
            pool = ThreadPoolExecutor(
                max_workers=max(1, min(workers, len(to_read))), thread_name_prefix="splat-plus-pictures"
            )
            self._read = {i: pool.submit(self._picture_from_file, i) for i in to_read}
            pool.shutdown(wait=False)  # its threads end with the last picture

    def _picture_from_file(self, idx: int) -> torch.Tensor:
        return thumbnail(self.dataset[idx]["image"])

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        if idx in self._read:
            return {"image": self._read.pop(idx).result()}
        if self.held is not None and self.held.ready(idx):
            return {"image": thumbnail(self.held[idx]["image"])}
        return self.dataset[idx]


def viewer_dataset(datamanager: Any, drawn: Sequence[int]) -> Optional[Any]:
    """The dataset whose photos the viewer draws at the training cameras (``drawn``: the indices
    ``init_scene`` will draw; none without the viewer): a :class:`ThumbnailDataset` over the datamanager's train
    dataset, reading with the image loading's threads, or None (nerfstudio's own: no viewer, or not splat-plus's
    datamanager)."""
    dataset = getattr(datamanager, "train_dataset", None)
    store = getattr(datamanager, "cached_train", None)  # loaded by the set-up, before the warmup
    if dataset is None or not drawn or not isinstance(store, (HostImageStore, StreamingImageStore)):
        return None
    configured = getattr(datamanager.config, "max_thread_workers", None)
    workers = image_plan.default_workers(configured, image_plan.ranks_on_this_node())
    return ThumbnailDataset(dataset, store if isinstance(store, HostImageStore) else None, drawn, workers)
