"""Preflight of a COLMAP scene: the model files and every photo, each problem one message naming it.

nerfstudio's colmap parser reads the model with its own readers and fails with a raw
``struct.error`` (no file name) on a zero-byte or truncated ``*.bin``, takes a NaN pose for bad SfM
points, and finds a missing, empty or wrongly sized photo only while caching images (an assert
without the file name). :func:`check_colmap_scene` reads the model with the same readers (a
``points3D.bin`` only stepped over: :func:`~.sfm_points.points3D_binary_offsets`) and opens the header of
every photo (no decode) before the dataparser runs. ``ns-eval``, ``ns-viewer`` and ``ns-export`` parse
without that preflight: :func:`damaged_files_named` names the damaged file when their parse fails.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.training import sfm_points

MAX_AUTO_RESOLUTION = 1600
"""nerfstudio's colmap parser picks a downscale factor that brings the first photo under this size."""

# COLMAP camera models whose parameters start with fx, fy (the others start with one focal f)
_TWO_FOCALS = {"PINHOLE", "OPENCV", "OPENCV_FISHEYE"}

CAMERA_PARAMETERS = {
    "SIMPLE_PINHOLE": 3, "PINHOLE": 4, "SIMPLE_RADIAL": 4, "RADIAL": 5, "OPENCV": 8, "OPENCV_FISHEYE": 8,
    "SIMPLE_RADIAL_FISHEYE": 4, "RADIAL_FISHEYE": 5,
}  # fmt: skip
"""The COLMAP camera models nerfstudio 1.1.5 reads (``colmap_utils.parse_colmap_camera_params``; FULL_OPENCV, FOV
and THIN_PRISM_FISHEYE end in a NotImplementedError there), with COLMAP's number of parameters of each."""

_REEXPORT = "re-export the COLMAP model (COLMAP's model_converter, or ns-process-data) or restore the file"


def _read(reader, path: Path, what: str):
    try:
        return reader(path)
    except Exception as exc:  # noqa: BLE001 (struct.error, ValueError, IndexError, UnicodeDecodeError...: all mean a damaged file)
        size = path.stat().st_size if path.exists() else 0
        state = "is empty (0 bytes)" if size == 0 else f"cannot be read ({type(exc).__name__}: {exc}); is it truncated?"
        raise UserInputError(f"the COLMAP {what} file {path} {state}", _REEXPORT) from None


def read_model(colmap_dir: Path, read_points: bool) -> Tuple[Dict, Dict, Optional[Dict], Path, Path]:
    """(cameras, images, points or None, cameras file, images file), read as nerfstudio's parser does
    (``cameras.txt``/``images.txt`` before the ``.bin`` files; ``points3D.bin`` before ``.txt``). A
    ``points3D.bin`` is only stepped over (:func:`~.sfm_points.points3D_binary_offsets`; its points None), a
    ``.txt`` read."""
    from nerfstudio.data.utils import colmap_parsing_utils as cu

    if (colmap_dir / "cameras.txt").exists():
        cam_file, img_file = colmap_dir / "cameras.txt", colmap_dir / "images.txt"
        readers = (cu.read_cameras_text, cu.read_images_text)
    elif (colmap_dir / "cameras.bin").exists():
        cam_file, img_file = colmap_dir / "cameras.bin", colmap_dir / "images.bin"
        readers = (cu.read_cameras_binary, cu.read_images_binary)
    else:
        raise UserInputError(f"the COLMAP model at {colmap_dir} has no cameras.txt or cameras.bin", _REEXPORT)
    if not img_file.exists():
        raise UserInputError(f"the COLMAP model at {colmap_dir} has {cam_file.name} but no {img_file.name}", _REEXPORT)
    cameras = _read(readers[0], cam_file, "cameras")
    images = _read(readers[1], img_file, "images")
    points = None
    if read_points:
        if (colmap_dir / "points3D.bin").exists():
            _read(sfm_points.points3D_binary_offsets_of, colmap_dir / "points3D.bin", "points3D")
        elif (colmap_dir / "points3D.txt").exists():
            points = _read(cu.read_points3D_text, colmap_dir / "points3D.txt", "points3D")
    return cameras, images, points, cam_file, img_file


@contextlib.contextmanager
def damaged_files_named(parser_config: Any) -> Iterator[None]:
    """A parse by nerfstudio's colmap parser (its config ``parser_config``, ``data`` set) inside: where it
    fails, the model's files are read again as the preflight reads them, and a damaged one raises the
    preflight's UserInputError naming it; any other failure stays as it was. Costs nothing when the parse
    succeeds."""
    try:
        yield
    except Exception:  # a UserInputError is a SystemExit: it passes as it is
        from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

        if isinstance(parser_config, ColmapDataParserConfig) and parser_config.data is not None:
            colmap_dir = Path(parser_config.data) / parser_config.colmap_path
            if colmap_dir.is_dir():
                read_model(colmap_dir, read_points=bool(parser_config.load_3D_points))  # raises if one is damaged
        raise


def points_file(colmap_dir: Path) -> Optional[Path]:
    """The points file nerfstudio's parser reads (``points3D.bin`` before ``.txt``), None if there is none."""
    return next(
        (colmap_dir / f"points3D.{ext}" for ext in ("bin", "txt") if (colmap_dir / f"points3D.{ext}").exists()), None
    )


def count_points(path: Path) -> Optional[int]:
    """How many points a COLMAP points3D file holds, from its header (``.bin``) or its lines (``.txt``);
    None where it cannot tell (a damaged file: the full read names it)."""
    try:
        if path.suffix == ".bin":
            with open(path, "rb") as f:
                header = f.read(8)
            return int.from_bytes(header, "little") if len(header) == 8 else None
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip() and not line.lstrip().startswith(b"#"))
    except OSError:
        return None


def check_model(cameras: Dict, images: Dict, cam_file: Path, img_file: Path) -> None:
    """Cameras with a usable size and focal length; images with unique names, a known camera and a finite pose."""
    if not cameras:
        raise UserInputError(f"{cam_file} lists no cameras", _REEXPORT)
    if not images:
        raise UserInputError(
            f"{img_file} lists no images: COLMAP registered no photo", "re-run COLMAP's mapper on the photos"
        )
    for cam_id, cam in cameras.items():
        if cam.width <= 0 or cam.height <= 0:
            raise UserInputError(f"camera {cam_id} in {cam_file} has size {cam.width}x{cam.height}", _REEXPORT)
        if cam.model not in CAMERA_PARAMETERS:
            raise UserInputError(
                f"camera {cam_id} in {cam_file} is a {cam.model} camera, which nerfstudio's COLMAP reader does not "
                f"read (it reads {', '.join(CAMERA_PARAMETERS)})",
                "undistort the photos with COLMAP's image_undistorter (it writes PINHOLE cameras), or run COLMAP "
                "again with one of those camera models",
            )
        if len(cam.params) != CAMERA_PARAMETERS[cam.model]:
            raise UserInputError(
                f"camera {cam_id} in {cam_file} ({cam.model}) has {len(cam.params)} parameters, where a {cam.model} "
                f"camera has {CAMERA_PARAMETERS[cam.model]}",
                _REEXPORT,
            )
        focals = list(cam.params[:2] if cam.model in _TWO_FOCALS else cam.params[:1])
        if not focals or not all(math.isfinite(f) and f > 0 for f in focals):
            raise UserInputError(
                f"camera {cam_id} in {cam_file} ({cam.model}) has focal length {focals}: it must be positive",
                "fix the camera's intrinsics (or re-run COLMAP's mapper)",
            )
    names = Counter(im.name for im in images.values())
    dup = sorted(n for n, c in names.items() if c > 1)
    if dup:
        raise UserInputError(
            f"{img_file} lists the photo {dup[0]} {names[dup[0]]} times"
            + (f" (and {len(dup) - 1} more duplicate names)" if len(dup) > 1 else ""),
            "keep one entry per photo (re-run COLMAP, or remove the duplicate lines)",
        )
    for im in images.values():
        if im.camera_id not in cameras:
            raise UserInputError(
                f"photo {im.name} in {img_file} uses camera {im.camera_id}, which {cam_file} does not list", _REEXPORT
            )
        pose = np.concatenate([np.asarray(im.qvec, dtype=float), np.asarray(im.tvec, dtype=float)])
        if not np.all(np.isfinite(pose)) or np.linalg.norm(pose[:4]) == 0:
            raise UserInputError(
                f"photo {im.name} in {img_file} has an invalid pose (rotation {list(im.qvec)}, translation {list(im.tvec)})",
                "re-run COLMAP, or remove that photo's entry from the model",
            )
    check_camera_spread(images, img_file)


def check_camera_spread(images: Dict, img_file: Path) -> None:
    """At least two photos from different positions: nerfstudio's parser scales the scene by the
    largest camera offset from their centre, and divides by zero when there is none."""
    ordered = [images[k] for k in sorted(images)]
    if len(ordered) < 2:
        raise UserInputError(
            f"{img_file} registers only one photo ({ordered[0].name}): splat-plus needs at least 2 photos "
            "taken from different positions",
            "re-run COLMAP's mapper with more photos of the scene (it registered only one)",
        )
    centres = []
    for im in ordered:
        w, x, y, z = (float(v) for v in im.qvec)
        norm = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / norm, x / norm, y / norm, z / norm
        rot = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
        centres.append(-rot.T @ np.asarray(im.tvec, dtype=float))  # world position of the camera
    if np.ptp(np.stack(centres), axis=0).max() == 0:
        raise UserInputError(
            f"all {len(ordered)} photos in {img_file} were taken from the same position: splat-plus needs photos "
            "from different positions",
            "re-run COLMAP's mapper, or add photos taken from other positions",
        )


def _scaled(size: int, factor: int, mode: str) -> int:
    # nerfstudio's Cameras.rescale_output_resolution(1 / factor, mode)
    value = size / factor
    return {"floor": int(value), "round": int(math.floor(0.5 + value)), "ceil": int(math.ceil(value))}.get(
        mode, int(value)
    )


def _photo_size(path: Path) -> Tuple[int, int]:
    from PIL import Image

    if not path.is_file():
        raise UserInputError(
            f"photo {path} is missing (the COLMAP model lists it)",
            "restore the photo, or remove it from the COLMAP model",
        )
    if path.stat().st_size == 0:
        raise UserInputError(
            f"photo {path} is empty (0 bytes)", "restore the photo, or remove it from the COLMAP model"
        )
    try:
        with Image.open(path) as im:  # reads the header only
            return im.size
    except Exception as exc:  # noqa: BLE001 (UnidentifiedImageError, OSError, SyntaxError: not a readable image)
        raise UserInputError(
            f"photo {path} cannot be read as an image ({type(exc).__name__}: {exc})",
            "restore the photo, or remove it from the COLMAP model",
        ) from None


def auto_downscale_factor(first_photo: Path) -> int:
    """The factor nerfstudio's colmap parser picks when ``--downscale-factor`` is not given."""
    w, h = _photo_size(first_photo)
    df = 0
    while max(w, h) / 2**df > MAX_AUTO_RESOLUTION:
        df += 1
    return 2**df


def check_photos(
    images: Dict, cameras: Dict, images_dir: Path, factor: Optional[int], rounding: str, cam_file: Path, batch_job: bool
) -> None:
    """Every photo the model lists exists, has a readable header and the size of its camera
    (divided by the downscale factor, rounded as nerfstudio rounds)."""
    ordered = [images[k] for k in sorted(images)]
    if factor is None:
        factor = auto_downscale_factor(images_dir / ordered[0].name)
    folder = images_dir if factor == 1 else images_dir.parent / f"{images_dir.name}_{factor}"
    if not folder.is_dir():
        if not batch_job:
            return  # nerfstudio offers to create the downscaled photos on the terminal; checked then
        raise UserInputError(
            f"the photos are larger than {MAX_AUTO_RESOLUTION} px, so nerfstudio downscales them by {factor}, "
            f"but {folder} does not exist (nerfstudio would ask on a terminal to create it; this is a batch job)",
            f"pass `colmap --downscale-factor 1` to train at full size, or create {folder.name}/ first",
        )
    for im in ordered:
        cam = cameras[im.camera_id]
        expected = (_scaled(cam.width, factor, rounding), _scaled(cam.height, factor, rounding))
        got = _photo_size(folder / im.name)
        if got != expected:
            how = f"camera {im.camera_id} in {cam_file} is {cam.width}x{cam.height}"
            if factor != 1:
                how += f", so with --downscale-factor {factor} the photo must be {expected[0]}x{expected[1]}"
            raise UserInputError(
                f"photo {folder / im.name} is {got[0]}x{got[1]}, but {how}",
                "use the photos the COLMAP model was made from (or the matching --downscale-factor)",
            )


def check_colmap_scene(colmap_dir: Path, images_dir: Path, parser, read_points: bool, batch_job: bool) -> None:
    """All of the above for a ``colmap`` dataparser config ``parser``."""
    cameras, images, _, cam_file, img_file = read_model(colmap_dir, read_points)
    check_model(cameras, images, cam_file, img_file)
    check_photos(
        images,
        cameras,
        images_dir,
        parser.downscale_factor,
        getattr(parser, "downscale_rounding_mode", "floor"),
        cam_file,
        batch_job,
    )


def other_layout(root: Path, parent_model: Optional[Path]) -> Optional[str]:
    """What to do where ``colmap`` was pointed at a folder that is not a COLMAP scene but what users mistake for
    one: a photo or the COLMAP model folder of a scene, poses in a transforms.json, or the photo folder of a scene (``parent_model``: the COLMAP model of
    ``root``'s parent, where ``root`` is a photo folder); None otherwise (the advice to run COLMAP stands)."""
    if root.is_file() or any((root / f"cameras.{ext}").is_file() for ext in ("bin", "txt")):
        what = "a file" if root.is_file() else "a COLMAP model folder"
        scene = next((p for p in root.parents if (p / "images").is_dir() or (p / "images_2").is_dir()), None)
        if scene is None:
            return f"--data {root} is {what}: pass the scene's folder, the one that holds images/ and the COLMAP model"
        rel = root.relative_to(scene).as_posix()
        found = root.is_file() or rel in ("colmap/sparse/0", "sparse/0")  # the places the colmap parser looks in
        model = "" if found else f" (with `colmap --colmap-path {rel}`)"
        return f"--data {root} is {what}: pass the scene's folder, --data {scene}{model}"
    if (root / "transforms.json").is_file():
        return (
            f"{root} holds a transforms.json (poses already made): train it with `nerfstudio-data` (nerfstudio's "
            "transforms.json) or `instant-ngp-data` (instant-ngp's) in place of `colmap`"
        )
    if parent_model is not None:
        return f"{root} is the photo folder of {root.parent}, whose COLMAP model is {parent_model}: pass --data {root.parent}"
    return None
