"""Checks of what any dataparser produced (COLMAP, nerfstudio-data, instant-ngp, blender...), before a photo
is decoded: :func:`check_parsed_datasets` (the entry point; the trainer's set-up calls it).

The COLMAP preflight (:mod:`.colmap_checks`) reads COLMAP's own files; a transforms.json went unchecked: a
focal length of 0 and a photo listed twice trained to the end, and a missing photo was called "damaged or
truncated" when it was decoded. These checks read the dataparser's outputs instead, so that every dataparser
gets them: focal lengths positive and finite, each photo listed once per split, each photo present and of its
camera's size, and photos large enough for the loss at the resolution schedule's first (coarsest) size.
:func:`unreadable_photo` is the message for a photo found missing or damaged later, when it is read.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from ns_splat_plus.errors import UserInputError

MIN_SIDE = 2
"""Pixels a rendered image needs on each side: at 0 the rasterizer has no tile to render, at 1 the loss's SSIM
(pytorch_msssim) drops the axis and fails. The resolution schedule's first size must have them too."""

_FIX_LIST = "restore the photo, or remove it from the dataset (its transforms.json or COLMAP model)"


def check_parsed_datasets(config, datasets: Sequence) -> None:
    """Raise UserInputError for the first problem in ``datasets`` (the train and eval InputDatasets)."""
    for dataset in datasets:
        if dataset is None or len(dataset) == 0:
            continue
        names = [Path(p) for p in dataset.image_filenames]
        check_unique_paths(names)
        check_focal_lengths(names, dataset.cameras)
        check_photos_exist(names)
        if type(config.pipeline.datamanager.dataparser).__name__ != "ColmapDataParserConfig":
            check_photos_match_cameras(names, dataset.cameras)  # COLMAP's preflight compared them already
    train = datasets[0]
    check_photo_sizes(
        [Path(p) for p in train.image_filenames],
        train.cameras,
        getattr(config.pipeline.model, "num_downscales", 0),
        also=[d for d in datasets[1:] if d is not None and len(d) > 0],
    )


def check_unique_paths(names: Sequence[Path]) -> None:
    counts = Counter(str(p) for p in names)
    dup = sorted(n for n, c in counts.items() if c > 1)
    if dup:
        raise UserInputError(
            f"the dataset lists the photo {dup[0]} {counts[dup[0]]} times"
            + (f" (and {len(dup) - 1} more photos more than once)" if len(dup) > 1 else ""),
            "keep one entry per photo (remove the duplicate frame from transforms.json, or re-run ns-process-data)",
        )


def check_focal_lengths(names: Sequence[Path], cameras) -> None:
    fx, fy = cameras.fx.reshape(-1).tolist(), cameras.fy.reshape(-1).tolist()
    for name, x, y in zip(names, fx, fy):
        if not (math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0):
            raise UserInputError(
                f"the dataset gives photo {name} the focal length fx={x:g}, fy={y:g}: both must be positive",
                "fix the intrinsics (fl_x / fl_y in transforms.json, or the camera model), or re-run ns-process-data",
            )


def check_photos_exist(names: Sequence[Path]) -> None:
    missing = [p for p in names if not p.is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more missing photos)" if len(missing) > 1 else ""
        raise UserInputError(
            f"photo {missing[0]} is missing: the dataset lists it, but there is no such file{more}", _FIX_LIST
        )


def check_photos_match_cameras(names: Sequence[Path], cameras) -> None:
    """Every photo has the size its camera gives it (a transforms.json's top-level ``w`` / ``h`` for every frame
    without its own), read from its header: the decode at start-up ended in a ValueError traceback ("image 3 is
    64x48 but its camera says 32x24") that named no file and left the run directory behind."""
    from PIL import Image

    widths, heights = cameras.width.reshape(-1).tolist(), cameras.height.reshape(-1).tolist()
    for name, width, height in zip(names, widths, heights):
        try:
            with Image.open(name) as im:  # reads the header only
                size = im.size
        except Exception:  # noqa: BLE001 (a format PIL cannot open, e.g. EXR: its decode names any problem)
            continue
        if size != (int(width), int(height)):
            raise UserInputError(
                f"photo {name} is {size[0]}x{size[1]} pixels, but the dataset gives its camera "
                f"{int(width)}x{int(height)}",
                "give that frame its own size (`w` and `h` in its transforms.json frame, with its intrinsics), or "
                f"resize the photo to {int(width)}x{int(height)} (or use the photos the dataset was made from)",
            )


def unreadable_photo(path: Path, exc: BaseException) -> UserInputError:
    """The one message for a photo that could not be read: missing (``FileNotFoundError``), else damaged."""
    if isinstance(exc, FileNotFoundError):
        return UserInputError(f"photo {path} is missing: the dataset lists it, but there is no such file", _FIX_LIST)
    return UserInputError(
        f"photo {path} cannot be decoded ({type(exc).__name__}: {exc}): the file is damaged or truncated", _FIX_LIST
    )


def smallest_side(cameras) -> tuple:
    """(index, width, height) of the camera whose shorter side is the shortest."""
    widths, heights = cameras.width.reshape(-1).tolist(), cameras.height.reshape(-1).tolist()
    index = min(range(len(widths)), key=lambda i: min(widths[i], heights[i]))
    return index, int(widths[index]), int(heights[index])


def largest_fitting_downscales(side: int) -> int:
    """The largest k with floor(side / 2**k) >= MIN_SIDE (-1 if even the full size is too small)."""
    k = -1
    while side // 2 ** (k + 1) >= MIN_SIDE:
        k += 1
    return k


def check_photo_sizes(names: Sequence[Path], cameras, num_downscales: int, also: Optional[Sequence] = None) -> None:
    """Every photo has at least MIN_SIDE pixels on a side at full size (training and evaluation) and at the
    resolution schedule's first size (training: 1 / 2**num_downscales, rounded down as splatfacto does)."""
    for dataset_names, dataset_cameras in [(names, cameras)] + [
        ([Path(p) for p in d.image_filenames], d.cameras) for d in (also or ())
    ]:
        index, width, height = smallest_side(dataset_cameras)
        if min(width, height) < MIN_SIDE:
            raise UserInputError(
                f"photo {dataset_names[index]} is {width}x{height} pixels: splat-plus trains photos of at least "
                f"{MIN_SIDE}x{MIN_SIDE} pixels",
                "use larger photos, or remove the smaller ones from the dataset",
            )
    index, width, height = smallest_side(cameras)
    factor = 2 ** max(int(num_downscales), 0)
    if min(width // factor, height // factor) < MIN_SIDE:
        fits = largest_fitting_downscales(min(width, height))
        raise UserInputError(
            f"photo {names[index]} is {width}x{height} pixels, which the resolution schedule first trains at "
            f"1/{factor} ({width // factor}x{height // factor}; --pipeline.model.num-downscales {num_downscales}): a render needs "
            f"{MIN_SIDE} pixels on each side, so the smallest photo this schedule accepts is "
            f"{MIN_SIDE * factor}x{MIN_SIDE * factor}",
            f"pass --pipeline.model.num-downscales {fits} (or less), or use larger photos",
        )
