"""The README quickstart can be pasted whole into a terminal: its ns-train line ends by itself after
the last step, although a run started from a terminal otherwise keeps the viewer open until Ctrl+C."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from doc_examples import QUICKSTART, README, _env, code_blocks, with_test_flags

from ns_splat_plus.demo import SceneSpec, make_scene

STAYS_OPEN = "stays open after the last step"  # viewer/config.py's line for a terminal run


def _quickstart_training_command(steps: int) -> str:
    (block,) = [b for b in code_blocks(README) if QUICKSTART in b.text]
    lines = with_test_flags(block.text, steps).splitlines()
    (command,) = [line for line in lines if "ns-train" in line]
    return command


def _read_until_exit(proc: subprocess.Popen, master: int, timeout: float) -> str:
    """Everything the process writes to its terminal until it exits (or ``timeout``, or it says that its
    viewer stays open: then it is stopped)."""
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal closed, the process is gone
                data = b""
            if not data:
                break
            chunks.append(data.decode("utf-8", "replace"))
            if STAYS_OPEN in "".join(chunks)[-4000:].replace("\r", "").replace("\n", " "):
                break
        if proc.poll() is not None and not ready:
            break
    return "".join(chunks)


@pytest.mark.slow
def test_quickstart_training_line_ends_by_itself_in_a_terminal(tmp_path: Path):
    make_scene(tmp_path / "scene", SceneSpec())
    command = _quickstart_training_command(steps=10)
    env = {k: v for k, v in _env(COLUMNS="200").items() if k not in ("CI", "SLURM_JOB_ID")}  # a user's shell
    master, slave = pty.openpty()
    proc = subprocess.Popen(["bash", "-c", command], cwd=tmp_path, env=env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True)  # fmt: skip
    os.close(slave)
    try:
        output = _read_until_exit(proc, master, timeout=600)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        os.close(master)
    assert STAYS_OPEN not in output.replace("\r", ""), f"{command}\nwaits for Ctrl+C:\n{output[-3000:]}"
    assert proc.returncode == 0, f"{command}\n{output[-3000:]}"
    assert "the run exits after its last step" in output.replace("\r", "").replace("\n", " "), output[-3000:]
    assert list((tmp_path / "outputs" / "scene" / "splat-plus").glob("*/nerfstudio_models/step-*.ckpt"))
