"""Old module names (0.1.0's flat package, and modules renamed since), for files that still name them.

Run directories written before a module moved hold ``config.yml`` files whose YAML names classes by
module (``!!python/object:ns_splat_plus.trainer.SplatPlusTrainerConfig``); ns-eval, ns-viewer,
ns-export and resume load them through these aliases. Every dataclass config that moves gets its
old module here. Installed once, from ``ns_splat_plus/__init__.py``; nothing new should import the
old names. Checkpoints name no classes (tensors and plain containers, loaded with ``weights_only=True``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

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


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in RENAMED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def __init__(self) -> None:
        self._real = {}

    def create_module(self, spec):
        module = importlib.import_module(RENAMED[spec.name])
        self._real[spec.name] = (module.__spec__, getattr(module, "__loader__", None))
        return module  # the new module itself answers to the old name

    def exec_module(self, module) -> None:
        # importlib stamped the alias spec on the module: give it back its own
        for alias, (spec, loader) in self._real.items():
            if sys.modules.get(alias) is module:
                module.__spec__, module.__loader__ = spec, loader


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
