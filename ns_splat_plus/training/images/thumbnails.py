"""The training cameras' pictures in the viewer, from the photos already in host memory:
:func:`viewer_dataset`.

nerfstudio's ``Viewer.init_scene`` (1.1.5) draws each training camera (up to 512) with its photo. It reads the
photo as ``train_dataset[i]["image"]``, and ``InputDataset`` decodes the file again, to float32 at full size, only
to shrink it to 100 pixels. That runs between the warmup and step 0 of every run with the viewer on (the
default). On fox (58 photos of 1080x1920) it took 1.28 of that stretch's 1.55 s on the development machine; on
an H200 machine the stretch took 4.5-4.8 s (``benchmarks/2026-11-30-h200x2-eval-strips-and-ns-eval``).

The photos this rank holds in host memory are decoded already (:class:`~.stores.HostImageStore`), so
:class:`ThumbnailDataset` gives ``init_scene`` each one shrunk as it shrinks them (torchvision's ``resize`` to 100
pixels, ``antialias=None``). For a camera with lens distortion the picture is the undistorted photo that training
uses, whose intrinsics the viewer draws with (nerfstudio's is the distorted file). Photos held elsewhere (another
rank's shard, or a streamed store, whose buffer the viewer must not churn) are read as nerfstudio reads them:
with streaming (thousands of photos) init_scene read up to 512 of them in turn.

All pictures are made before ``init_scene`` asks for them, on several threads, each resize with torch at one
thread (:func:`one_torch_thread`), and ``init_scene`` runs at one torch thread too (the training loop's set-up):
its own work on each picture is a few small tensor operations. By default torch runs each of them on all the
cores, and where other processes keep the cores busy its threads wait on each other: 58 fox photos took 2.5-3.0 s
under a 2-process CPU load on the 2-core development machine, against 0.15-0.44 s on 2 threads of one torch
thread each (0.06-0.2 s both, idle). On a busy H200 machine the stretch between the warmup and step 0 took
3.4-4.1 s, against 0.18 s on the idle one (``benchmarks/2026-11-30-h200x2-lite-default-start-up-end-and-ns-eval``).
The bytes are those of nerfstudio's ``init_scene`` at one torch thread: torch's antialiased resize of uint8 rounds
some pixels 1/255 differently with several threads, so nerfstudio's own pictures differ by as much between
machines.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, Optional, Sequence

import torch

from ns_splat_plus.training.images import plan as image_plan
from ns_splat_plus.training.images.stores import HostImageStore, StreamingImageStore

THUMBNAIL_PIXELS = 100
"""The shorter side of a camera's picture: ``init_scene``'s ``resize(image, 100)``."""


def thumbnail_bytes(image: torch.Tensor) -> torch.Tensor:
    """The camera picture ``init_scene`` makes of a photo, as bytes, from the photo as the store holds it.

    Args:
        image: [H, W, C] uint8 (0-255), or float in [0, 1].

    Returns:
        [h, w, C] uint8, with min(h, w) = :data:`THUMBNAIL_PIXELS`.
    """
    import torchvision.transforms.functional as TF

    uint8 = image if image.dtype == torch.uint8 else (image * 255).type(torch.uint8)  # init_scene's own cast
    return TF.resize(uint8.permute(2, 0, 1), THUMBNAIL_PIXELS, antialias=None).permute(1, 2, 0)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch's CPU operations at one thread each (threads started inside take it too); the count restored after."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


class ThumbnailDataset:
    """What ``init_scene`` reads of the train dataset (its length, ``cameras`` and ``[i]["image"]``), with the
    pictures of the ``drawn`` photos made at construction on ``workers`` threads (:func:`thumbnail_bytes`): those
    of held photos from memory, the others read by the dataset."""

    def __init__(self, dataset: Any, held: Optional[HostImageStore], drawn: Sequence[int], workers: int) -> None:
        self.dataset = dataset
        self.held = held
        self.cameras = dataset.cameras
        self._pictures: Dict[int, torch.Tensor] = {}
        if drawn:
            with (
                one_torch_thread(),
                ThreadPoolExecutor(
                    max_workers=max(1, min(workers, len(drawn))), thread_name_prefix="splat-plus-pictures"
                ) as pool,
            ):
                self._pictures = dict(zip(drawn, pool.map(self._picture, drawn)))

    def _picture(self, idx: int) -> torch.Tensor:
        """Kept as bytes until init_scene asks (up to 512 pictures: 27 MB, against 109 MB as float32)."""
        if self.held is not None and self.held.ready(idx):
            return thumbnail_bytes(self.held[idx]["image"])
        return thumbnail_bytes(self.dataset[idx]["image"])

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        if idx in self._pictures:
            # float32 in [0, 1], as init_scene reads photos: its (x * 255).type(torch.uint8) gives back exactly
            # these bytes (float32's k / 255 * 255 is k for every byte k)
            return {"image": self._pictures.pop(idx).float() / 255.0}
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
