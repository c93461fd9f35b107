"""Hermetic tests, in tiers (for tests/ and splatbench/tests/).

Hermetic: no download, and a private torch hub (no AlexNet weights unless a test puts them there); set
at import, so every subprocess the tests start (ns-train, ns-eval, torchrun) inherits it.

Tiers (docs/development.md): plain ``pytest`` runs the unit tier (``addopts`` deselects ``slow`` and
``gpu``); ``-m slow`` the CLI, torchrun, SLURM, browser, docs and wheel tests; ``-m gpu`` the device tests.
:func:`_guarded_popen_init` fails a test of the unit tier that starts a process running Python or one
of :data:`SLOW_PROGRAMS` (in its set-up, fixtures included, or its call), so the unit tier stays fast
however a test starts its process.
"""

import contextlib
import multiprocessing.util
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["NS_SPLAT_PLUS_NO_DOWNLOAD"] = "1"
os.environ["TORCH_HOME"] = tempfile.mkdtemp(prefix="ns-splat-plus-torch-home-")


def _share_the_cores() -> None:
    """Under pytest-xdist, each worker's torch (and every CLI process it starts) gets the cores divided by
    the workers, at least one (OMP_NUM_THREADS, read by torch at import; one given outside wins). Each torch
    otherwise takes a thread per core: on 2 cores, 2 workers and the ns-train they start ran 4+ threads, whose
    parallel regions wait for a descheduled thread; a training step on the CPU was 4-10x slower under that
    load, the same on a free core with 1 thread or 2 (the tensors of the test scenes are small)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
        if "torch" in sys.modules:  # imported before this file (a plugin): set its pool too
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


_share_the_cores()

# A shell that starts a job in the background (nohup, `&`, some CI runners) ignores SIGINT in it, and every
# child inherits that: ns-train then keeps Ctrl-C ignored, as a user's background job should. The Ctrl-C
# tests need SIGINT as a terminal gives it, in this process (in-process training) and in the ns-train,
# ns-eval and torchrun it starts (a handler becomes the default disposition in a child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SLOW_PROGRAMS = {
    "ns-train", "ns-eval", "ns-export", "ns-viewer", "ns-process-data", "torchrun", "chromium",
    "chromium-browser", "chromedriver", "sbatch", "srun", "salloc", "slurmctld", "slurmd", "munged", "bash",
}  # fmt: skip
"""Programs that only tests marked ``slow`` (or ``gpu``) may start (besides any Python interpreter)."""


def slow_program(args) -> str:
    """The program of a subprocess ``args`` that belongs to the slow tier ('' when none): a Python
    interpreter (the CLI, scripts, ``-m pip``, ``-c`` imports of torch) or one of :data:`SLOW_PROGRAMS`."""
    argv = [args] if isinstance(args, (str, os.PathLike)) else list(args)
    if not argv:
        return ""
    name = Path(str(argv[0]).split()[0]).name
    if name in SLOW_PROGRAMS or name.startswith("python"):
        return name
    return ""


def inductor_isa_probe(args) -> bool:
    """Whether ``args`` is torch Inductor's probe of the CPU's vector instructions (torch >= 2.14): a
    ``python -c`` that only dlopens a test library from Inductor's cache, started by any first CPU compile
    (here, nerfstudio's ``torch.compile``-wrapped functions that tests compare with). Not a test's process."""
    argv = [] if isinstance(args, (str, os.PathLike)) else [str(a) for a in args]
    return len(argv) == 3 and argv[1] == "-c" and "cdll.LoadLibrary(" in argv[2] and "torchinductor" in argv[2]


_unit_test_running = None
"""The node id of the unit-tier test whose set-up or call is running (its module fixtures included)."""


def _guarded_popen_init(popen_init):
    def guarded(self, args, *rest, **kwargs):
        program = slow_program(args) if _unit_test_running else ""
        if program and (kwargs.get("env") or {}).get("TRITON_INTERPRET") == "1":
            program = ""  # a kernel under Triton's interpreter (tests/interpreted.py): it must start before Triton
        if program and inductor_isa_probe(args):
            program = ""
        if program:
            pytest.fail(
                f"{_unit_test_running} starts {program} ({args!r:.200}) but is not marked slow: CLI, "
                "torchrun, browser, SLURM and other Python processes belong to the slow tier "
                "(@pytest.mark.slow); the unit tier runs in-process",
                pytrace=False,
            )
        popen_init(self, args, *rest, **kwargs)

    return guarded


def _guarded_spawnv_passfds(spawnv_passfds):
    def guarded(path, args, passfds):
        if _unit_test_running:
            pytest.fail(
                f"{_unit_test_running} starts Python processes (multiprocessing / torch.multiprocessing.spawn) "
                "but is not marked slow: several processes belong to the slow tier (@pytest.mark.slow)",
                pytrace=False,
            )
        return spawnv_passfds(path, args, passfds)

    return guarded


def pytest_configure(config):
    subprocess.Popen.__init__ = _guarded_popen_init(subprocess.Popen.__init__)
    # multiprocessing's spawn and forkserver start their interpreter through this, not subprocess
    multiprocessing.util.spawnv_passfds = _guarded_spawnv_passfds(multiprocessing.util.spawnv_passfds)


@contextlib.contextmanager
def _running(item):
    """Marks ``item``'s set-up or call as running, when it is a unit-tier test (the guards read it)."""
    global _unit_test_running
    in_unit_tier = not (item.get_closest_marker("slow") or item.get_closest_marker("gpu"))
    _unit_test_running = item.nodeid if in_unit_tier else None
    try:
        yield
    finally:
        _unit_test_running = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _running(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _running(item):
        return (yield)
