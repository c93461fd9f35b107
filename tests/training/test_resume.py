"""Resume: --load-dir continues with the Gaussian count, optimizer, strategy state, camera order and
step of the checkpoint, and ends where the uninterrupted run ends; bad checkpoints are one clear error."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from inprocess import assert_bitwise_equal, build_trainer, clone_state, close_writers, small_scene, trainer_config

from ns_splat_plus import evaluation, strategy
from ns_splat_plus.training import checkpoint, resume
from ns_splat_plus.training.checkpoint import CheckpointError

STEPS = 50
SAVE_EVERY = 35  # between the refines at 30 and 40: strategy statistics, refine count and monitor window all non-empty
EVAL_IMAGE_EVERY = 4  # in-training evaluations of one image each, drawn from nerfstudio's eval order
SUMMARY_EVERY = 20  # gradient summaries at 19 and 39: the one at 39 covers steps from before the resume point


def _config(scene, out):
    config = trainer_config(scene, out, steps=STEPS)
    config.steps_per_eval_image = EVAL_IMAGE_EVERY
    config.pipeline.model.grad_summary_every = SUMMARY_EVERY
    return config


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The uninterrupted run (checkpoints at 35 and 49) and a run resumed from its step 35."""
    root = tmp_path_factory.mktemp("resume")
    scene = small_scene(root / "scene")

    config = _config(scene, root / "full")
    config.steps_per_save = SAVE_EVERY
    config.save_only_latest_checkpoint = False
    full = build_trainer(config)
    full.train()
    close_writers()

    config = _config(scene, root / "resumed")
    config.load_dir = full.checkpoint_dir
    config.load_step = SAVE_EVERY
    resumed = build_trainer(config)
    at_resume = {
        "params": {k: v.detach().clone() for k, v in resumed.pipeline.model.gauss_params.items()},
        "optimizers": {k: clone_state(o.state_dict()) for k, o in resumed.optimizers.optimizers.items()},
        "strategy_state": clone_state(resumed.pipeline.model.strategy_state),
        "start_step": resumed._start_step,
        "model_step": resumed.pipeline.model.step,
        "bound": all(
            o.param_groups[0]["params"][0] is resumed.pipeline.model.gauss_params[k]
            for k, o in resumed.optimizers.optimizers.items()
            if k in resumed.pipeline.model.gauss_params
        ),
    }
    resumed.train()
    close_writers()
    return full, resumed, at_resume, scene


def test_resume_point_holds_the_checkpoint_exactly(runs):
    full, _, at_resume, _ = runs
    saved = torch.load(full.checkpoint_dir / f"step-{SAVE_EVERY:09d}.ckpt", map_location="cpu", weights_only=True)
    assert at_resume["start_step"] == SAVE_EVERY + 1 and at_resume["model_step"] == SAVE_EVERY
    for name, value in at_resume["params"].items():
        assert torch.equal(value, saved["pipeline"][f"_model.gauss_params.{name}"]), name
    assert_bitwise_equal(at_resume["optimizers"], saved["optimizers"], "optimizers")
    assert at_resume["bound"], "optimizers still hold the Parameters replaced by load_state_dict (nerfstudio #3554)"
    assert_bitwise_equal(at_resume["strategy_state"], saved["strategy_state"], "strategy_state")
    assert saved["strategy_state"]["count"].sum() > 0  # statistics accumulated since the last refine


def _records_after(trainer, step):
    lines = (trainer.base_dir / strategy.JSONL_NAME).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["step"] > step and r["event"] != "start"]


def test_resumed_run_ends_bitwise_where_the_uninterrupted_run_ends(runs):
    full, resumed, _, _ = runs
    assert resumed.step == full.step == STEPS - 1
    # densification happened after the resume point, from the restored statistics
    assert resumed.pipeline.model.num_points == full.pipeline.model.num_points
    for name, value in full.pipeline.model.gauss_params.items():
        assert torch.equal(value, resumed.pipeline.model.gauss_params[name]), name
    assert_bitwise_equal(
        {k: o.state_dict() for k, o in full.optimizers.optimizers.items()},
        {k: o.state_dict() for k, o in resumed.optimizers.optimizers.items()},
        "optimizers",
    )
    assert_bitwise_equal(full.pipeline.model.strategy_state, resumed.pipeline.model.strategy_state, "strategy_state")


def test_resumed_run_keeps_the_monitor_the_eval_order_and_the_records(runs):
    """What the checkpoint held beyond the numbers: the gradient monitor's refine count, warned flag and
    zero-gradient run and summary window, the in-training evaluation's image order."""
    full, resumed, _, _ = runs
    monitor = full.pipeline.model.strategy.monitor_state_dict()
    assert monitor["refines"] == 2 and monitor["window_start"] == SUMMARY_EVERY * 2  # a refine before the resume
    assert_bitwise_equal(monitor, resumed.pipeline.model.strategy.monitor_state_dict(), "monitor")
    assert full.pipeline.datamanager.eval_unseen_cameras == resumed.pipeline.datamanager.eval_unseen_cameras
    # the gradient summary at 39 covers steps 20..39 as in the uninterrupted run; the refine at 40 the same
    records = _records_after(full, SAVE_EVERY)
    assert [r["event"] for r in records] == ["gradient_summary", "refine"]
    assert records[0]["first_step"] == SUMMARY_EVERY
    assert _records_after(resumed, SAVE_EVERY) == records


def test_stray_files_in_the_checkpoint_dir_are_ignored(tmp_path):
    (tmp_path / "step-000000010.ckpt").write_bytes(b"")
    (tmp_path / "step-000000020.ckpt.tmp").write_bytes(b"")  # an interrupted save of another version
    (tmp_path / "notes.txt").write_text("x")
    assert checkpoint.checkpoint_steps(tmp_path) == [10]
    assert checkpoint.resolve_checkpoint_path(tmp_path, None, None) == tmp_path / "step-000000010.ckpt"
    with pytest.raises(CheckpointError, match="--load-step") as missing_step:
        checkpoint.resolve_checkpoint_path(tmp_path, 20, None)
    assert "[10]" in str(missing_step.value) and missing_step.value.exit_status == 2  # typed input: exit 2
    with pytest.raises(CheckpointError, match="this --load-dir is a file, not a folder") as not_a_directory:
        checkpoint.resolve_checkpoint_path(tmp_path / "notes.txt", None, None)
    with pytest.raises(CheckpointError, match="no such file") as no_file:
        checkpoint.resolve_checkpoint_path(None, None, tmp_path / "step-000000030.ckpt")
    assert not_a_directory.value.exit_status == no_file.value.exit_status == 2
    # a run's checkpoint folder given to --load-checkpoint: "no such file" sent the user looking for a typo
    with pytest.raises(CheckpointError, match=r"this is a folder of checkpoints \(steps \[10\]\)") as folder:
        checkpoint.resolve_checkpoint_path(None, None, tmp_path)
    assert f"pass --load-dir {tmp_path} to resume" in str(folder.value) and folder.value.exit_status == 2


def test_a_load_dir_that_is_a_checkpoint_or_missing_says_which(tmp_path):
    """A fresh-eyes trial: a checkpoint file, a run that saved nothing and a typo all got "this --load-dir is not a
    directory ... pass the run's nerfstudio_models directory" (the last two had passed just that)."""
    (tmp_path / "step-000000010.ckpt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="is a file") as a_file:
        checkpoint.resolve_checkpoint_path(tmp_path / "step-000000010.ckpt", None, None)
    assert f"pass --load-checkpoint {tmp_path / 'step-000000010.ckpt'} to resume from this file" in str(a_file.value)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yml").write_text("method_name: splat-plus\n")  # a run stopped before its first save
    with pytest.raises(CheckpointError, match="no such folder: that run saved no checkpoint"):
        checkpoint.resolve_checkpoint_path(tmp_path / "run" / "nerfstudio_models", None, None)
    with pytest.raises(CheckpointError, match="no such folder") as typo:
        checkpoint.resolve_checkpoint_path(tmp_path / "rnu" / "nerfstudio_models", None, None)
    assert "check the path" in str(typo.value)


def _write(path: Path, state) -> Path:
    torch.save(state, path)
    return path


def _trainer_state(trainer):
    """A copy of everything a resume loads: parameters, optimizers (Adam's exp_avg, exp_avg_sq and step per
    group, and which Parameters they update), schedulers, grad scaler, strategy state and monitor, camera
    sampler, RNG streams (python, numpy, torch) and the steps."""
    model = trainer.pipeline.model
    optimizers = trainer.optimizers
    return {
        **clone_state(
            {
                "gauss_params": dict(model.gauss_params),
                "optimizers": {k: o.state_dict() for k, o in optimizers.optimizers.items()},
                "schedulers": {k: s.state_dict() for k, s in optimizers.schedulers.items()},
                "grad_scaler": trainer.grad_scaler.state_dict(),
                "strategy_state": model.strategy_state,
                "monitor": model.strategy.monitor_state_dict(),
                "sampler": checkpoint.sampler_state(trainer.pipeline.datamanager),
                "rng": checkpoint.rng_states(),
                "steps": (model.step, trainer.step, trainer._start_step),
            }
        ),
        "bound": [
            o.param_groups[0]["params"][0] is model.gauss_params[k]
            for k, o in optimizers.optimizers.items()
            if k in model.gauss_params
        ],
    }


def test_bad_checkpoints_are_one_clear_error_and_leave_the_trainer_untouched(runs, tmp_path):
    full, resumed, _, _ = runs
    good = full.checkpoint_dir / f"step-{SAVE_EVERY:09d}.ckpt"
    state = torch.load(good, map_location="cpu", weights_only=True)

    truncated = tmp_path / "step-000000025.ckpt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cases = {
        "truncated or corrupt": truncated,
        "written by method 'splat-plus-mcmc'": _write(
            tmp_path / "mcmc.ckpt", {**state, "method_name": "splat-plus-mcmc"}
        ),
        "holds no Gaussians": _write(
            tmp_path / "nerfacto.ckpt", {"step": 3, "pipeline": {"_model.field.w": torch.ones(2)}}
        ),
        "sh-degree": _write(
            tmp_path / "sh.ckpt",
            {
                **state,
                "pipeline": {
                    **state["pipeline"],
                    "_model.gauss_params.features_rest": torch.zeros(
                        state["pipeline"]["_model.gauss_params.means"].shape[0], 3, 3
                    ),
                },
            },
        ),
        "written with --steps-scaler 0.5, this run has 1.0": _write(
            tmp_path / "scaler.ckpt", {**state, "training": {**state["training"], "steps_scaler": 0.5}}
        ),
        "inconsistent Gaussian counts": _write(
            tmp_path / "count.ckpt",
            {**state, "pipeline": {**state["pipeline"], "_model.gauss_params.scales": torch.zeros(7, 3)}},
        ),
    }
    before = _trainer_state(resumed)
    assert all(before["bound"]) and before["steps"] == (STEPS - 1, STEPS - 1, SAVE_EVERY + 1)
    for expected, path in cases.items():
        with pytest.raises(CheckpointError) as err:
            resume.resume(resumed, path)
        message = str(err.value)
        assert expected in message and str(path) in message and "What to do" in message, message
    # files that are no checkpoint at all: named as such, and not "delete it" (they were a user's notes, a config.yml)
    notes, empty, config_yml = tmp_path / "notes.txt", tmp_path / "empty.ckpt", tmp_path / "config.ckpt"
    notes.write_text("my notes on this run")
    empty.write_bytes(b"")
    config_yml.write_bytes((full.base_dir / "config.yml").read_bytes())
    for path, expected in ((notes, "not a PyTorch checkpoint (a text file"), (empty, "the file is empty (0 bytes)"),
                           (config_yml, "not a PyTorch checkpoint (a text file")):  # fmt: skip
        with pytest.raises(CheckpointError) as err:
            resume.resume(resumed, path)
        message = str(err.value)
        assert expected in message and str(path) in message and "delete it" not in message, message
    with pytest.raises(CheckpointError, match="FileNotFoundError"):  # the first-bytes check raises nothing itself
        checkpoint.read_checkpoint(tmp_path / "gone.ckpt")
    foreign = tmp_path / "numpy.ckpt"
    torch.save({"step": 1, "pipeline": {}, "x": __import__("numpy").float64(1.0)}, foreign)
    with pytest.raises(CheckpointError, match="weights_only"):
        checkpoint.read_checkpoint(foreign)
    assert_bitwise_equal(before, _trainer_state(resumed), "trainer")


@pytest.mark.slow
def test_ns_train_with_a_corrupt_checkpoint_prints_one_message_no_traceback(runs, tmp_path):
    _, _, _, scene = runs
    load_dir = tmp_path / "nerfstudio_models"
    load_dir.mkdir()
    (load_dir / "step-000000025.ckpt").write_bytes(b"PK\x03\x04 not really a checkpoint")
    from clirun import console_script

    ns_train = console_script("ns-train")
    proc = subprocess.run(
        [
            str(ns_train),
            "splat-plus",
            "--data",
            str(scene),
            "--output-dir",
            str(tmp_path / "out"),
            "--machine.device-type",
            "cpu",
            "--vis",
            "tensorboard",
            "--viewer.quit-on-train-completion",
            "True",
            "--max-num-iterations",
            "50",
            "--load-dir",
            str(load_dir),
            "colmap",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]
    assert "step-000000025.ckpt" in proc.stderr and "truncated or corrupt" in proc.stderr, proc.stderr[-3000:]


def test_checkpoints_reach_the_disk_before_and_after_the_rename(tmp_path, monkeypatch):
    """The file's bytes are fsynced before the rename makes them the checkpoint, and its directory after."""
    import stat

    final = tmp_path / "nerfstudio_models" / "step-000000007.ckpt"
    synced = []

    def recording_fsync(fd):
        synced.append(("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file", final.exists()))

    monkeypatch.setattr(checkpoint.os, "fsync", recording_fsync)
    path = checkpoint.write_checkpoint({"step": 7, "pipeline": {}}, tmp_path / "nerfstudio_models", 7)
    assert path == final and torch.load(path, weights_only=True)["step"] == 7
    assert synced == [("file", False), ("directory", True)]


def test_a_resumed_run_keeps_the_train_peak_of_the_run_it_continues(runs, tmp_path):
    """Run last: it loads a checkpoint into the resumed trainer."""
    full, resumed, _, _ = runs
    state = torch.load(full.checkpoint_dir / f"step-{SAVE_EVERY:09d}.ckpt", map_location="cpu", weights_only=True)
    tracker = evaluation.memory_tracker(resumed.pipeline.device)
    info = {
        **state["pipeline"][checkpoint.RUN_INFO_KEY],
        "train_peak_memory_bytes": 123_456_789,
        "memory_device": str(tracker.device),
    }
    path = _write(tmp_path / "peak.ckpt", {**state, "pipeline": {**state["pipeline"], checkpoint.RUN_INFO_KEY: info}})
    resume.resume(resumed, path)
    assert tracker.train_peak_bytes == 123_456_789
    assert checkpoint.run_info(resumed)["train_peak_memory_bytes"] == 123_456_789  # in the next checkpoint too


def test_a_run_folder_given_to_load_dir_names_its_checkpoints_folder(tmp_path):
    """--load-dir RUN (not RUN/nerfstudio_models): the hint names the folder to pass (a fresh-eyes trial)."""
    run = tmp_path / "run"
    (run / "nerfstudio_models").mkdir(parents=True)
    (run / "config.yml").write_text("x")
    with pytest.raises(CheckpointError, match="no step-<N>.ckpt") as bare:
        checkpoint.resolve_checkpoint_path(run, None, None)
    assert "pass the run's nerfstudio_models directory" in str(bare.value)  # it holds no checkpoint yet
    (run / "nerfstudio_models" / "step-000000010.ckpt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no step-<N>.ckpt") as run_folder:
        checkpoint.resolve_checkpoint_path(run, None, None)
    assert f"pass --load-dir {run / 'nerfstudio_models'}, the run's checkpoints" in str(run_folder.value)
