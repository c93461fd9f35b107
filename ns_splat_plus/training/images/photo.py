"""Photos as 8-bit RGB(A) whatever their file's pixel format: :class:`PhotoDataset`, the datamanager's dataset.

nerfstudio 1.1.5's ``InputDataset.get_numpy_image`` reads every photo with ``np.array(pil_image,
dtype="uint8")``: a 16-bit greyscale PNG (Pillow's mode ``I;16``, or ``I``) became the low byte of
each pixel (noise), a palette PNG (``P``) its palette indices shown as grey, a 1-bit image 0 and 1,
and a CMYK JPEG four channels read as RGBA. Training then ran on wrong pixels without a word.
:func:`photo_pixels` converts each of them as an image viewer shows it (16-bit values scaled to 8
bits, grey and palette to RGB, transparency kept as alpha) and refuses, naming the photo, what has
no 8-bit meaning (floating-point images). RGB, RGBA and 8-bit grey photos are read as upstream reads them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from nerfstudio.data.datasets.base_dataset import InputDataset
from PIL import Image

from ns_splat_plus import upstream
from ns_splat_plus.errors import UserInputError

AS_UPSTREAM = ("RGB", "RGBA", "L")
"""Pillow modes nerfstudio reads right: 8 bits per channel, grey (repeated to RGB), RGB or RGBA."""

SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
"""Pillow modes of 16-bit greyscale photos (PNG, TIFF); ``I`` (32-bit integers) is how some Pillow versions open them."""


def eight_bit(image: Image.Image, path: Path) -> Image.Image:
    """``image`` in a mode nerfstudio reads right (:data:`AS_UPSTREAM`), converted where it is not."""
    mode = image.mode
    if mode in AS_UPSTREAM:
        return image
    if mode in SIXTEEN_BIT:
        values = np.asarray(image).astype(np.int64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise UserInputError(
                f"photo {path} holds {mode} pixel values from {values.min()} to {values.max()}, outside 16 bits",
                "save it as an 8-bit or 16-bit PNG or JPEG",
            )
        return Image.fromarray(((values + 128) // 257).astype(np.uint8), mode="L")  # round(v / 257): 65535 -> 255
    if mode == "F":
        raise UserInputError(
            f"photo {path} is a floating-point image (Pillow mode F): its pixels have no 8-bit scale splat-plus can trust",
            "save it as an 8-bit or 16-bit PNG or JPEG",
        )
    has_alpha = "A" in mode or "a" in mode or "transparency" in image.info
    return image.convert("RGBA" if has_alpha else "RGB")


def photo_pixels(path: Path, scale_factor: float = 1.0) -> np.ndarray:
    """The photo at ``path`` as uint8 [H, W, 3 or 4], resized by ``scale_factor`` (bilinear) as nerfstudio does.

    Raises:
        UserInputError: a photo whose pixels cannot be made 8-bit (named).
    """
    with Image.open(path) as opened:
        image = eight_bit(opened, Path(path))
        if scale_factor != 1.0:
            width, height = image.size
            size = (int(width * scale_factor), int(height * scale_factor))
            image = image.resize(size, resample=Image.Resampling.BILINEAR)
        pixels = np.array(image, dtype="uint8")
    if pixels.ndim == 2:
        pixels = pixels[:, :, None].repeat(3, axis=2)
    return pixels


class PhotoDataset(InputDataset):
    """nerfstudio's InputDataset whose photos are read by :func:`photo_pixels` (every pixel format right)."""

    def get_numpy_image(self, image_idx: int) -> np.ndarray:
        path = upstream.dataparser_outputs(self).image_filenames[image_idx]
        return photo_pixels(path, self.scale_factor)
