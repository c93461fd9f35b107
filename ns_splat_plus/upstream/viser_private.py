"""viser 0.2.7 (the version nerfstudio 1.1.5 pins): its icons read from one index of their tar; see
:mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import importlib
import tarfile
from typing import Callable, Dict, Tuple

from ns_splat_plus.upstream.command_line import splat_plus_command
from ns_splat_plus.upstream.versions import installed_version

VISER_VERSION = "0.2.7"
"""The viser whose ``_icons.svg_from_icon`` :func:`read_icons_from_one_index` replaces (viser fixed it after it)."""
ICON_READERS = ("viser._icons", "viser._gui_api", "viser._gui_handles")
"""The modules that hold ``svg_from_icon`` (the last two import it by name)."""


def indexed_svg_from_icon(tarball) -> Callable[[str], str]:
    """An ``svg_from_icon`` that reads each icon of ``tarball`` at its offset from one index of the tar
    (built at the first icon asked for): the bytes viser's own returns."""
    index: Dict[str, Tuple[int, int]] = {}

    def svg_from_icon(icon_name: str) -> str:
        assert isinstance(icon_name, str)
        if not index:
            with tarfile.open(tarball) as tar:
                index.update({m.name: (m.offset_data, m.size) for m in tar.getmembers() if m.isfile()})
        offset, size = index[f"{icon_name}.svg"]
        with open(tarball, "rb") as f:
            f.seek(offset)
            return f.read(size).decode("utf-8")

    svg_from_icon.reads_one_index = True  # type: ignore[attr-defined]
    return svg_from_icon


def read_icons_from_one_index() -> bool:
    """viser 0.2.7's ``svg_from_icon`` opens the tar of its 4,285 icons and reads its headers from the start
    for every icon (tarfile finds a member only by reading those before it): 0.08 s per icon on the
    development machine, 1.27 s for the 16 that nerfstudio's viewer asks for before the first step.
    viser's pull request 303 ("Faster icons") fixed it after 0.2.7. Here the icons are read from one
    index of the tar instead, in splat-plus commands only, and with viser 0.2.7 only. Returns whether
    they are."""
    if installed_version("viser") != VISER_VERSION:
        return False
    modules = [importlib.import_module(name) for name in ICON_READERS]
    if getattr(modules[0].svg_from_icon, "reads_one_index", False):
        return True
    svg_from_icon = indexed_svg_from_icon(modules[0].ICONS_DIR / "tabler-icons.tar")
    for module in modules:
        module.svg_from_icon = svg_from_icon  # type: ignore[attr-defined]
    return True


if splat_plus_command():  # nerfstudio imports splat-plus (its entry points) before it builds a viewer
    read_icons_from_one_index()
