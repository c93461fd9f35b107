"""In-process warmup (ns_splat_plus.training.warmup): real training steps, then the exact state back."""

from __future__ import annotations

import json

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

from ns_splat_plus import strategy
from ns_splat_plus.training.short_run import resolution_at, resolution_change_steps


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


class _SizeRecorder(TrainingCallback):
    """The training resolution of every step: model.last_size after the step's render."""

    def __init__(self, model):
        self.sizes = {}
        super().__init__([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], self._record)
        self.model = model

    def _record(self, step):
        self.sizes[step] = tuple(self.model.last_size)


def test_training_after_warmup_equals_training_without_it(scene, tmp_path):
    """State-neutral end to end, through a resolution schedule (1/4 from step 0, 1/2 from 10, full size
    from 20): same Gaussians (bitwise) and same densification records, none from warmup; and the warmup
    rendered each later size once, the sizes training then reaches at steps 10 and 20."""
    results, sizes, later_sizes = [], None, None
    for warmup_steps in (0, 3):
        config = trainer_config(scene, tmp_path / f"w{warmup_steps}", steps=32)
        config.warmup_steps = warmup_steps
        config.pipeline.model.num_downscales = 2
        config.pipeline.model.resolution_schedule = 10
        try:
            trainer = build_trainer(config)
            if warmup_steps == 0:
                recorder = _SizeRecorder(trainer.pipeline.model)
                trainer.callbacks.append(recorder)
            trainer.train()
            results.append(_final(trainer))
            if warmup_steps == 0:
                sizes = recorder.sizes
                assert getattr(trainer, "warmup_result", None) is None
            else:
                later_sizes = trainer.warmup_result.later_sizes
        finally:
            close_writers()
    assert len({sizes[0], sizes[10], sizes[20]}) == 3, sizes  # the schedule changes the size twice
    assert sizes[9] == sizes[0] and sizes[19] == sizes[10] and sizes[31] == sizes[20]
    assert later_sizes == [sizes[10], sizes[20]]
    (records_cold, params_cold), (records_warm, params_warm) = results
    assert any(r["event"] == "refine" for r in records_cold)
    assert records_warm == records_cold
    assert params_warm.keys() == params_cold.keys()
    for name in params_cold:
        assert torch.equal(params_warm[name], params_cold[name]), name


def test_later_resolution_steps_are_the_schedules_changes_after_the_start():
    """The first step of each later size, for a run from step 0, a resumed run, and none past the schedule."""
    assert resolution_change_steps(0, 30000, 2, 3000) == [3000, 6000]
    assert resolution_change_steps(0, 10000, 2, 2000) == [2000, 4000]
    assert resolution_change_steps(3000, 30000, 2, 3000) == [6000]  # resumed at 3000: its size is already 1/2
    assert resolution_change_steps(6000, 30000, 2, 3000) == []
    assert resolution_change_steps(0, 5000, 2, 3000) == [3000]  # the run ends before full size
    assert resolution_change_steps(0, 30000, 0, 3000) == []
    for start, stop, downscales, schedule in ((0, 30000, 2, 3000), (2500, 9000, 3, 1000), (0, 40, 2, 10)):
        changes = [
            s
            for s in range(start + 1, stop)
            if resolution_at(s, downscales, schedule) != resolution_at(s - 1, downscales, schedule)
        ]
        assert resolution_change_steps(start, stop, downscales, schedule) == changes
