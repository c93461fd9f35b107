"""A saved ``config.yml`` checked as it is loaded: every field there, each of the type it was declared with.

ns-eval, ns-viewer, ns-export and ``ns-train --load-config`` read a run's ``config.yml`` with
``yaml.load``, which restores whatever the file says: a hand-edited ``sh_degree: three`` or
``steps_per_save: '10'`` surfaced much later as a ``TypeError`` from deep inside (``can only
concatenate str``, ``unsupported operand for %``), and a file missing whole sections (a trainer
config without ``pipeline``) as an ``AttributeError``. ``SplatPlusTrainerConfig.__setstate__``
(what YAML calls with the file's fields) runs :func:`check_saved_config` first, so that such a file
stops with one message naming the file, the field, its value and the type it needs. A relative ``--data`` in it
is taken from the folder ns-train ran in (:func:`dataset_as_trained`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from pathlib import Path, PurePath
from typing import Any, Iterator, Optional, Tuple

from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.training.inputs import dataset_path

REQUIRED_FIELDS = ("method_name", "experiment_name", "output_dir", "timestamp", "machine", "pipeline", "optimizers")
"""Fields every trainer's config.yml holds (fields added since an older run are not required: they keep defaults)."""


def _load_config_path() -> str:
    from ns_splat_plus.training.uncaught import load_config_argument

    return load_config_argument(sys.argv) or "config.yml"


def _type_ok(value: Any, hint: Any) -> Optional[bool]:
    """Whether ``value`` fits ``hint``; None where the hint is not one this check reads (not checked)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        answers = [_type_ok(value, arg) for arg in typing.get_args(hint)]
        if any(a is True for a in answers):
            return True
        return None if any(a is None for a in answers) else False
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (Path, PurePath):
        return isinstance(value, PurePath)
    return None


def _hints(cls) -> dict:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 (a forward reference this check cannot resolve: that class is not checked)
        return {}


def wrong_fields(obj: Any, prefix: str = "") -> Iterator[Tuple[str, Any, Any]]:
    """(dotted field name, value, declared type) of every field of the dataclass ``obj`` and the
    dataclasses inside it whose value does not fit its declared type."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        if not hasattr(obj, f.name):
            continue  # missing fields: check_saved_config names the top-level ones
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from wrong_fields(value, f"{prefix}{f.name}.")
        elif f.name in hints and _type_ok(value, hints[f.name]) is False:
            yield f"{prefix}{f.name}", value, hints[f.name]


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def check_saved_config(config: Any, state: dict) -> None:
    """Raise UserInputError if ``state`` (the fields YAML read for the trainer config ``config``)
    lacks a field of the trainer config, or holds a value of the wrong type anywhere inside."""
    path = _load_config_path()
    missing = [name for name in REQUIRED_FIELDS if name not in state]
    if missing:
        raise UserInputError(
            f"{path} is not a complete config.yml of a {type(config).__name__}: it has no "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else ""),
            "pass the config.yml that ns-train wrote in the run directory (or restore it from a copy)",
        )
    probe = object.__new__(type(config))
    probe.__dict__.update(state)
    wrong = list(wrong_fields(probe))
    if wrong:
        name, value, hint = wrong[0]
        more = f" (and {len(wrong) - 1} more field(s))" if len(wrong) > 1 else ""
        raise UserInputError(
            f"{path}: {name} is {value!r}, but it must be of type {_type_name(hint)}{more}",
            f"write a value of type {_type_name(hint)} for {name.rsplit('.', 1)[-1]} in {path} (a number, not a word or "
            "a quoted number), or use the config.yml that ns-train wrote",
        )


def method_on_command_line(argv) -> Optional[str]:
    """The method ns-train was given (its first argument, ``ns-train splat-plus-lite ...``), if any."""
    return argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None


def options_beside_load_config(argv) -> list:
    """The command-line arguments that ``ns-train <method> --load-config FILE`` drops: nerfstudio's ns-train
    replaces the whole parsed config with the file's, so every other option given is not used."""
    rest = list(argv[2:] if method_on_command_line(argv) else argv[1:])
    kept = []
    skip_value = False
    for arg in rest:
        if skip_value:
            skip_value = False
        elif arg in ("--load-config", "--load_config"):
            skip_value = True
        elif not arg.startswith(("--load-config=", "--load_config=")):
            kept.append(arg)
    return kept


def check_loaded_method(config: Any, argv) -> None:
    """``ns-train A --load-config <a B run's config.yml>`` trained B silently: refused when A is not B."""
    named = method_on_command_line(argv)
    saved = getattr(config, "method_name", None)
    if named is None or saved is None or named == saved:
        return
    path = _load_config_path()
    raise UserInputError(
        f"--load-config {path} is the config.yml of a {saved} run, but the command line names {named}: "
        f"--load-config trains the saved method with the options saved in the file",
        f"run `ns-train {saved} --load-config {path}` to train {saved} again, or start a {named} run "
        "without --load-config",
    )


def describe_loaded_run(config: Any, argv, run_dir: Path) -> str:
    """The line ``ns-train --load-config`` prints: the method and options the run uses, and what it drops."""
    line = (
        f"--load-config: a new run of {config.method_name} with the options saved in {_load_config_path()}, "
        f"in {run_dir}"
    )
    ignored = options_beside_load_config(argv)
    if ignored:
        line += (
            f"; not used (a --load-config run takes every option from the file; edit a copy of it to change "
            f"them): {' '.join(ignored)}"
        )
    return line


def folder_trained_in(config, load_config: Optional[str]) -> Optional[Path]:
    """The folder ns-train ran in, for a run whose run directory (``--output-dir``/experiment/method/timestamp) is
    relative: where its config.yml (``load_config``) lies, less that run directory; None where the run directory
    is absolute, or the config.yml does not lie at the end of it (a moved or copied run)."""
    if load_config is None:
        return None
    run = Path(config.get_base_dir())
    lies_in = Path(os.path.normpath(Path(load_config).absolute())).parent
    if run.is_absolute() or ".." in run.parts or lies_in.parts[-len(run.parts) :] != run.parts:
        return None
    return Path(*lies_in.parts[: -len(run.parts)])


def dataset_as_trained(config, load_config: Optional[str]) -> Optional[Path]:
    """ns-eval, ns-viewer, ns-export: the run's dataset, a relative ``--data`` taken from the folder ns-train ran in
    (:func:`folder_trained_in`), and set so in ``config``. config.yml keeps ``--data`` as typed, and nerfstudio read
    it from the folder the command runs in: from another folder the run's dataset "did not exist", or another scene
    at that relative path was evaluated without a word. None where there is no dataset."""
    data = dataset_path(config)
    trained_in = folder_trained_in(config, load_config) if data is not None and not data.is_absolute() else None
    if data is None or trained_in is None:
        return data
    as_trained = Path(os.path.normpath(trained_in / data))
    if as_trained != Path(os.path.normpath(data.absolute())):
        CONSOLE.print(
            f"splat-plus: the run's --data {data} is relative to where ns-train ran: reading {as_trained}", markup=False
        )
    datamanager = config.pipeline.datamanager
    if getattr(datamanager, "data", None) is not None:
        datamanager.data = as_trained
    else:
        datamanager.dataparser.data = as_trained
    return as_trained


def dataset_missing(data: Path) -> UserInputError:
    """The error of a run whose dataset ``data`` (as :func:`dataset_as_trained` gives it) does not exist; a relative
    one (the folder ns-train ran in is not known) is named with the folder it was looked for in."""
    if data.is_absolute():
        return UserInputError(
            f"the dataset of this run, {data}, does not exist (moved or renamed?)",
            f"put the dataset back at {data}, or change `data:` in the run's config.yml to where it is now",
        )
    return UserInputError(
        f"the dataset of this run, {data} (relative: looked for from this folder, {Path.cwd()}), does not exist",
        f"run the command from the folder ns-train ran in, put the dataset back at {Path.cwd() / data}, or change "
        "`data:` in the run's config.yml to where it is now",
    )
