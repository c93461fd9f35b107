"""Python bytecode for the benchmark's processes: compiled once, before the first run, where none is on disk.

A Python that writes no bytecode (``PYTHONDONTWRITEBYTECODE=1``) over a ``pip install --no-compile``, as on
the lent GPU machines, compiles every module it imports in every process: on an H200 host, 13.8-20.8 s from
process start to the warmup against 7.3-9.3 s with bytecode on disk
(benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite, 2026-11-29-h200-host-work). A user's
``pip install`` leaves bytecode, so a process wall without it is not a user's. Python reads bytecode that is on
disk whatever PYTHONDONTWRITEBYTECODE says, so compiling it once (:func:`compile_bytecode` over
:func:`bytecode_roots`) serves every later process. Whether it is there: :func:`splatbench.recorder.bytecode_cached`.
"""

from __future__ import annotations

import compileall
import importlib.util
import sysconfig
import time
from pathlib import Path
from typing import List, Sequence, Tuple

START_UP_PACKAGES = ("nerfstudio", "torch", "gsplat", "ns_splat_plus")
"""Packages an ns-train process imports before its first step; each one's installation directory is compiled."""


def bytecode_roots(packages: Sequence[str] = START_UP_PACKAGES) -> List[Path]:
    """The directories to compile: the standard library, and the site directory of each of ``packages``
    (the directory that holds it and its neighbours: nerfstudio's dependencies beside it). A package with
    no ``.dist-info`` folder beside it (an editable checkout) gives its own folder instead."""
    roots = [Path(sysconfig.get_paths()["stdlib"])]
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations)))
        site = folder.parent
        installed = any(p.suffix == ".dist-info" for p in site.iterdir()) if site.is_dir() else False
        root = site if installed else folder
        if root not in roots and not any(r in root.parents for r in roots):
            roots.append(root)
    return roots


def compile_bytecode(roots: Sequence[Path], workers: int = 0) -> Tuple[bool, float]:
    """Writes the bytecode of every ``.py`` under ``roots`` whose bytecode is missing or stale.

    Args:
        roots: directories (:func:`bytecode_roots`).
        workers: processes for compileall (0: one per core).

    Returns:
        (whether every file compiled: some packages ship test files that do not, seconds taken).
    """
    started = time.perf_counter()
    ok = True
    for root in roots:
        ok = bool(compileall.compile_dir(str(root), quiet=1, workers=workers)) and ok
    return ok, time.perf_counter() - started
