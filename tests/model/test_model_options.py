"""Model options a user may set, each trained through refines on the CPU (the reference rasterizer), in process: the
run reaches its last step with finite Gaussians and densifies. A net under options no other training test sets;
`--pipeline.model.sh-degree 0` once stopped at step 0 (a white SfM point's logit was +inf in float32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from inprocess import small_scene, train, trainer_config

from ns_splat_plus import strategy
from ns_splat_plus.method import splat_plus_lite_trainer_config

STEPS = 60  # the default strategy refines from step 24, after its pause for the opacity reset

OPTIONS = [
    ("splat-plus", {"sh_degree": 0}),
    ("splat-plus-lite", {"sh_degree": 0}),
    ("splat-plus-mcmc", {"sh_degree": 0}),
    ("splat-plus", {"sh_degree": 1}),
    ("splat-plus", {"rasterize_mode": "antialiased"}),
    ("splat-plus-lite", {"rasterize_mode": "antialiased"}),
    ("splat-plus-lite", {"output_depth_during_training": True}),
    ("splat-plus-lite", {"background_color": "white"}),
    ("splat-plus-lite", {"background_color": "black"}),
    ("splat-plus", {"color_corrected_metrics": True}),
]


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return small_scene(tmp_path_factory.mktemp("options_scene"))  # its SfM points include full-white channels


@pytest.mark.parametrize(
    "method,fields", OPTIONS, ids=[f"{m}-" + "-".join(f"{k}={v}" for k, v in f.items()) for m, f in OPTIONS]
)
def test_the_option_trains_through_refines(scene, tmp_path, method, fields):
    preset = splat_plus_lite_trainer_config() if method == "splat-plus-lite" else None
    if preset is not None:
        preset.steps_scaler = 1.0  # lite's third of 60 steps would end before its first refine
    config = trainer_config(scene, tmp_path, steps=STEPS, method_name=method, preset=preset)
    for name, value in fields.items():
        assert hasattr(config.pipeline.model, name), name
        setattr(config.pipeline.model, name, value)
    trainer = train(config)
    model = trainer.pipeline.model
    assert model.step == config.max_num_iterations - 1
    for name, param in model.gauss_params.items():
        assert torch.isfinite(param).all(), name
    records = [json.loads(line) for line in (config.get_base_dir() / strategy.JSONL_NAME).read_text().splitlines()]
    assert [r for r in records if r["event"] == "refine"], "no refine ran"
