"""The start-up record (``<run>/ranks/startup_rank0.json``, training/rank_record.py) splits the time before the
first step into consecutive parts: the imports up to the plugin's, the command line, the device, nerfstudio's
trainer set-up, the warmup, the loop's set-up, the viewer's scene with its camera pictures, and the loop's
start, each its own part, adding up to the process's time to its first step."""

from __future__ import annotations

import json
import time

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config

import ns_splat_plus
from ns_splat_plus import evaluation, upstream
from ns_splat_plus.training import rank_record, warmup
from ns_splat_plus.training import trainer as trainer_module

VIEWER_SCENE_S = 0.4
WARMUP_EXTRA_S = 0.25
DEVICE_S = 0.3
TRAINER_SETUP_S = 0.35


def _trained_record(tmp_path, steps: int) -> dict:
    """The start-up record of a CPU run of ``steps`` steps, with its warmup, on a small scene."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=steps)
    assert config.warmup_steps > 0
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    return json.loads((trainer.base_dir / "ranks" / "startup_rank0.json").read_text())


def test_the_warmup_and_the_viewers_scene_are_parts_of_their_own(tmp_path, monkeypatch):
    """A CPU run with a warmup whose viewer scene takes VIEWER_SCENE_S (a stand-in for nerfstudio's
    init_scene) and whose warmup takes WARMUP_EXTRA_S more than its steps: each lands in its own part."""
    monkeypatch.setattr(upstream, "init_viewer_state", lambda trainer, dataset=None: time.sleep(VIEWER_SCENE_S))
    real_warmup, warmup_seconds = warmup.run_warmup, []

    def slower_warmup(trainer):
        started = time.time()
        real_warmup(trainer)
        time.sleep(WARMUP_EXTRA_S)
        warmup_seconds.append(time.time() - started)

    monkeypatch.setattr(warmup, "run_warmup", slower_warmup)
    record = _trained_record(tmp_path, steps=2)
    parts = record["parts_seconds"]
    assert list(parts) == [name for name, _, _ in rank_record.PARTS], parts  # every part, in order
    assert all(seconds >= 0 for seconds in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(record["seconds_to_first_step_end"], abs=1e-6)
    (warmup_s,) = warmup_seconds
    assert parts["warmup"] == pytest.approx(warmup_s, abs=0.05), (parts, warmup_s)
    assert VIEWER_SCENE_S <= parts["viewer_scene"] < VIEWER_SCENE_S + WARMUP_EXTRA_S, parts
    assert parts["loop_setup"] < WARMUP_EXTRA_S, parts
    assert parts["loop_start"] < WARMUP_EXTRA_S, parts


def test_the_time_before_the_dataset_is_split_at_the_plugins_import_the_trainer_and_the_device(tmp_path, monkeypatch):
    """In-process, the plugin was imported before this test began, the trainer is built after it, and stand-ins
    make the device's set-up take DEVICE_S and nerfstudio's trainer set-up TRAINER_SETUP_S more: each lands in
    its own part (imports, command_line, device, trainer_setup)."""
    real_setup_process, real_start_run = trainer_module.setup_process, evaluation.memory.start_run

    def slower_setup_process(*args, **kwargs):
        time.sleep(DEVICE_S)
        return real_setup_process(*args, **kwargs)

    def slower_start_run(device):
        time.sleep(TRAINER_SETUP_S)
        return real_start_run(device)

    monkeypatch.setattr(trainer_module, "setup_process", slower_setup_process)
    monkeypatch.setattr(evaluation.memory, "start_run", slower_start_run)
    test_started = time.time()
    record = _trained_record(tmp_path, steps=1)
    marks, parts = record["marks"], record["parts_seconds"]
    assert marks["plugin_imported"] == ns_splat_plus.IMPORTED_AT, marks
    assert parts["imports"] == pytest.approx(ns_splat_plus.IMPORTED_AT - marks["process_start"], abs=1e-6), parts
    assert parts["command_line"] >= test_started - ns_splat_plus.IMPORTED_AT, parts  # up to the trainer's creation
    assert DEVICE_S <= parts["device"] < DEVICE_S + TRAINER_SETUP_S, parts
    assert TRAINER_SETUP_S <= parts["trainer_setup"] < TRAINER_SETUP_S + DEVICE_S, parts
    assert sum(parts.values()) == pytest.approx(record["seconds_to_first_step_end"], abs=1e-6)
