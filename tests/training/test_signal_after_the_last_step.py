"""Ctrl-C or SIGTERM in the second after the last step (training.png drawn, the final checkpoint not yet written):
the run had finished, so it writes that checkpoint and ends as a finished run with one line. A fresh-eyes trial
found the signal handlers already gone there: Ctrl-C gave a traceback and exit status 0, SIGTERM killed the
process, and both lost every step since the last periodic save (all of them in a short run)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus.training import checkpoint, loop

STEPS = 6


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("signal-after-last-step") / "scene")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_last_step_writes_the_final_checkpoint(scene, tmp_path, sig, monkeypatch, capsys):
    draw = loop.run_plots.write_run_plot

    def signalled_while_drawing(*args, **kwargs):  # the signal arrives in the run's last second
        os.kill(os.getpid(), sig)
        return draw(*args, **kwargs)

    monkeypatch.setattr(loop.run_plots, "write_run_plot", signalled_while_drawing)
    config = trainer_config(scene, tmp_path, steps=STEPS)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        trainer.train()  # returns: a finished run
    finally:
        close_writers()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # handlers put back
    final = trainer.checkpoint_dir / f"step-{STEPS - 1:09d}.ckpt"
    assert sorted(p.name for p in trainer.checkpoint_dir.iterdir()) == [final.name]
    assert int(torch.load(final, map_location="cpu", weights_only=True)["step"]) == STEPS - 1
    printed = capsys.readouterr()
    line = f"splat-plus: {sig.name} after the last step: training had finished; final checkpoint saved: {final}"
    assert "".join(line.split()) in "".join(printed.out.split()), printed.out[-2000:]
    assert trainer.quit_on_train_completion  # its viewer, had it one, closes instead of waiting for another Ctrl-C


def test_the_final_checkpoint_is_written_once(scene, tmp_path, monkeypatch):
    """The loop's end writes it and nerfstudio's after_train asks again for the same step: one write."""
    written = []
    real = checkpoint.write_checkpoint
    monkeypatch.setattr(
        checkpoint, "write_checkpoint", lambda state, d, step: written.append(step) or real(state, d, step)
    )
    config = trainer_config(scene, tmp_path, steps=STEPS)
    config.warmup_steps = 0
    config.steps_per_save = STEPS - 1  # the loop saves the last step too
    try:
        build_trainer(config).train()
    finally:
        close_writers()
    assert written == [STEPS - 1]


def test_a_signal_during_the_disk_check_still_stops_the_run(scene, tmp_path, monkeypatch):
    """The loop's disk check (a statvfs on logging and saving steps) wrote its answer, None, over the name a
    SIGTERM handled during it had just set: the run trained on (a CI run of the slow tier caught it)."""
    calls = []

    def signalled_during_the_check(trainer):
        calls.append(trainer.step)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return None  # room on the disk

    monkeypatch.setattr(loop.outputs, "low_disk_reason", signalled_during_the_check)
    config = trainer_config(scene, tmp_path, steps=40)
    config.warmup_steps = 0
    config.logging.steps_per_log = 1
    trainer = build_trainer(config)
    try:
        with pytest.raises(SystemExit) as stopped:
            trainer.train()
    finally:
        close_writers()
    assert "training stopped by SIGTERM after step 1" in str(stopped.value)
