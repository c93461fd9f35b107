"""The package's shape: the training path never imports the benchmark tooling, modules stay small,
every module says what it is for, and the benchmark's runtime imports load in a fresh process."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ns_splat_plus"
TRAINING_PATH = ("model", "raster", "strategy", "training", "parallel", "evaluation", "viewer")


def _modules(*folders):
    for folder in folders:
        yield from sorted((PACKAGE / folder).rglob("*.py"))


def _imported(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_the_training_path_imports_nothing_from_bench():
    offenders = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in _modules(*TRAINING_PATH)
        for name in _imported(path)
        if name.startswith("ns_splat_plus.bench")
    ]
    assert not offenders, offenders


def test_modules_are_small_and_say_what_they_are_for():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40
    too_long = [f"{p.relative_to(PACKAGE)} ({n} lines)" for p in modules if (n := len(p.read_text().splitlines())) > 500]
    assert not too_long, too_long
    undocumented = [str(p.relative_to(PACKAGE)) for p in modules if not ast.get_docstring(ast.parse(p.read_text()))]
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


def test_bench_runtime_names_import_in_a_fresh_process():
    code = "from ns_splat_plus.bench.runtime import alexnet_weights_path, memory_tracker, SplatPlusTrainer; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
