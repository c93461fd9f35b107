"""The package's shape: the wheel ships ns_splat_plus and no benchmark code, ns_splat_plus never imports
splatbench, modules stay small and say what they are for, splatbench has no import cycle and all its
modules (the runtime names it takes from ns_splat_plus included) import in a fresh process."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ns_splat_plus"
SPLATBENCH = REPO / "splatbench" / "splatbench"


def _imported(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _dynamic_imports(path: Path):
    """Module names given as string constants to importlib.import_module / __import__."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.args[0].value


def test_ns_splat_plus_imports_nothing_from_splatbench():
    offenders = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in [*_imported(path), *_dynamic_imports(path)]
        if name == "splatbench" or name.startswith("splatbench.")
    ]
    assert not offenders, offenders


@pytest.mark.slow
def test_the_wheel_ships_ns_splat_plus_and_no_benchmark_code(tmp_path):
    """Build the root project's wheel (offline, from a copy of the sources: no stale build/ folder can
    leak into it) and read what it holds: every ns_splat_plus module, nothing of splatbench or of the
    old bench/ and synthetic scene modules."""
    source = tmp_path / "src"
    skip = shutil.ignore_patterns(
        ".git",
        ".venv",
        "build",
        "dist",
        "*.egg-info",
        "__pycache__",
        ".pytest_cache",
        "benchmarks",
        "outputs",
        "test-artifacts",
    )
    shutil.copytree(REPO, source, ignore=skip)
    wheels = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
               "-w", str(wheels), str(source)]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = wheels.glob("ns_splat_plus-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    sources = {str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= set(names), sorted(sources - set(names))
    benchmark_code = [n for n in names if n.startswith("splatbench") or "/bench/" in n or "synthetic" in n]
    assert not benchmark_code, benchmark_code
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"ns_splat_plus"}


def test_modules_are_small_and_say_what_they_are_for():
    modules = sorted(PACKAGE.rglob("*.py")) + sorted(SPLATBENCH.rglob("*.py"))
    assert len(modules) > 60
    too_long = [f"{p.relative_to(REPO)} ({n} lines)" for p in modules if (n := len(p.read_text().splitlines())) > 500]
    assert not too_long, too_long
    undocumented = [str(p.relative_to(REPO)) for p in modules if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not undocumented, undocumented


def test_private_upstream_modules_are_touched_only_in_upstream():
    """gsplat's private modules (cuda._wrapper, cuda._torch_impl, cuda._backend) and nerfstudio's
    comms are reached only through ns_splat_plus/upstream.py."""
    private = ("gsplat.cuda._wrapper", "gsplat.cuda._torch_impl", "gsplat.cuda._backend", "nerfstudio.utils.comms")
    offenders = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "upstream.py"
        for name in _imported(path)
        if name in private or name.startswith("gsplat.cuda._")
    ]
    assert not offenders, offenders


def _splatbench_import_graph():
    """{module: the splatbench modules it imports}, lazy (function-level) imports included."""
    names = {f"splatbench.{p.stem}" for p in SPLATBENCH.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name in sorted(names):
        tree = ast.parse((SPLATBENCH / f"{name.split('.')[1]}.py").read_text())
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "splatbench":  # from splatbench import children
                targets |= {f"splatbench.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = sorted((targets & names) - {name})  # probe's __main__ block imports itself: not a cycle
    return graph


def _cycles(graph):
    """Every import cycle (as a list of modules) that a depth-first search meets."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for target in graph[node]:
            if state.get(target) == "open":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])
    return found


def test_splatbench_has_no_import_cycle():
    graph = _splatbench_import_graph()
    assert len(graph) > 20 and graph["splatbench.outputs"]  # the scan sees the modules and their imports
    assert not _cycles(graph), _cycles(graph)
    assert _cycles({"a": ["b"], "b": ["a"]}) == [["a", "b", "a"]]  # the search itself finds a cycle


@pytest.mark.slow
def test_splatbench_modules_and_runtime_names_import_in_a_fresh_process():
    """Every splatbench module imports (in a process of its own: what the scripts and the probe's children
    do), and so does every ns_splat_plus name splatbench.runtime takes: it breaks here when a runtime
    module moves, not in a benchmark on the device."""
    code = (
        "import importlib, pkgutil, splatbench\n"
        "for info in pkgutil.iter_modules(splatbench.__path__, 'splatbench.'):\n"
        "    importlib.import_module(info.name)\n"
        "from splatbench.runtime import (SplatPlusTrainer, alexnet_weights_path, eval_due, fused_ssim,\n"
        "    gradient_averaging, memory_tracker, splat_plus, ssim_kernels)\n"
        "assert callable(gradient_averaging.average_gradients) and hasattr(ssim_kernels, 'COLUMN_TILE')\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
