"""A resume with other model options than the run it continues is named in one warning (a fresh-eyes trial: a
resume that left out the quickstart's --pipeline.model.num-downscales 0, --warmup-length and --refine-every went
on at a quarter of the resolution and without densification, without a word); the same options say nothing."""

from __future__ import annotations

import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus.training import options_record
from ns_splat_plus.training.checkpoint import RUN_INFO_KEY

STEPS = 4


def test_the_checkpoint_records_the_model_options_and_a_resume_names_those_that_differ(tmp_path, capsys):
    scene = small_scene(tmp_path / "scene")
    first = trainer_config(scene, tmp_path / "first", steps=STEPS)
    first.warmup_steps = 0
    trainer = build_trainer(first)
    try:
        trainer.train()
    finally:
        close_writers()
    path = trainer.checkpoint_dir / f"step-{STEPS - 1:09d}.ckpt"
    record = torch.load(path, map_location="cpu", weights_only=True)["pipeline"][RUN_INFO_KEY][
        options_record.RECORD_KEY
    ]
    assert record["num_downscales"] == 0 and record["refine_every"] == 10 and record["strategy"] == "default"

    for changed in (False, True):
        again = trainer_config(scene, tmp_path / f"again{changed}", steps=STEPS + 2)
        again.warmup_steps = 0
        again.load_dir = trainer.checkpoint_dir
        if changed:  # what leaving the options out of the resume command does
            again.pipeline.model.num_downscales, again.pipeline.model.refine_every = 2, 100
        capsys.readouterr()
        try:
            build_trainer(again).train()
        finally:
            close_writers()
        printed = " ".join(capsys.readouterr().out.split())
        assert printed.count("Config: ") == 1  # config.yml written again without --load-step: said once
        if not changed:
            assert "other model options" not in printed, printed[-2000:]
            continue
        assert f"Resuming {path} with other model options than the run that wrote it" in printed, printed[-2000:]
        assert "--pipeline.model.num-downscales 0 -> 2; --pipeline.model.refine-every 10 -> 100." in printed


def test_lists_are_recorded_as_typed_and_nested_configs_are_left_out():
    from ns_splat_plus.model.model import SplatPlusModelConfig

    config = SplatPlusModelConfig()
    record = options_record.options_record(config)
    assert "camera_optimizer" not in record and all(not isinstance(v, tuple) for v in record.values())
    config.densify_callbacks = ("a.b:c", "d.e:f")
    changes = options_record.changed_options(record, config)
    assert changes == [f"--pipeline.model.densify-callbacks {' '.join(record['densify_callbacks'])} -> a.b:c d.e:f"]
    assert options_record.changed_options(None, config) == []  # a checkpoint written before the record existed
