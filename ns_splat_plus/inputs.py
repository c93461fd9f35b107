"""Checks of what the user handed us, before any work starts: one clear message, never a traceback.

``preflight(config)`` looks at the dataset the run points to (path, images, SfM points) and raises
``UserInputError`` with what is wrong and what to do. ``user_errors()`` turns those, and errors
that nerfstudio's dataparsers raise about the data (bare asserts and ValueErrors), into a clean
exit with that one message.
"""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path
from typing import Iterator, Optional

from nerfstudio.utils.rich_utils import CONSOLE

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".exr", ".tif", ".tiff", ".bmp", ".webp"}


class UserInputError(ValueError):
    """Something the user can fix: the message says what and how."""


def _dataset_path(config) -> Optional[Path]:
    datamanager = config.pipeline.datamanager
    data = getattr(datamanager, "data", None) or getattr(datamanager.dataparser, "data", None)
    return Path(data) if data is not None else None


def _count_images(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def preflight(config) -> None:
    """Raise UserInputError if the dataset the run points to cannot work."""
    data = _dataset_path(config)
    if data is None:
        raise UserInputError("no dataset given: pass --data PATH (a COLMAP, nerfstudio or instant-ngp scene)")
    if not data.exists():
        raise UserInputError(f"dataset path {data} does not exist: check --data")
    parser = config.pipeline.datamanager.dataparser
    kind = type(parser).__name__
    model = config.pipeline.model
    wants_points = getattr(parser, "load_3D_points", False) and not getattr(model, "random_init", False)
    if kind == "ColmapDataParserConfig":
        root = data
        colmap_dir = root / parser.colmap_path
        images_dir = root / parser.images_path
        if not colmap_dir.is_dir():
            raise UserInputError(
                f"no COLMAP model at {colmap_dir}: run ns-process-data (or COLMAP) on {root}, "
                "or point --colmap-path (after `colmap`) at the sparse model"
            )
        if _count_images(images_dir) == 0:
            raise UserInputError(f"no images found in {images_dir}: the scene needs its photos there")
        has_points = any((colmap_dir / f"points3D.{ext}").exists() for ext in ("bin", "txt"))
        if wants_points and not has_points:
            raise UserInputError(
                f"the COLMAP model at {colmap_dir} has no points3D.bin/points3D.txt, but SfM initialization "
                "is requested: re-run COLMAP with points, or start from random Gaussians with "
                "--pipeline.model.random-init True (or pass `colmap --load-3D-points False`)"
            )
    elif kind in ("NerfstudioDataParserConfig", "InstantNGPDataParserConfig"):
        transforms = data if data.suffix == ".json" else data / "transforms.json"
        if not transforms.is_file():
            raise UserInputError(f"no transforms.json at {transforms}: is --data the scene folder?")
        import json

        try:
            frames = json.loads(transforms.read_text()).get("frames", [])
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{transforms} is not valid JSON ({exc})") from None
        if not frames:
            raise UserInputError(f"{transforms} lists no frames: the scene has no images")


_DATAPARSER_DIRS = ("nerfstudio/data/dataparsers", "nerfstudio/data/utils")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Exit with one clear message for UserInputError and for dataparser complaints about the data."""
    try:
        yield
    except UserInputError as exc:
        CONSOLE.print(f"[bold red]splat-plus: {exc}")
        raise SystemExit(2) from None
    except (AssertionError, ValueError, FileNotFoundError) as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        if frames and any(d in frames[-1].filename.replace("\\", "/") for d in _DATAPARSER_DIRS):
            CONSOLE.print(f"[bold red]splat-plus: the dataset could not be loaded: {exc or type(exc).__name__}")
            raise SystemExit(2) from None
        raise
