"""Exits of a multi-rank run (issue 31): a stop or pause that only global rank 0 sees (the viewer runs
there), a signal that reaches one rank and an error on one rank end (or hold) every rank within
seconds, with one message and, for a stop or signal, the checkpoint of the step every rank agreed on;
none waits for ``--data-parallel.timeout-minutes``.

Each case runs the real ``torchrun --nproc-per-node 2 ns-train`` on CPU ranks (gloo). A
``sitecustomize`` hook (:data:`RANK0_HOOK`) plays the viewer on one rank (rank 0 unless the test names
another): from a thread, as nerfstudio's viewer does, it sets ``training_state = "paused"`` /
``"training"``, calls ``Trainer.shutdown()`` (which sets ``stop_training``) or makes the next step
raise, once a given step is reached, and notes the step and time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from clirun import (
    TINY_SCENE,
    checkpoints,
    cli_env,
    console_script,
    free_port,
    ns_train_cmd,
    run_dir,
    signal_disposition,
    torchrun_worker_pids,
)

from splatbench.scenes import make_scene

RANK0_HOOK = """
import os, sys, threading, time, json

_plan = os.environ.get("SPLAT_PLUS_TEST_RANK0_PLAN")  # JSON list of [action, step, seconds]
_log = os.environ.get("SPLAT_PLUS_TEST_RANK0_LOG")


def _note(what, trainer):
    with open(_log, "a") as f:
        f.write(json.dumps({"what": what, "step": trainer.step, "time": time.time()}) + "\\n")


def _play(trainer):
    for action, step, seconds in json.loads(_plan):
        while getattr(trainer, "step", 0) < step:
            time.sleep(0.005)
        _note(action, trainer)  # before acting: the step the others are told about
        if action == "pause":
            trainer.training_state = "paused"  # what the viewer's Pause button does
        elif action == "resume":
            trainer.training_state = "training"
        elif action == "stop":
            trainer.shutdown()  # nerfstudio's way to stop a trainer: stop_training = True
        elif action == "raise":
            trainer.injected_fault = True  # the next step raises, in the training thread
        time.sleep(seconds)


def _watch():
    # in sys.modules from the start of its import: wait for the class (the trainer is set up seconds later)
    while getattr(sys.modules.get("ns_splat_plus.training.trainer"), "SplatPlusTrainer", None) is None:
        time.sleep(0.01)
    cls = sys.modules["ns_splat_plus.training.trainer"].SplatPlusTrainer
    setup = cls.setup

    def setup_and_play(self, *args, **kwargs):
        setup(self, *args, **kwargs)
        threading.Thread(target=_play, args=(self,), daemon=True).start()

    cls.setup = setup_and_play
    train_iteration = cls.train_iteration

    def faulty_train_iteration(self, step):
        if getattr(self, "injected_fault", False):
            raise ValueError(f"injected fault at step {step}")
        return train_iteration(self, step)

    cls.train_iteration = faulty_train_iteration


# a torchrun worker (not the launcher) of global rank 0, or of the rank the test names
if _plan and os.environ.get("RANK") == os.environ.get("SPLAT_PLUS_TEST_RANK", "0"):
    threading.Thread(target=_watch, daemon=True).start()
"""


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)


class Torchrun:
    """``torchrun --nproc-per-node 2 ns-train`` on CPU ranks with the hook playing ``plan`` on ``rank``,
    in its own session so that a hang past the test's limit ends all of its processes."""

    def __init__(self, scene: Path, tmp_path: Path, name: str, timeout_minutes: float, plan: list, rank: int = 0):
        self.tmp_path, self.run_dir = tmp_path, run_dir(tmp_path, name)
        cmd = ns_train_cmd(scene, tmp_path, name, 100000, "--data-parallel.timeout-minutes", str(timeout_minutes))
        hook = tmp_path / "hook"
        hook.mkdir(exist_ok=True)
        (hook / "sitecustomize.py").write_text(RANK0_HOOK)
        env = cli_env()
        env["OMP_NUM_THREADS"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [env.get("PYTHONPATH")])])
        env["SPLAT_PLUS_TEST_RANK0_PLAN"] = json.dumps(plan)
        env["SPLAT_PLUS_TEST_RANK0_LOG"] = str(tmp_path / "played.log")
        env["SPLAT_PLUS_TEST_RANK"] = str(rank)
        self.proc = subprocess.Popen(
            [
                console_script("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()),
                console_script("ns-train"), *cmd[1:],
            ],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip

    def played(self) -> list:
        """What the hook did: [{"what", "step", "time"}], in order."""
        path = self.tmp_path / "played.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def finish(self, limit_s: float = 240, context: str = "") -> tuple:
        """(exit status, output, the time it ended); a run still going after ``limit_s`` fails the test (its
        message says what the hook played, ``context`` and the output's end)."""
        try:
            output, _ = self.proc.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # torchrun and its workers: this test's session
            output, _ = self.proc.communicate()
            raise AssertionError(
                f"still running after {limit_s} s; played {self.played()}; {context}:\n{output[-5000:]}"
            ) from None
        return self.proc.returncode, output, time.time()


def _agreed_stop(output: str, run: Path) -> int:
    """The step of the one stop line; its checkpoint exists and holds that step, and both ranks ended
    training there with bitwise equal parameters (their ranks/rank<r>.json)."""
    (line,) = [x for x in output.splitlines() if "training stopped by trainer.stop_training" in x]
    assert "on all 2 ranks" in line, line
    step = int(re.search(r"after step (\d+)", line).group(1))
    saved = checkpoints(run)[-1]
    assert saved.name == f"step-{step:09d}.ckpt" and saved.name in line, (saved, line)
    assert int(torch.load(saved, map_location="cpu", weights_only=True)["step"]) == step
    ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["final_step"] for r in ranks] == [step, step], ranks
    assert ranks[0]["final_checksums"][0] == ranks[0]["final_checksums"][1], ranks
    return step


def _no_noise(output: str, launcher_failed: bool = False) -> None:
    """No traceback of a rank, no roll call; torchrun prints its own (ChildFailedError) after a non-zero exit."""
    assert output.count("Traceback") == (1 if launcher_failed else 0), output[-5000:]
    assert "[rank0]" not in output and "[rank1]" not in output and "does not answer" not in output, output[-5000:]


@pytest.mark.slow
def test_a_stop_on_rank_0_alone_ends_every_rank_at_the_same_step(scene, tmp_path):
    """The acceptance of issue 31, item 4: the collective timeout is 5 minutes; the run ends in seconds."""
    run = Torchrun(scene, tmp_path, "stop", 5, [["stop", 30, 0]])
    status, output, ended = run.finish()
    assert status == 0, output[-5000:]  # as nerfstudio after a stop: a finished run
    _no_noise(output)
    (stopped,) = run.played()
    step = _agreed_stop(output, run.run_dir)
    # the next agreement point after the stop, on every rank, and well within the collective timeout
    assert step % 25 == 0 and stopped["step"] <= step <= stopped["step"] + 25, (stopped, step)
    assert ended - stopped["time"] < 60, f"ended {ended - stopped['time']:.0f} s after the stop"


@pytest.mark.slow
def test_a_pause_on_rank_0_longer_than_the_collective_timeout_holds_every_rank(scene, tmp_path):
    """Pause 10 s with a 6 s collective timeout, resume, pause again and stop during that pause."""
    plan = [["pause", 20, 10], ["resume", 0, 0], ["pause", 60, 3], ["stop", 0, 0]]
    run = Torchrun(scene, tmp_path, "pause", 0.1, plan)
    status, output, ended = run.finish()
    assert status == 0, output[-5000:]
    _no_noise(output)
    paused, resumed, paused_again, stopped = run.played()
    assert resumed["time"] - paused["time"] >= 10  # longer than the collective timeout
    # every rank held at the agreement point after the Pause: no step ran until Resume
    assert resumed["step"] % 25 == 0 and paused["step"] <= resumed["step"] <= paused["step"] + 25, (paused, resumed)
    step = _agreed_stop(output, run.run_dir)
    # the stop during the second pause: at the step where every rank waited
    assert step == stopped["step"] and paused_again["step"] <= step <= paused_again["step"] + 25, (paused_again, step)
    assert ended - stopped["time"] < 60


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_to_one_rank_stops_every_rank_with_one_message(scene, tmp_path):
    """SIGTERM to rank 1 only (a `kill` of one worker): every rank stops at the agreed step, rank 0 saves."""
    run = Torchrun(scene, tmp_path, "term", 5, [["mark", 30, 0]], rank=1)
    deadline = time.time() + 240
    while not run.played() and run.proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    rank1 = torchrun_worker_pids(run.proc.pid)[1]
    # the loop's handler is in place once rank 1 has trained (a run in CI once went on as if it had none)
    disposition = signal_disposition(rank1, signal.SIGTERM)
    os.kill(rank1, signal.SIGTERM)
    signalled = time.time()
    status, output, ended = run.finish(context=f"rank 1's SIGTERM disposition when signalled: {disposition}")
    assert disposition == "caught", disposition
    assert ended - signalled < 60
    assert status != 0, output[-5000:]
    _no_noise(output, launcher_failed=True)
    (line,) = [x for x in output.splitlines() if x.startswith("training stopped by")]  # rank 0's, once
    assert "a signal on another rank" in line and "checkpoint saved" in line, line
    step = int(re.search(r"after step (\d+)", line).group(1))
    assert checkpoints(run.run_dir)[-1].name == f"step-{step:09d}.ckpt" and step % 25 == 0
    summary = output[output.index("Root Cause") :]  # torchrun's summary says so, not "To enable traceback"
    assert re.search(rf"splat-plus: rank [01]: training stopped by \S.* after step {step}; checkpoint saved", summary)


@pytest.mark.slow
def test_an_error_on_one_rank_ends_the_others_at_once_with_its_message_only(scene, tmp_path):
    """rank 1 raises (a bug: its traceback); rank 0, in the gradient all-reduce, ends without a message."""
    run = Torchrun(scene, tmp_path, "error", 5, [["raise", 30, 0]], rank=1)
    status, output, ended = run.finish()
    assert status != 0
    (raised,) = run.played()
    assert ended - raised["time"] < 30, f"ended {ended - raised['time']:.0f} s after the error"
    assert output.count("Traceback") == 2, output[-5000:]  # rank 1's and torchrun's own summary
    assert "[rank0]" not in output and "does not answer" not in output, output[-5000:]
    assert "ValueError: injected fault at step" in output
    summary = output[output.index("Root Cause") :]  # torchrun's summary names the error, not "To enable traceback"
    assert "splat-plus: ValueError: injected fault at step" in summary, summary
