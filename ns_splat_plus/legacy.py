"""Old module names (0.1.0's flat package, and modules renamed since), for files that still name them.

Run directories written before a module moved hold ``config.yml`` files whose YAML names classes by
module (``!!python/object:ns_splat_plus.trainer.SplatPlusTrainerConfig``); ns-eval, ns-viewer,
ns-export and resume load them through these aliases. Every dataclass config that moves gets its
old module here. Nothing new should import the old names. Checkpoints name no classes (tensors and
plain containers, loaded with ``weights_only=True``).

:func:`install` (called from ``ns_splat_plus/__init__.py``) puts one placeholder module in ``sys.modules``
under each old name, and nothing else: no import hook (nerfstudio imports every plugin in every ``ns-*``
command, so a finder on ``sys.meta_path`` would sit in the imports of every other method). A placeholder
imports its module of today when one of its names is first read (PyYAML's ``find_python_name`` imports
the module, finds it in ``sys.modules`` and reads the class from it), and leaves that module in its place.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from typing import Any

RENAMED = {
    "ns_splat_plus.config": "ns_splat_plus.method",
    "ns_splat_plus.trainer": "ns_splat_plus.training.trainer",
    "ns_splat_plus.pipeline": "ns_splat_plus.training.pipeline",
    "ns_splat_plus.datamanager": "ns_splat_plus.training.datamanager",
    "ns_splat_plus.devices": "ns_splat_plus.parallel.devices",
    "ns_splat_plus.distributed": "ns_splat_plus.parallel",
    # 0.2.0 -> the layered package (issue 32): the module of SplatPlusViewerConfig
    "ns_splat_plus.viewer.exit_rule": "ns_splat_plus.viewer.config",
}


class AliasModule(types.ModuleType):
    """``sys.modules[old name]`` until a name of it is read: then the module of today (imported by name,
    not by an import statement: this module sits below every layer), which also takes its place there.
    Dunder names (``__file__``, ``__path__``...: what tools that walk ``sys.modules`` read) import nothing."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"{old}: the old name of {new} (ns_splat_plus/legacy.py)")
        self.__spec__ = importlib.machinery.ModuleSpec(old, None)
        self.__dict__["_alias_of"] = new

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        module = importlib.import_module(self.__dict__["_alias_of"])
        if sys.modules.get(self.__name__) is self:
            sys.modules[self.__name__] = module
        return getattr(module, name)


def install() -> None:
    """An :class:`AliasModule` in ``sys.modules`` for each old name not there yet."""
    for old, new in RENAMED.items():
        sys.modules.setdefault(old, AliasModule(old, new))
