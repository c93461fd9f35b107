"""torchmetrics 1.x imported as where ``transformers`` is not installed: :func:`import_torchmetrics`.

torchmetrics imports ``transformers`` at its own import wherever transformers >= 4.4 is installed, for text and
CLIP metrics (BERTScore, InfoLM, CLIPScore) that splat-plus never uses: it uses torchmetrics' PSNR and LPIPS. On
the GPU machine that made the first torchmetrics import of ``ns-eval`` 9.0 s instead of about 1 s, and a
transformers that cannot be imported (a broken or mismatched install) makes it fail.

torchmetrics decides through lightning-utilities' ``RequirementCache``, which reads the installed version with
``importlib.metadata.version`` (imported in ``lightning_utilities.core.imports`` as ``_version``; written for
lightning-utilities 0.15 and torchmetrics 1.9). While splat-plus imports torchmetrics, that lookup answers
"not installed" for transformers alone, a configuration torchmetrics supports: its text and CLIP metrics are
then absent from this process's torchmetrics. Where the name is missing (another lightning-utilities), or
torchmetrics was imported already, torchmetrics is imported as it is.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from importlib.metadata import PackageNotFoundError
from typing import Any, Iterator

__all__ = ["import_torchmetrics"]

UNSEEN_PACKAGES = frozenset({"transformers"})
"""Distributions that torchmetrics' import does not see (names as ``importlib.metadata`` takes them)."""


def import_torchmetrics() -> None:
    """Import torchmetrics, once per process, without the packages in :data:`UNSEEN_PACKAGES`. Call it before
    the first ``from torchmetrics ... import``."""
    if "torchmetrics" in sys.modules:
        return
    with _packages_unseen(UNSEEN_PACKAGES):
        importlib.import_module("torchmetrics")


@contextlib.contextmanager
def _packages_unseen(names: frozenset) -> Iterator[None]:
    try:
        requirements: Any = importlib.import_module("lightning_utilities.core.imports")
    except ImportError:
        requirements = None
    installed_version = getattr(requirements, "_version", None)
    if installed_version is None:
        yield
        return

    def version(distribution_name: str) -> str:
        if distribution_name.lower().replace("_", "-") in names:
            raise PackageNotFoundError(distribution_name)
        return installed_version(distribution_name)

    requirements._version = version
    try:
        yield
    finally:
        requirements._version = installed_version
