"""In-process warmup (ns_splat_plus.training.warmup): real training steps, then the exact state back."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
import torch
from inprocess import assert_bitwise_equal, build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.engine.callbacks import TrainingCallbackLocation

from ns_splat_plus import strategy
from ns_splat_plus.training import warmup
from ns_splat_plus.training.snapshot import TrainingSnapshot


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("warmup_scene"))


def _run_steps(trainer, steps):
    """The body of nerfstudio's training loop, without the writer / eval / checkpoint parts."""
    for step in steps:
        trainer.step = step
        trainer.pipeline.train()
        for cb in trainer.callbacks:
            cb.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
        trainer.train_iteration(step)
        for cb in trainer.callbacks:
            cb.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)


def _capture(trainer):
    model = trainer.pipeline.model
    optimizers = trainer.optimizers
    dm = trainer.pipeline.datamanager
    return {
        "param_objects": {n: p for n, p in trainer.pipeline.named_parameters()},
        "params": {n: p.detach().clone() for n, p in trainer.pipeline.named_parameters()},
        "optimizer_params": {
            k: [p for g in o.param_groups for p in g["params"]] for k, o in optimizers.optimizers.items()
        },
        "optimizers": {k: copy.deepcopy(o.state_dict()) for k, o in optimizers.optimizers.items()},
        "schedulers": {k: copy.deepcopy(s.state_dict()) for k, s in optimizers.schedulers.items()},
        "scaler": copy.deepcopy(trainer.grad_scaler.state_dict()),
        "rng": (random.getstate(), np.random.get_state(), torch.get_rng_state()),
        "sampling": (list(dm.train_unseen_cameras), dm.random_generator.getstate()),
        "strategy_state": {
            k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in model.strategy_state.items()
        },
        "model_step": model.step,
        "num_points": model.num_points,
    }


def test_warmup_restores_every_parameter_optimizer_and_rng_state_bitwise(scene, tmp_path, monkeypatch):
    config = trainer_config(scene, tmp_path, steps=100)
    config.warmup_steps = 0
    model_config = config.pipeline.model
    model_config.warmup_length = 1
    model_config.refine_every = 2  # refines at 16 and 18: inside the warmup below, replacing every parameter
    try:
        trainer = build_trainer(config)
        _run_steps(trainer, range(16))  # non-trivial optimizer, scheduler and strategy state first
        trainer._start_step = 16
        before = _capture(trainer)
        seen_before_restore = {}
        original_restore = TrainingSnapshot.restore

        def spying_restore(snapshot, trainer_):
            seen_before_restore["num_points"] = trainer_.pipeline.model.num_points
            seen_before_restore["opacities"] = trainer_.pipeline.model.gauss_params["opacities"]
            seen_before_restore["viewer_locked_out"] = trainer_.train_lock.locked()  # renders wait
            original_restore(snapshot, trainer_)

        monkeypatch.setattr(TrainingSnapshot, "restore", spying_restore)
        result = warmup.run_warmup(trainer, steps=3)
        after = _capture(trainer)
        # the warmup really trained and densified (its own view of the model, now gone)
        assert result.steps == 3 and result.nonzero_gradient_steps == 3 and result.seconds > 0
    finally:
        close_writers()
    # the warmup densified: other Gaussians, other Parameter objects, all undone
    assert seen_before_restore["num_points"] != before["num_points"]
    assert seen_before_restore["viewer_locked_out"], "the restore ran while a viewer render could run"
    assert seen_before_restore["opacities"] is not before["param_objects"]["_model.gauss_params.opacities"]
    assert after["num_points"] == before["num_points"]
    assert after["param_objects"].keys() == before["param_objects"].keys()
    for name, p in before["param_objects"].items():
        assert after["param_objects"][name] is p, f"{name}: a different Parameter object after warmup"
    for name, ps in before["optimizer_params"].items():
        assert all(a is b for a, b in zip(after["optimizer_params"][name], ps)), name
    for key in ("params", "optimizers", "schedulers", "scaler", "rng", "sampling", "strategy_state", "model_step"):
        assert_bitwise_equal(before[key], after[key], key)
    assert any(len(s["state"]) for s in before["optimizers"].values())  # there was optimizer state to restore


def _final(trainer):
    records = [json.loads(line) for line in (trainer.base_dir / strategy.JSONL_NAME).read_text().splitlines()]
    params = {n: p.detach().clone() for n, p in trainer.pipeline.model.gauss_params.items()}
    return records, params


def test_training_after_warmup_equals_training_without_it(scene, tmp_path):
    """State-neutral end to end: same Gaussians (bitwise) and same densification records, none from warmup."""
    results = []
    for warmup_steps in (0, 3):
        config = trainer_config(scene, tmp_path / f"w{warmup_steps}", steps=32)
        config.warmup_steps = warmup_steps
        try:
            trainer = build_trainer(config)
            trainer.train()
            results.append(_final(trainer))
            assert (getattr(trainer, "warmup_result", None) is not None) == (warmup_steps > 0)
        finally:
            close_writers()
    (records_cold, params_cold), (records_warm, params_warm) = results
    assert any(r["event"] == "refine" for r in records_cold)
    assert records_warm == records_cold
    assert params_warm.keys() == params_cold.keys()
    for name in params_cold:
        assert torch.equal(params_warm[name], params_cold[name]), name
