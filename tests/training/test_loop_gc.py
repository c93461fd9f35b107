"""The training loop keeps the set-up's objects out of Python's garbage collector while its steps run
(ns_splat_plus/training/loop.py: a full collection walked them all, host time in every step's budget), and
hands them back when training ends, also when it ends in an error: a process that trains again collects them."""

from __future__ import annotations

import gc

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation


def _train_recording_frozen(tmp_path, fail_at=None):
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=6)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    frozen = []

    def record(step):
        frozen.append(gc.get_freeze_count())
        if step == fail_at:
            raise RuntimeError("a failing step")

    trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], record))
    try:
        trainer.train()
    finally:
        close_writers()
    return frozen


def test_set_up_objects_are_frozen_during_the_steps_only(tmp_path):
    assert gc.get_freeze_count() == 0
    frozen = _train_recording_frozen(tmp_path)
    assert len(frozen) == 6 and min(frozen) > 100_000  # torch's and nerfstudio's objects, the trainer's
    assert gc.get_freeze_count() == 0


def test_a_failed_run_hands_them_back(tmp_path):
    with pytest.raises(RuntimeError, match="a failing step"):
        _train_recording_frozen(tmp_path, fail_at=2)
    assert gc.get_freeze_count() == 0


def test_a_process_s_own_frozen_objects_stay_frozen(tmp_path):
    gc.freeze()  # an embedding process's own choice
    try:
        frozen_before = gc.get_freeze_count()
        frozen = _train_recording_frozen(tmp_path)
        assert frozen and gc.get_freeze_count() > frozen_before // 2 > 0  # not handed back (a few were freed)
    finally:
        gc.unfreeze()
