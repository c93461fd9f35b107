"""The versions splat-plus was written for, and the once-per-process warnings and probes of
private APIs that have a fallback (:func:`probe`); see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import itertools
from importlib import metadata
from typing import Callable, Dict, Optional, Tuple

from nerfstudio.utils.rich_utils import CONSOLE

SUPPORTED_VERSIONS: Dict[str, Tuple[str, ...]] = {"nerfstudio": ("1.1.5",), "gsplat": ("1.4.0",)}
"""The versions every touch point of :mod:`ns_splat_plus.upstream` was written against and tested with."""
VERSION_BOUNDS: Dict[str, Tuple[str, str]] = {"torch": ("2.6", "2.16"), "triton": ("3.2", "3.10")}
"""[lowest, below) of the torch and Triton versions whose private APIs this module reads (as pyproject.toml)."""


def installed_version(distribution: str) -> Optional[str]:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def release(version: str) -> Tuple[int, ...]:
    """``"2.14.1+cu130"`` -> (2, 14, 1), ``"2.16"`` -> (2, 16, 0): the leading numbers of a version."""
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers + [0] * (3 - len(numbers)))


WARNED: set = set()


def warn_once(key: str, message: str) -> None:
    """One yellow console line per ``key`` and process."""
    if key not in WARNED:
        WARNED.add(key)
        CONSOLE.print(f"[yellow]splat-plus: {message}[/yellow]")


PROBES: Dict[str, Optional[str]] = {}
"""Per private API with a fallback, why it cannot be used (None: it can); probed once per process."""


def probe(name: str, find_problem: Callable[[], Optional[str]], fallback: str) -> bool:
    """Whether the private API ``name`` can be used: ``find_problem()`` (why not, or None) runs once per
    process; where it finds one (or raises), one warning names it and the ``fallback`` taken."""
    if name not in PROBES:
        try:
            PROBES[name] = find_problem()
        except Exception as err:  # the probe itself broke: the API changed in some other way
            PROBES[name] = f"{type(err).__name__}: {err}"
    if PROBES[name] is not None:
        warn_once(f"probe:{name}", f"{PROBES[name]}: {fallback}")
    return PROBES[name] is None
