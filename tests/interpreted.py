"""Runs a check of a test file in a child process under Triton's interpreter (CPU tensors).

The interpreter has to be on before anything imports Triton (triton.language builds its own
helpers at import), so a test calls ``run_interpreted(__file__, "check_name", *args)`` and the
file's ``__main__`` hands the call to :func:`main`. One child per test file serves all of that file's
checks in turn (importing torch and Triton once, not once per check: seconds each on 2 cores); a check
that fails or times out ends its child, and the next check starts a fresh one.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from typing import Dict, Tuple

DONE = "@@interpreted-check-done@@"
"""The line after a check's output in the child's stdout: ``DONE passed|failed``."""
TIMEOUT_S = 600

_children: Dict[str, Tuple[subprocess.Popen, "queue.Queue[str]"]] = {}


def _read_lines(stream, lines: "queue.Queue[str]") -> None:
    for line in stream:
        lines.put(line)
    lines.put("")  # the child's stdout closed


def _child(test_file: str) -> Tuple[subprocess.Popen, "queue.Queue[str]"]:
    entry = _children.get(test_file)
    if entry is None or entry[0].poll() is not None:
        helpers = os.path.dirname(os.path.abspath(__file__))  # the child imports this module from tests/
        path = os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=path, PYTHONUNBUFFERED="1")
        child = subprocess.Popen(
            [sys.executable, test_file, "--serve"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1,
        )  # fmt: skip
        lines: "queue.Queue[str]" = queue.Queue()  # a thread reads them: a deadline per line, no blocking read
        threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
        entry = _children[test_file] = (child, lines)
    return entry


def _end(test_file: str) -> None:
    entry = _children.pop(test_file, None)
    if entry is not None and entry[0].poll() is None:
        entry[0].kill()
        entry[0].wait()


@atexit.register
def _end_all() -> None:
    for test_file in list(_children):
        _end(test_file)


def run_interpreted(test_file: str, check: str, *args) -> None:
    """Runs ``check(*args)`` of ``test_file`` with TRITON_INTERPRET=1 in that file's child; fails with its output."""
    child, answers = _child(test_file)
    assert child.stdin is not None
    child.stdin.write(json.dumps({"check": check, "args": args}) + "\n")
    child.stdin.flush()
    lines, status, deadline = [], None, time.monotonic() + TIMEOUT_S
    while status is None:
        try:
            line = answers.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = ""
        if not line:  # timed out, or the child died
            _end(test_file)
            raise AssertionError(f"{check}{args}: no answer (timeout or crash):\n{''.join(lines)[-6000:]}")
        if line.startswith(DONE):
            status = line[len(DONE) :].strip()
        else:
            lines.append(line)
    output = "".join(lines)
    if status != "passed":
        _end(test_file)  # a fresh child for the next check: no state left by a failure
    assert status == "passed", f"{check}{args} failed:\n{output[-6000:]}"


def main(checks: dict) -> None:
    """The child's side: serves the checks named on stdin (one JSON line each) from ``checks`` (a module's globals)."""
    assert os.environ.get("TRITON_INTERPRET") == "1", "run through the tests: the interpreter must be on"
    assert sys.argv[1:] == ["--serve"], sys.argv
    for request in sys.stdin:
        call = json.loads(request)
        name = call["check"]
        try:
            assert name.startswith("check_")
            checks[name](*call["args"])
            status = "passed"
        except BaseException:  # noqa: BLE001 (reported to the test, which fails with it)
            traceback.print_exc(file=sys.stdout)
            status = "failed"
        print(f"{DONE} {status}", flush=True)
