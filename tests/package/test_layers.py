"""The package's layers point one way, and no modules import each other in a circle.

Every module of ``ns_splat_plus`` belongs to one layer (docs/development.md, "Layers"); a module may
import from its own layer and the layers below it, never from one above. Imports inside functions
count too: a lazy import still makes the lower layer depend on the higher one. The import graph,
lazy imports included, has no cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ns_splat_plus"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "development.md"

LAYERS = [
    "errors",
    "upstream",
    "parallel",
    "kernels",
    "raster",
    "strategy",
    "model",
    "evaluation",
    "training",
    "viewer",
    "method",
    "demo",
]
"""Lower to higher, the order of docs/development.md."""

ROOT = ("ns_splat_plus", "ns_splat_plus.legacy")
"""Below every layer: Python runs the package's ``__init__`` before any of its modules, so it (and
``legacy.py``, which it installs) may import nothing else of the package. legacy.py's aliases reach
the renamed modules by name, at load time, not by an import statement."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    """The layer index of ``module`` (-1 for the package root and legacy.py); KeyError if none."""
    if module in ROOT:
        return -1
    top = module.split(".")[1]
    return LAYERS.index(top) if top in LAYERS else _unmapped(module)


def _unmapped(module: str) -> int:
    raise KeyError(f"{module} belongs to no layer: add its top-level name to LAYERS and docs/development.md")


def imports_of(module: str, path: Path, known: Set[str]) -> Iterator[str]:
    """The package modules ``module`` imports, at module level or inside functions; ``from P import
    name`` counts as importing ``P.name`` when that is a module, else ``P``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, known)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            if base is None:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield from _known(submodule if submodule in known else base, known)


def _absolute(module: str, is_package: bool, name: Optional[str], level: int) -> Optional[str]:
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _known(name: str, known: Set[str]) -> Iterator[str]:
    # `import ns_splat_plus.raster.reference` names a known module; `import torch` none
    while name and name not in known:
        name = name.rpartition(".")[0]
    if name.startswith("ns_splat_plus"):
        yield name


def import_graph() -> Dict[str, Set[str]]:
    modules = _modules()
    known = set(modules)
    graph: Dict[str, Set[str]] = {}
    for module, path in modules.items():
        # an edge to its own package's __init__ counts: a name taken from there may not exist yet
        graph[module] = {target for target in imports_of(module, path, known) if target != module}
    return graph


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    return sorted(
        f"{module} ({_layer_name(module)}) imports {target} ({_layer_name(target)})"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def _layer_name(module: str) -> str:
    return "root" if layer_of(module) < 0 else LAYERS[layer_of(module)]


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(module: str) -> Optional[List[str]]:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_every_module_belongs_to_a_layer():
    unmapped = []
    for module in _modules():
        try:
            layer_of(module)
        except KeyError as err:
            unmapped.append(str(err))
    assert not unmapped, unmapped


def test_no_module_imports_from_a_higher_layer():
    assert not (offenders := upward_imports(import_graph())), "\n".join(offenders)


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_graph_sees_lazy_relative_and_from_imports():
    """The checks above are only as good as the graph: it must see every form of import."""
    graph = import_graph()
    assert "ns_splat_plus.errors" in graph["ns_splat_plus.upstream"]  # from ns_splat_plus.errors import ...
    assert "ns_splat_plus.parallel.collectives" in graph["ns_splat_plus.parallel.gradients"]  # from P import module
    assert "ns_splat_plus.parallel.launch" in graph["ns_splat_plus.parallel.replicas"]  # inside a function
    assert "ns_splat_plus.legacy" in graph["ns_splat_plus"]
    assert graph["ns_splat_plus.legacy"] == set()


def test_a_lazy_upward_import_and_a_cycle_are_caught(tmp_path):
    fake = {
        "ns_splat_plus.parallel.a": {"ns_splat_plus.parallel.b"},
        "ns_splat_plus.parallel.b": {"ns_splat_plus.parallel.a"},
        "ns_splat_plus.raster.c": {"ns_splat_plus.model.d"},
        "ns_splat_plus.model.d": set(),
    }
    assert find_cycle(fake) == ["ns_splat_plus.parallel.a", "ns_splat_plus.parallel.b", "ns_splat_plus.parallel.a"]
    assert upward_imports(fake) == ["ns_splat_plus.raster.c (raster) imports ns_splat_plus.model.d (model)"]


def test_the_order_is_written_in_the_development_docs():
    text = DOCS.read_text()
    assert "## Layers" in text
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\. `(\w+)`", section, flags=re.MULTILINE)  # "1. `errors` (...): ..."
    assert listed == LAYERS, f"docs/development.md lists {listed}"
    assert "tests/package/test_layers.py" in section


@pytest.mark.parametrize("module", ["ns_splat_plus.bench.cli", "ns_splat_plus.synthetic"])
def test_a_module_outside_the_layers_is_named(module):
    with pytest.raises(KeyError, match="belongs to no layer"):
        layer_of(module)
