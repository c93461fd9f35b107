"""Whether this process is a splat-plus command, read from nerfstudio 1.1.5's command line: :func:`splat_plus_command`.

nerfstudio imports every installed plugin's entry point in every ``ns-*`` command, before it parses its
command line: ``ns-train nerfacto`` imports ``ns_splat_plus.method`` too. What changes the whole process
(``sys.excepthook``, a logger's filters) is set up only where :func:`splat_plus_command` says this
process runs splat-plus, so that other methods run as they would without the plugin:

* ``ns-train <method> ...`` (also as a torchrun worker or a spawned rank, which keep the command line):
  ``<method>`` is ``argv[1]``, one of splat-plus's methods;
* ``--load-config X`` (ns-eval, ns-viewer, ns-export, ``ns-train --load-config``, where nerfstudio runs the
  file's method whatever was asked): X's ``method_name`` is not another method installed here. A file
  that is missing, unreadable or of a method installed nowhere here also counts: no other method runs, and
  the command ends on that file with splat-plus's message naming it (``training/uncaught.py``).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from pathlib import Path
from typing import FrozenSet, List, Optional, Set

PACKAGE = "ns_splat_plus"
METHOD_PREFIX = "splat-plus"
"""Every splat-plus method is named ``splat-plus`` or ``splat-plus-<variant>`` (pyproject.toml's entry points)."""

_METHOD_NAME = re.compile(r"^method_name:[ \t]*(['\"]?)(?P<name>[^'\"\n#]*?)\1[ \t]*$", re.MULTILINE)
"""The top-level ``method_name`` line of a config.yml (PyYAML writes a dataclass's fields one per line)."""


def option_value(argv: List[str], option: str) -> Optional[str]:
    """The value of ``option`` (``--load-config``; also written ``--load_config``) on the command line, if any."""
    for i, arg in enumerate(argv):
        for name in (option, option.replace("-", "_").replace("__", "--", 1)):
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


_NOT_REPEATED_ON_RESUME = ("--load-dir", "--load-step", "--load-checkpoint", "--timestamp")
"""Options of a run's command line that its resume command drops: it loads the newest checkpoint of the run's
folder, and an explicit ``--timestamp`` would name the run's own folder, which a new run may not reuse."""


def resume_command(argv: List[str], method_name: Optional[str], load_dir: Path) -> Optional[str]:
    """The ``ns-train`` command line ``argv`` (``sys.argv``) as the command that resumes its run from ``load_dir``:
    every option as typed, ``--load-dir load_dir`` after the method, quoted for a POSIX shell; None where ``argv``
    is not ``ns-train <method_name> ...``, or loads its options from a file (``--load-config``, which ignores a
    ``--load-dir`` beside it): then the caller names the options in words."""
    if method_name is None or argv[1:2] != [method_name] or option_value(argv, "--load-config") is not None:
        return None
    kept: List[str] = []
    takes_value = False
    for arg in argv[2:]:
        if takes_value:  # the value of a dropped option
            takes_value = False
            continue
        name = arg.split("=", 1)[0].replace("_", "-")
        if name in _NOT_REPEATED_ON_RESUME:
            takes_value = "=" not in arg
            continue
        kept.append(arg)
    return shlex.join(["ns-train", method_name, "--load-dir", str(load_dir), *kept])


def saved_method_name(config_yml: str) -> Optional[str]:
    """The ``method_name`` a config.yml names, read as text (nothing is imported or built); None if the file is
    missing, unreadable or names none."""
    try:
        text = Path(config_yml).read_text(errors="replace")
    except (OSError, ValueError):
        return None
    found = _METHOD_NAME.search(text)
    name = found.group("name").strip() if found else ""
    return name if name not in ("", "null", "~") else None


@functools.lru_cache(maxsize=None)
def _entry_points() -> tuple:
    from importlib.metadata import entry_points

    return tuple(entry_points(group="nerfstudio.method_configs"))


@functools.lru_cache(maxsize=None)
def our_method_names() -> FrozenSet[str]:
    """The methods splat-plus's entry points register (``splat-plus``, ``splat-plus-mcmc``...)."""
    return frozenset(ep.name for ep in _entry_points() if ep.value.split(":")[0].split(".")[0] == PACKAGE)


def is_our_method(name: str) -> bool:
    ours = our_method_names()
    return name in ours if ours else name == METHOD_PREFIX or name.startswith(METHOD_PREFIX + "-")


def other_method_names() -> Set[str]:
    """The methods nerfstudio knows in this process other than splat-plus's: its own (``method_configs.method_configs``,
    filled before it loads the plugins' entry points, which is when splat-plus is imported), the other plugins'
    entry points, ``NERFSTUDIO_METHOD_CONFIGS`` and its list of external methods (nerfstudio 1.1.5)."""
    names = {ep.name for ep in _entry_points()}
    configs = sys.modules.get("nerfstudio.configs.method_configs")
    names.update(getattr(configs, "method_configs", None) or {})
    names.update(d.split("=")[0] for d in os.environ.get("NERFSTUDIO_METHOD_CONFIGS", "").split(",") if "=" in d)
    try:
        # the list's slugs, not get_external_methods(): that builds a dummy config per slug, whose __post_init__
        # reads the source of every frame on the stack (inspect.stack()): 60-70 s of a nerfacto ns-eval here
        from nerfstudio.configs.external_methods import external_methods

        names.update(slug for method in external_methods for slug, _ in method.configurations)
    except Exception:  # noqa: BLE001 (a nerfstudio without that list: its other methods are still named above)
        pass
    return {name for name in names if not is_our_method(name)}


def splat_plus_command(argv: Optional[List[str]] = None) -> bool:
    """Whether the command line ``argv`` (``sys.argv``) runs splat-plus (see the module's docstring)."""
    argv = sys.argv if argv is None else argv
    config = option_value(argv, "--load-config")
    if config is not None:
        method = saved_method_name(config)
        return method is None or is_our_method(method) or method not in other_method_names()
    return len(argv) > 1 and is_our_method(argv[1])


_NERFSTUDIO_ENTRY_FILES = ("nerfstudio/scripts/", "nerfstudio/utils/eval_utils.py")
"""nerfstudio 1.1.5's command entry points (ns-train, ns-eval, ns-viewer, ns-export) and the loader they share."""
_CONFIG_LOADERS = (("nerfstudio/utils/eval_utils.py", "eval_setup"), ("nerfstudio/scripts/train.py", "main"))
"""(file, function) of nerfstudio 1.1.5 that load a ``--load-config``: ns-eval's, ns-viewer's and ns-export's
``eval_setup``, ns-train's ``main``."""


def raised_while_loading_the_config(tb) -> bool:
    """Whether the innermost frame of nerfstudio's entry points in the traceback ``tb`` is one that loads the
    config: an error raised from a script's own work after that (ns-export cameras' pose collection, ns-train's
    training loop) is not the config's fault, and was blamed on it."""
    import traceback

    entries = [
        frame
        for frame in traceback.extract_tb(tb)
        if any(d in frame.filename.replace("\\", "/") for d in _NERFSTUDIO_ENTRY_FILES)
    ]
    if not entries:
        return False
    innermost = entries[-1]
    return any(
        innermost.filename.replace("\\", "/").endswith(file) and innermost.name == name
        for file, name in _CONFIG_LOADERS
    )
