"""In-process warmup (ns_splat_plus.training.warmup): real training steps, then the exact state back."""

from __future__ import annotations

import json

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import strategy


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("warmup_scene"))


# The state restored bitwise after a warmup that densified (parameters, optimizer, RNGs, sampler,
# strategy, monitor, the viewer locked out during the restore), on the CPU and on CUDA:
# tests/training/test_gpu_paths.py::test_warmup_restores_parameters_fused_adam_and_rng_bitwise.


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
