"""The unit tier starts no CLI or Python process (conftest.py's guard), and the tiers are what .ci/run runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import slow_program


def test_the_unit_tier_refuses_to_start_a_python_process():
    with pytest.raises(pytest.fail.Exception, match="not marked slow"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.parametrize("program", ["ns-train", "torchrun", "chromedriver", "sbatch"])
def test_the_unit_tier_refuses_to_start_the_cli(program):
    with pytest.raises(pytest.fail.Exception, match=f"starts {program}"):
        subprocess.run([f"/some/venv/bin/{program}", "--help"], check=True)


def test_other_programs_and_the_triton_interpreter_may_run():
    subprocess.run(["true"], check=True)  # the guard lets it start (it would fail the test)
    assert slow_program(["git", "status"]) == ""
    assert slow_program("/usr/bin/python3.11 -c pass") == "python3.11"
    subprocess.run([sys.executable, "-c", "pass"], env={"TRITON_INTERPRET": "1"}, check=True)
    # torch Inductor's probe of the CPU's vector instructions (torch >= 2.14), started by its first CPU compile
    probe = 'from ctypes import cdll\ntry:\n    cdll.LoadLibrary("/tmp/torchinductor_test/none.so")\nexcept OSError:\n    pass'
    subprocess.run([sys.executable, "-c", probe], check=True)
    with pytest.raises(pytest.fail.Exception, match="not marked slow"):  # Python's own dlopen, not Inductor's
        subprocess.run([sys.executable, "-c", probe.replace("torchinductor_test", "elsewhere")], check=True)


@pytest.mark.slow
def test_the_slow_tier_may_start_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # the guard lets it start


def test_ci_runs_the_unit_tier_then_the_slow_tier_with_durations_and_time_limits():
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text().splitlines()
    command = ".venv/bin/python -m pytest"
    pytest_runs = [line[len(command) :] for line in lines if line.startswith(command)]
    assert len(pytest_runs) == 2, pytest_runs
    unit, slow = pytest_runs
    assert " -m " not in unit and " -m slow " in slow
    for run in pytest_runs:
        assert "--durations=25" in run and "--timeout=" in run and " -n " in run, run


def test_the_unit_tier_refuses_to_spawn_worker_processes():
    import torch.multiprocessing

    with pytest.raises(pytest.fail.Exception, match="torch.multiprocessing.spawn"):
        torch.multiprocessing.spawn(print, nprocs=1, join=True)
