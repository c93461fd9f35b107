"""Ranks that must agree do: one check at start-up that every rank has the same options and the same dataset.

Entry points: :func:`agree_on_options` (right after the process group is joined: every option of the
trainer's config, as the command line gave it) and :func:`agree_on_dataset` (once the dataset is parsed,
before the model is built or any photo decoded: the photo files, their sizes and a sample of their bytes,
image sizes, cameras). Both are :func:`agree`: one ``all_gather_object`` of a digest (a few bytes per rank);
only when the digests differ, a second one of the values themselves, to say what differs and where. Nothing
runs after start-up, and nothing at all in one process.

Before this, ranks started with different arguments (a wrapper script, a stale copy of the data on one node)
were not detected: another ``--max-num-iterations`` on one rank hung every rank until the collective timeout
(the ranks' collectives no longer matched), and another dataset trained to the end with no warning. Now every
rank raises :class:`RanksDisagreeError` (exit status 2) and the run stops in seconds with one message.

Values are strings compared exactly, or tuples of floats (camera intrinsics and poses) compared within a
relative tolerance: the dataparser computes poses in float32, and nodes with different CPUs may round the last
bit differently. The digest rounds floats to 4 significant digits; a value on a rounding boundary only costs
the second gather, which then finds them equal.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import re
from pathlib import Path, PurePath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.parallel import collectives

Value = Union[str, Tuple[float, ...]]

FLOAT_REL_TOL = 1e-4
"""Floats closer than this (relative to their size, absolute below 1) are the same on every rank."""

SAMPLE_BYTES = 4096
"""Bytes read from the start and from the end of every photo: a cheap check of its pixels (see :func:`photo_fingerprint`)."""

NOT_COMPARED = frozenset({"timestamp"})
"""Options that may differ: rank 0's timestamp names the run on every rank (broadcast at start-up)."""

SHOWN = 6
"""Differences named in the message; the rest are counted."""


class RanksDisagreeError(UserInputError):
    """The ranks were given different options or datasets; raised on every rank with the same message."""

    same_on_every_rank = True


# --- what is compared ---------------------------------------------------------------------------------


def _leaf(value: Any) -> str:
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))  # an object's address differs in every process


def _flatten(value: Any, path: str, out: Dict[str, str]) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if path:
            out[path] = type(value).__name__
        for f in dataclasses.fields(value):
            name = f"{path}.{f.name}" if path else f.name
            if f.name.startswith("_") or name in NOT_COMPARED:
                continue
            _flatten(getattr(value, f.name, None), name, out)
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            _flatten(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, (list, tuple)) and any(dataclasses.is_dataclass(v) for v in value):
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{i}]", out)
    else:
        out[path] = _leaf(value)


def option_values(config: Any) -> Dict[str, str]:
    """Every option of ``config`` (a trainer config): ``{"max_num_iterations": "40", ...}``, nested
    dataclasses and dicts flattened into dotted paths, the class of each nested config included."""
    out: Dict[str, str] = {}
    _flatten(config, "", out)
    return out


def option_name(path: str) -> str:
    """The command-line option of a config path: ``pipeline.model.cull_alpha_thresh`` ->
    ``--pipeline.model.cull-alpha-thresh``."""
    return "--" + path.replace("_", "-")


def photo_fingerprint(path: Union[str, Path]) -> str:
    """``<size> bytes, <digest>``: the file's size and a hash of its first and last ``SAMPLE_BYTES``.

    Cheap (two small reads; every rank reads every photo's ends, not its pixels): a different, truncated
    or re-encoded photo almost always differs in size or at its ends; an edit that keeps both is not seen."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            sample = hashlib.sha256(f.read(SAMPLE_BYTES))
            if size > SAMPLE_BYTES:
                f.seek(max(SAMPLE_BYTES, size - SAMPLE_BYTES))
                sample.update(f.read(SAMPLE_BYTES))
    except OSError as err:
        return f"unreadable ({err.strerror or type(err).__name__})"
    return f"{size} bytes, {sample.hexdigest()[:12]}"


def _floats(tensor: Any) -> Tuple[float, ...]:
    if tensor is None:
        return ()
    return tuple(float(x) for x in tensor.detach().reshape(-1).cpu().double().tolist())


def dataset_values(splits: Mapping[str, Any]) -> Dict[str, Value]:
    """What every rank must read alike, from each split's dataparser outputs (``{"training": outputs, ...}``):
    the photos' names (relative to their common folder) and order, each photo's size and sampled bytes and
    its camera's image size, intrinsics and pose, and the dataparser's transform and scale."""
    files = {split: [Path(p) for p in outputs.image_filenames] for split, outputs in splits.items()}
    everything = [str(p) for paths in files.values() for p in paths]
    common = os.path.commonpath(everything) if everything else ""
    if everything and len(everything) == 1:
        common = os.path.dirname(common)
    names = {split: [os.path.relpath(p, common) if common else str(p) for p in paths] for split, paths in files.items()}
    out: Dict[str, Value] = {}
    for split in splits:  # the counts first: the first differences the message names
        order = hashlib.sha256("\n".join(names[split]).encode()).hexdigest()[:12]
        out[f"{split} photos"] = f"{len(names[split])} (order {order})"
    for split, outputs in splits.items():
        cameras = outputs.cameras
        for i, (name, path) in enumerate(zip(names[split], files[split])):
            width, height = int(cameras.width[i].item()), int(cameras.height[i].item())
            out[f"{split} photo {name}"] = f"camera {width}x{height}, {photo_fingerprint(path)}"
            intrinsics = [cameras.fx[i], cameras.fy[i], cameras.cx[i], cameras.cy[i], cameras.camera_to_worlds[i]]
            if cameras.distortion_params is not None:
                intrinsics.append(cameras.distortion_params[i])
            out[f"{split} camera (intrinsics, pose) of {name}"] = sum((_floats(t) for t in intrinsics), ())
        transform = getattr(outputs, "dataparser_transform", None)
        out[f"{split} dataparser transform"] = _floats(transform) + (float(getattr(outputs, "dataparser_scale", 1.0)),)
    return out


# --- the comparison -------------------------------------------------------------------------------------


def _close(a: Value, b: Value, rel_tol: float) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if len(a) != len(b):
        return False
    return all(
        (math.isnan(x) and math.isnan(y)) or abs(x - y) <= rel_tol * max(1.0, abs(x), abs(y)) for x, y in zip(a, b)
    )


def digest(values: Mapping[str, Value]) -> str:
    """A short hash of ``values`` (floats rounded to 4 significant digits): equal values, equal digests."""
    rounded = {k: v if isinstance(v, str) else [f"{x:.4g}" for x in v] for k, v in values.items()}
    return hashlib.sha256(json.dumps(rounded, sort_keys=True).encode()).hexdigest()


def differences(
    per_rank: Sequence[Mapping[str, Value]], rel_tol: float = FLOAT_REL_TOL
) -> Dict[str, List[Optional[Value]]]:
    """The keys whose value is not the same on every rank, each with every rank's value (None: the rank
    has no such key), in the order of rank 0's keys, then the others'. Floats compare within ``rel_tol``."""
    keys: List[str] = []
    seen = set()
    for values in per_rank:
        for key in values:
            if key not in seen:
                seen.add(key)
                keys.append(key)
    out: Dict[str, List[Optional[Value]]] = {}
    for key in keys:
        column = [values.get(key) for values in per_rank]
        first = column[0]
        if any(
            (v is None) != (first is None) or (v is not None and first is not None and not _close(first, v, rel_tol))
            for v in column
        ):
            out[key] = column
    return out


def _ranks(ranks: List[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _shown(value: Optional[Value], first_difference: int) -> str:
    if value is None:
        return "absent"
    if isinstance(value, str):
        return value
    if first_difference >= len(value):
        return f"{len(value)} numbers"
    return f"number {first_difference + 1} of {len(value)} = {value[first_difference]:.6g}"


def _first_difference(values: Sequence[Optional[Value]], rel_tol: float) -> int:
    """The first position where float tuples differ (0 for strings)."""
    tuples = [v for v in values if v is not None and not isinstance(v, str)]
    for i in range(max((len(v) for v in tuples), default=0)):
        column = [v[i] for v in tuples if i < len(v)]
        if len(column) < len(tuples) or not all(_close((column[0],), (x,), rel_tol) for x in column):
            return i
    return 0


def describe_difference(name: str, column: Sequence[Optional[Value]], rel_tol: float = FLOAT_REL_TOL) -> str:
    """``--max-num-iterations: 40 on rank 0; 80 on rank 1``: each distinct value with the ranks that have it
    (for numbers, the first one that differs)."""
    groups: List[Tuple[Optional[Value], List[int]]] = []
    for rank, value in enumerate(column):
        for group_value, ranks in groups:
            same = value is None and group_value is None
            same = same or (value is not None and group_value is not None and _close(value, group_value, rel_tol))
            if same:
                ranks.append(rank)
                break
        else:
            groups.append((value, [rank]))
    first = _first_difference([value for value, _ in groups], rel_tol)
    return f"{name}: " + "; ".join(f"{_shown(value, first)} on {_ranks(ranks)}" for value, ranks in groups)


def describe_differences(
    diffs: Mapping[str, Sequence[Optional[Value]]], name_of=lambda key: key, shown: int = SHOWN
) -> str:
    """The first ``shown`` differences, one per line, and how many more there are."""
    lines = [describe_difference(name_of(key), column) for key, column in list(diffs.items())[:shown]]
    if len(diffs) > shown:
        lines.append(f"and {len(diffs) - shown} more difference{'s' if len(diffs) - shown > 1 else ''}")
    return "\n  ".join(lines)


# --- the agreement -----------------------------------------------------------------------------------


def agree(values: Mapping[str, Value]) -> Dict[str, List[Optional[Value]]]:
    """Every rank's ``values`` compared: {} when they agree (one gather of a digest); else what differs,
    the same on every rank (a second gather, of the values). Every rank must call it at the same point."""
    if not collectives.is_distributed():
        return {}
    digests = collectives.all_gather_object(digest(values))
    if len(set(digests)) == 1:
        return {}
    return differences(collectives.all_gather_object(dict(values)))


def agree_on_options(config: Any) -> None:
    """Every rank has the same options (the trainer config as parsed), or :class:`RanksDisagreeError` on every rank."""
    if not collectives.is_distributed():
        return
    diffs = agree(option_values(config))
    if diffs:
        raise RanksDisagreeError(
            f"the {collectives.get_world_size()} ranks were started with different options:\n  "
            + describe_differences(diffs, option_name),
            "start every rank with the same command line (check the script or job step that starts the ranks: "
            "torchrun and srun pass every rank the same arguments)",
        )


def agree_on_dataset(splits: Mapping[str, Any], data: Any) -> None:
    """Every rank reads the same dataset (see :func:`dataset_values`), or :class:`RanksDisagreeError` on every rank."""
    if not collectives.is_distributed():
        return  # one process: nothing to compare, and no photo bytes to read at start-up
    diffs = agree(dataset_values(splits))
    if diffs:
        raise RanksDisagreeError(
            f"the {collectives.get_world_size()} ranks read different datasets at --data {data}:\n  "
            + describe_differences(diffs),
            "every rank must read the same photos and cameras: on several nodes, put the dataset on a filesystem "
            "every node sees, or make every node's copy identical (e.g. with rsync), then start again",
        )
