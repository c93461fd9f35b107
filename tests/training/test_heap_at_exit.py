"""A splat-plus process leaves its last garbage collection out at exit (training/heap_at_exit.py): training
registers ``gc.freeze`` with atexit, once per process, and only for the exit (nothing is frozen while the
process still runs: a process that trains again keeps its normal collection)."""

from __future__ import annotations

import atexit
import gc

from inprocess import small_scene, train, trainer_config

from ns_splat_plus.training import heap_at_exit


def test_training_registers_one_freeze_for_the_exit_and_freezes_nothing_before(tmp_path, monkeypatch):
    registered = []
    monkeypatch.setattr(heap_at_exit, "_REGISTERED", False)
    monkeypatch.setattr(atexit, "register", lambda fn, *args, **kwargs: registered.append(fn) or fn)
    frozen_before = gc.get_freeze_count()
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=3)
    config.warmup_steps = 0
    train(config)
    assert [fn for fn in registered if fn is gc.freeze] == [gc.freeze]
    assert gc.get_freeze_count() == frozen_before  # frozen only when the process exits
    heap_at_exit.freeze_heap_at_exit()  # a second run in the same process: still one callback
    assert [fn for fn in registered if fn is gc.freeze] == [gc.freeze]
