"""Runs a check of a test file in a child process under Triton's interpreter (CPU tensors).

The interpreter has to be on before anything imports Triton (triton.language builds its own
helpers at import), so a test calls ``run_interpreted(__file__, "check_name", *args)`` and the
file's ``__main__`` hands the call to :func:`main`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_interpreted(test_file: str, check: str, *args) -> None:
    """Runs ``check(*args)`` of ``test_file`` with TRITON_INTERPRET=1; fails with its output."""
    helpers = os.path.dirname(os.path.abspath(__file__))  # the child imports this module from tests/
    path = os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, test_file, check, json.dumps(args)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{check}{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert f"{check} passed" in done.stdout


def main(checks: dict) -> None:
    """The child's side: runs the check named on the command line from ``checks`` (a module's globals)."""
    assert os.environ.get("TRITON_INTERPRET") == "1", "run through the tests: the interpreter must be on"
    name, arguments = sys.argv[1], json.loads(sys.argv[2])
    assert name.startswith("check_")
    checks[name](*arguments)
    print(f"{name} passed")
