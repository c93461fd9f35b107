"""Where a run writes: checked before the work starts, and the disk's free space before each checkpoint.

A read-only or full disk was found only when a file was written: ns-train died on ``config.yml``
with a raw ``OSError``, ns-eval after the whole evaluation, and a training run whose disk filled
before its first checkpoint trained every step and then lost them all. Here:

* :func:`check_writable` writes (and removes) a small probe file where an output will go, so that a
  read-only file system, a missing permission or a full disk stop the command at once, naming the
  option and the path;
* :func:`check_room_for_checkpoint` compares the free space with the size of the next checkpoint
  (the size of the last one, or an estimate from the model): "disk full" before training starts,
  and before each save, where a checkpoint still fits while a second one would not.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Optional

from ns_splat_plus.errors import SplatPlusError, UserInputError
from ns_splat_plus.upstream import TrainerLike

PROBE_BYTES = 64 * 1024
"""Written by the probe: a disk with less than this free is full for any output."""

MIN_FREE_ENV = "NS_SPLAT_PLUS_MIN_FREE_BYTES"
"""Extra free space (bytes) every check asks for; tests set it huge to stand in for a full disk."""


class DiskFullError(SplatPlusError):
    """Not enough free space for the next output (exit status 1)."""


def _existing_ancestor(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def highest_missing(folder: Path) -> Optional[Path]:
    """The highest of ``folder`` (absolute) and its parents that does not exist: what ``mkdir(parents=True)``
    makes first; None where ``folder`` exists."""
    missing = None
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing = path
    return missing


def remove_empty_folders(folder: Path, up_to: Path) -> None:
    """Remove ``folder`` and its parents up to ``up_to`` (included), each while it is empty: a folder made for an
    output that was never written, and nothing that holds another run's files."""
    for path in (folder, *folder.parents):
        try:
            path.rmdir()
        except OSError:  # not empty, or already gone: kept, and every folder above it
            return
        if path == up_to:
            return


def free_bytes(path: Path) -> int:
    """Free bytes (for this user) on the disk that holds ``path`` or its nearest existing parent."""
    return shutil.disk_usage(_existing_ancestor(path)).free


def _extra_free() -> int:
    try:
        return max(0, int(os.environ.get(MIN_FREE_ENV, "0")))
    except ValueError:
        return 0


def check_output_file_type(path: Path, option: str, suffix: Optional[str]) -> None:
    """Stop with one message if the file ``path`` must end in ``suffix`` (ns-eval's ``.json``) and does not, or is
    a folder: checked before the command's work, which nerfstudio only checks after it (None: any file)."""
    if suffix is None:
        return
    path = Path(path)
    if path.is_dir():
        raise UserInputError(
            f"{option} {path} is a folder, not a {suffix} file",
            f"pass a file in it: {option} {path / ('metrics' + suffix)}",
        )
    if path.suffix != suffix:
        raise UserInputError(f"{option} {path} must be a {suffix} file", f"pass {option} {path.with_suffix(suffix)}")


def check_writable(path: Path, option: str, is_file: bool = False) -> None:
    """Stop with one message if ``path`` (a directory, or a file if ``is_file``) cannot be written:
    a probe file goes into the nearest existing folder (nothing is created on the way)."""
    path = Path(path)
    folder = _existing_ancestor(path.parent if is_file else path)
    if not folder.is_dir():
        where = f"{option} {path}" + (f": {folder}" if folder != path else "")
        raise UserInputError(f"{where} is a file, not a folder", f"pass another {option}")
    probe = folder / f".splat-plus-write-probe-{uuid.uuid4().hex}"
    try:
        # created before the free space is read: a read-only file system (which may report 0 bytes
        # free, as sysfs and squashfs do) or a missing permission is named as such, not as a full disk
        with open(probe, "wb") as f:
            free = free_bytes(folder)
            if free < PROBE_BYTES + _extra_free():
                raise DiskFullError(
                    f"disk full: {option} {path} is on a disk with {free / 2**20:.1f} MiB free",
                    f"free disk space, or pass an {option} on another disk",
                )
            f.write(b"\0" * PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(
                f"disk full: {option} {path} cannot be written (No space left on device)",
                f"free disk space, or pass an {option} on another disk",
            ) from None
        raise UserInputError(
            f"{option} {path} cannot be written: {exc.strerror} ({folder})",
            f"pass an {option} on a disk this user can write",
        ) from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def check_room_for_checkpoint(checkpoint_dir: Path, expected_bytes: int, step: Optional[int] = None) -> None:
    """Stop with "disk full" if the next checkpoint (about ``expected_bytes``) does not fit in
    ``checkpoint_dir``'s disk; ``step``: the step about to be saved (None: before training)."""
    free = free_bytes(checkpoint_dir)
    needed = expected_bytes + _extra_free()
    if free >= needed:
        return
    when = "before training" if step is None else f"at step {step}"
    raise DiskFullError(
        f"disk full {when}: {checkpoint_dir} has {free / 2**20:.1f} MiB free, "
        f"a checkpoint needs about {expected_bytes / 2**20:.1f} MiB",
        "free disk space (or pass an --output-dir on another disk)"
        + ("" if step is None else ", then resume from the last checkpoint named above"),
    )


CHECKPOINTS_OF_ROOM = 2
"""During training, stop (with a checkpoint) once the free space is under this many checkpoints:
the checkpoint then still fits, where waiting for the next save could lose every step since the last."""


CHECKPOINT_OVERHEAD_BYTES = 64 * 1024
"""What a checkpoint holds besides the tensors counted: RNG states, sampler, schedulers, run facts and
torch.save's framing (about 40 KiB on the synthetic scene). It was 1 MiB: on a small model, an estimate
2.5 times the real size stopped runs on a disk with room for several checkpoints."""


def estimate_checkpoint_bytes(params, strategy_state=None) -> int:
    """About the size of a checkpoint of ``params`` (tensors) and the Adam moments of those that train (two per
    parameter that requires grad; a frozen one such as LPIPS's network is saved once), plus the strategy's
    per-Gaussian state (``strategy_state``, its tensors) and :data:`CHECKPOINT_OVERHEAD_BYTES`."""
    param_bytes = sum(p.numel() * p.element_size() * (3 if p.requires_grad else 1) for p in params)
    state_bytes = sum(
        v.numel() * v.element_size() for v in (strategy_state or {}).values() if hasattr(v, "element_size")
    )
    return param_bytes + state_bytes + CHECKPOINT_OVERHEAD_BYTES


def checkpoint_bytes_estimate(trainer: TrainerLike) -> int:
    """About the size of a checkpoint of ``trainer`` now (:func:`estimate_checkpoint_bytes`)."""
    model = trainer.pipeline.model
    return estimate_checkpoint_bytes(model.parameters(), getattr(model, "strategy_state", None))


def low_disk_reason(trainer: TrainerLike) -> Optional[str]:
    """Why training must stop now for the disk (under :data:`CHECKPOINTS_OF_ROOM` checkpoints free), or None."""
    expected = checkpoint_bytes_estimate(trainer)
    free = free_bytes(trainer.checkpoint_dir)
    if free >= CHECKPOINTS_OF_ROOM * expected + _extra_free():
        return None
    return (
        f"a nearly full disk (disk full soon: {free / 2**20:.1f} MiB free on {trainer.checkpoint_dir}, "
        f"under room for {CHECKPOINTS_OF_ROOM} checkpoints of about {expected / 2**20:.1f} MiB: "
        "training stops while this one still fits)"
    )
