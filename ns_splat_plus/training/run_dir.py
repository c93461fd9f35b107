"""The run directory: created exclusively, so that no run overwrites or deletes another's files.

nerfstudio names a run ``<output-dir>/<experiment>/<method>/<timestamp>`` with a timestamp to the
second: two runs of a sweep started in the same second shared one directory (one config
overwritten, one final checkpoint deleted by the other's keep-only-latest cleanup, both writing
``densification.jsonl``). :func:`claim` creates the directory atomically and, for an automatic
timestamp, adds ``-1``, ``-2``... until it gets a directory of its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.training.outputs import highest_missing, remove_empty_folders

MAX_SUFFIX = 1000
OWN_FILES = {"config.yml"}
"""What ns-train writes before training starts: a run directory holding only these is unused."""

_made_by_claim: Dict[Path, Path] = {}
"""{run directory: the highest folder :func:`claim` made on the way to it} (``--output-dir`` itself where it did
not exist): :func:`discard_if_unused` removes those too, so a start-up error leaves no empty folder behind."""


def claim(config, explicit_timestamp: bool) -> str:
    """Create ``config``'s run directory exclusively; returns the timestamp that names it.

    ``explicit_timestamp``: the user passed ``--timestamp``; then an existing directory is an error
    rather than a renamed one (the user asked for that name).
    """
    output_dir = Path(config.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise UserInputError(f"--output-dir {output_dir} is a file, not a directory: pass a directory")
    base = config.timestamp
    for i in range(MAX_SUFFIX):
        config.timestamp = base if i == 0 else f"{base}-{i}"
        run_dir = config.get_base_dir()
        made = highest_missing(run_dir.parent.absolute())
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(run_dir)  # atomic: exactly one process creates it
            if made is not None:
                _made_by_claim[run_dir.absolute()] = made
            return config.timestamp
        except FileExistsError:
            if explicit_timestamp:
                raise UserInputError(
                    f"the run directory {run_dir} already exists (--timestamp {base}): pick another "
                    "--timestamp or --experiment-name, so that no run overwrites another's files"
                ) from None
        except NotADirectoryError:
            raise UserInputError(f"cannot create the run directory {run_dir}: a parent is a file") from None
    raise UserInputError(
        f"{MAX_SUFFIX} runs already use {config.get_base_dir().parent}/{base}*: pick another --experiment-name"
    )


def loaded_from_config_file(argv) -> bool:
    """Whether ns-train was given ``--load-config``: the config then carries the saved run's timestamp,
    which names that run's directory, not a ``--timestamp`` the user chose."""
    return any(arg.split("=", 1)[0] in ("--load-config", "--load_config") for arg in argv[1:])


SETUP_FILES = ("events.out.tfevents.", "densification.jsonl", "dataparser_transforms.json")
"""Name prefixes of what the trainer's set-up writes before the first step (TensorBoard's event file, the
densification records' start line, the dataparser transform): with ``also=SETUP_FILES``, a run stopped
before its first step counts as unused."""


RANK_RECORDS = "ranks"
"""The folder of per-rank records a run of several ranks writes at start-up (``rank_record``'s start-up record,
``replicas``' checksums): with ``also``, one that holds only files counts as unused too."""


def _unused(entry: Path, also: tuple) -> bool:
    if entry.is_file():
        return entry.name in OWN_FILES or entry.name.startswith(tuple(also))
    return bool(also) and entry.name == RANK_RECORDS and entry.is_dir() and all(e.is_file() for e in entry.iterdir())


def discard_if_unused(run_dir: Path, also: tuple = ()) -> None:
    """Remove ``run_dir`` if training never wrote into it (a start-up error), leaving nothing behind: nor its
    ``<experiment>/<method>`` folders, nor the folders up to ``--output-dir`` that :func:`claim` made for it,
    where they are empty (no other run is in them); ``also``: name prefixes that count as unused too
    (:data:`SETUP_FILES`, where no step ran)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    entries = list(run_dir.iterdir())
    if all(_unused(e, also) for e in entries):
        for entry in entries:
            if entry.is_dir():  # the rank records (a run of several ranks stopped before its first step)
                for record in entry.iterdir():
                    record.unlink()
                entry.rmdir()
            else:
                entry.unlink()
        run_dir.rmdir()
        # the start-up lines named it ("Config: <run>/config.yml", "Saving checkpoints to"): say it is gone
        sys.stderr.write(f"splat-plus: nothing was trained, so the run folder {run_dir} was removed\n")
        parents = run_dir.absolute().parents  # <method>, <experiment>, ..., --output-dir, ...
        made = _made_by_claim.pop(run_dir.absolute(), None)
        remove_empty_folders(parents[0], up_to=made if made is not None and made in parents[2:] else parents[1])
