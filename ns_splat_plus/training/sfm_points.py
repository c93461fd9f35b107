"""The SfM points of a COLMAP model, read as arrays: :func:`points3D_binary_offsets` (the records of a
``points3D.bin``), :func:`load_train_points` (the train split's points, as nerfstudio's parser gives them).

nerfstudio's colmap parser (1.1.5) reads ``points3D.bin`` with ``read_points3D_binary``. That reader builds a
Python object per point: 5.7 s a million points on the development machine. It runs for each split, in every
command that builds the datamanager (ns-train, ns-eval, ns-viewer, ns-export).

The model starts from the train split's points alone. So the train split is parsed without them, and they are
read here from the file's bytes instead: the records' offsets are stepped over in Python, and their fields are
gathered by numpy. Then they are placed and scaled as nerfstudio's ``ColmapDataParser._load_3D_points`` does,
giving the same tensors bit for bit (``tests/training/test_sfm_points_read_once.py``). nerfstudio's own reader
stays for a ``points3D.txt``, for 2D matches (``--max-2D-matches-per-3D-point``) and for repeated point ids.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import numpy as np
import torch

POINT_RECORD_BYTES = 51
"""A ``points3D.bin`` record before its track: id (Q), xyz (3 d), rgb (3 B), error (d), track length (Q)."""
_RECORD = np.dtype([("id", "<u8"), ("xyz", "<f8", 3), ("rgb", "u1", 3), ("error", "<f8"), ("track", "<u8")])
_CHUNK = 1 << 16  # records gathered at once: 64k x 51 index entries


def points3D_binary_offsets(data: bytes) -> np.ndarray:
    """Byte offsets [N] (int64) of the records in a ``points3D.bin``'s bytes, N from its header.

    Raises ``ValueError`` where nerfstudio's ``read_points3D_binary`` would fail: the file ends inside a record
    or its track. Bytes after the last record are ignored, as there."""
    if len(data) < 8:
        raise ValueError(f"{len(data)} bytes, not even the 8-byte point count")
    count = int.from_bytes(data[:8], "little")
    offsets = np.empty(count, dtype=np.int64)
    offset = 8
    for index in range(count):
        if offset + POINT_RECORD_BYTES > len(data):
            raise ValueError(f"the file ends inside point {index + 1} of {count}")
        offsets[index] = offset
        (track_length,) = struct.unpack_from("<Q", data, offset + POINT_RECORD_BYTES - 8)
        offset += POINT_RECORD_BYTES + 8 * track_length
    if offset > len(data):
        raise ValueError(f"the file ends inside the track of point {count} of {count}")
    return offsets


_last_offsets: Dict[tuple, np.ndarray] = {}
"""The offsets of the last ``points3D.bin`` stepped over, by (path, size, mtime): the start-up check steps over the
file and the train split's read needs the same offsets (0.2 s a million points, once instead of twice)."""


def _offsets(path: Path, data: Optional[bytes] = None) -> np.ndarray:
    """:func:`points3D_binary_offsets` of the file at ``path`` (its bytes ``data`` if read already), read-only,
    computed once while the file stays the same."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _last_offsets:
        offsets = points3D_binary_offsets(path.read_bytes() if data is None else data)
        offsets.flags.writeable = False
        _last_offsets.clear()
        _last_offsets[key] = offsets
    return _last_offsets[key]


def points3D_binary_offsets_of(path: Path) -> np.ndarray:
    """:func:`points3D_binary_offsets` of the file at ``path`` (read-only; kept for the read that follows)."""
    return _offsets(path)


def read_points3D_binary_records(path: Path) -> np.ndarray:
    """The fixed part of every record of a ``points3D.bin``, in file order: a structured array [N] with the
    fields id, xyz [3] (float64), rgb [3] (uint8), error (float64) and track (the track's length)."""
    data = path.read_bytes()
    offsets = _offsets(path, data)
    raw = np.frombuffer(data, dtype=np.uint8)
    records = np.empty(len(offsets), dtype=_RECORD)
    as_bytes = records.view(np.uint8).reshape(len(offsets), POINT_RECORD_BYTES)
    columns = np.arange(POINT_RECORD_BYTES, dtype=np.int64)
    for start in range(0, len(offsets), _CHUNK):
        chunk = offsets[start : start + _CHUNK]
        as_bytes[start : start + len(chunk)] = raw[chunk[:, None] + columns]
    return records


@contextlib.contextmanager
def points_not_loaded(parser_config: Any) -> Iterator[None]:
    """nerfstudio's colmap parser (its config ``parser_config``) parsing without the SfM points inside, with
    ``load_3D_points`` back as given after; nothing for a parser without that option, or with it off."""
    if not getattr(parser_config, "load_3D_points", False):
        yield
        return
    parser_config.load_3D_points = False
    try:
        yield
    finally:
        parser_config.load_3D_points = True


def fast_points_apply(parser_config: Any) -> bool:
    """Whether :func:`load_train_points` can stand in for nerfstudio's reading of the train split's points:
    nerfstudio's colmap parser, with its points on and without 2D matches."""
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

    return (
        type(parser_config) is ColmapDataParserConfig
        and bool(parser_config.load_3D_points)
        and parser_config.max_2D_matches_per_3D_point == 0
    )


def load_train_points(dataparser: Any, outputs: Any) -> Dict[str, torch.Tensor]:
    """The metadata nerfstudio's ``_load_3D_points`` adds to a split's outputs (``points3D_xyz`` [N, 3],
    ``points3D_rgb`` [N, 3] uint8, ``points3D_error`` [N], ``points3D_num_points2D`` [N]), for ``outputs``
    parsed without them by ``dataparser`` (nerfstudio's ``ColmapDataParser``): its points placed by
    ``outputs.dataparser_transform`` and scaled by ``outputs.dataparser_scale``."""
    from ns_splat_plus import upstream

    colmap_path = Path(dataparser.config.data) / dataparser.config.colmap_path
    transform, scale = outputs.dataparser_transform, outputs.dataparser_scale
    records = _records_or_none(colmap_path / "points3D.bin")
    if records is None:  # a .txt model, or repeated ids (nerfstudio's dict keeps one per id): its own reader
        return upstream.load_colmap_points(dataparser, colmap_path, transform, scale)
    points3D = torch.from_numpy(records["xyz"].astype(np.float32))
    points3D = torch.cat((points3D, torch.ones_like(points3D[..., :1])), -1) @ transform.T
    points3D *= scale
    return {
        "points3D_xyz": points3D,
        "points3D_rgb": torch.from_numpy(np.ascontiguousarray(records["rgb"])),
        "points3D_error": torch.from_numpy(records["error"].astype(np.float32)),
        "points3D_num_points2D": torch.from_numpy(records["track"].astype(np.int64)),
    }


def _records_or_none(path: Path) -> Optional[np.ndarray]:
    if not path.exists():
        return None
    records = read_points3D_binary_records(path)
    return records if len(np.unique(records["id"])) == len(records) else None
