"""Options at launch that used to do something else than they say (issue 33, "risks found by reading the code"):
``--pipeline.model.strategy mcmc`` on splat-plus takes the MCMC recipe's thresholds, ``--load-config`` starts
a new run, the scale regulariser's interval follows the schedule, and the grad scaler's missing NaN check is said."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import CPU_CLI_ARGS, console_script, free_port
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import strategy
from ns_splat_plus.method import splat_plus_trainer_config
from ns_splat_plus.parallel import DataParallelConfig
from ns_splat_plus.parallel.schedule import scale_schedule
from ns_splat_plus.training import trainer as trainer_module


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return small_scene(tmp_path_factory.mktemp("options_scene"))


def _ns_train(scene: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        console_script("ns-train"),
        "splat-plus",
        "--data",
        str(scene),
        "--output-dir",
        str(out),
        "--max-num-iterations",
        "2",
        "--warmup-steps",
        "0",
        *CPU_CLI_ARGS,
        *extra,
        "colmap",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def _run_dirs(out: Path):
    return sorted(p.parent for p in out.glob("*/*/*/config.yml"))


def _start_settings(run_dir: Path) -> dict:
    records = [json.loads(line) for line in (run_dir / strategy.JSONL_NAME).read_text().splitlines()]
    (start,) = [r for r in records if r["event"] == "start"]
    return start["settings"]


def _model_config(run_dir: Path):
    return yaml.load((run_dir / "config.yml").read_text(), Loader=yaml.Loader).pipeline.model


@pytest.fixture(scope="module")
def mcmc_switch_run(scene, tmp_path_factory):
    out = tmp_path_factory.mktemp("mcmc_switch")
    proc = _ns_train(scene, out, "--pipeline.model.strategy", "mcmc")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = _run_dirs(out)
    return proc, out, run_dir


@pytest.mark.slow
def test_the_mcmc_switch_on_splat_plus_relocates_at_the_mcmc_recipes_threshold(mcmc_switch_run):
    proc, _, run_dir = mcmc_switch_run
    settings = _start_settings(run_dir)
    assert settings["min_opacity"] == 0.005 and settings["refine_stop_iter"] == 25000, settings
    model = _model_config(run_dir)
    assert (model.strategy, model.cull_alpha_thresh, model.stop_split_at) == ("mcmc", 0.005, 25000)
    assert "the MCMC recipe's" in proc.stdout and "cull-alpha-thresh 0.1 -> 0.005" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
def test_the_mcmc_switch_keeps_values_the_user_set(scene, tmp_path):
    proc = _ns_train(scene, tmp_path, "--pipeline.model.strategy", "mcmc", "--pipeline.model.cull-alpha-thresh", "0.1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = _run_dirs(tmp_path)
    settings = _start_settings(run_dir)
    assert settings["min_opacity"] == 0.1 and settings["refine_stop_iter"] == 25000, settings


def test_options_given_reads_both_spellings():
    argv = ["ns-train", "splat-plus", "--pipeline.model.cull_alpha_thresh=0.2", "--pipeline.model.stop-split-at", "9"]
    assert strategy.options_given(argv, "pipeline.model", strategy.MCMC_RECIPE) == {
        "cull_alpha_thresh",
        "stop_split_at",
    }
    assert strategy.options_given(argv[:2], "pipeline.model", strategy.MCMC_RECIPE) == set()


@pytest.mark.slow
def test_load_config_starts_a_new_run_with_the_saved_options(mcmc_switch_run, scene):
    _, out, old_run = mcmc_switch_run
    before = {p: p.read_bytes() for p in old_run.rglob("*") if p.is_file()}
    config_yml = old_run / "config.yml"
    cmd = [console_script("ns-train"), "splat-plus", "--load-config", str(config_yml)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "already exists" not in proc.stdout + proc.stderr
    new_runs = [d for d in _run_dirs(out) if d != old_run]
    assert len(new_runs) == 1 and new_runs[0].parent == old_run.parent, _run_dirs(out)
    assert "--load-config: a new run" in proc.stdout, proc.stdout[-3000:]
    # the new run has the saved options (the MCMC switch's values) and its own checkpoint
    model = _model_config(new_runs[0])
    assert (model.strategy, model.cull_alpha_thresh, model.stop_split_at) == ("mcmc", 0.005, 25000)
    assert list((new_runs[0] / "nerfstudio_models").glob("step-*.ckpt"))
    # nothing of the earlier run changed
    assert {p: p.read_bytes() for p in old_run.rglob("*") if p.is_file()} == before


def test_the_scale_regulariser_interval_is_scaled_with_cameras_per_step():
    config = splat_plus_trainer_config()
    assert config.pipeline.model.scale_reg_every == 10
    scale_schedule(config, 4, DataParallelConfig())  # W x B = 4: splatfacto's every 10 cameras -> every 3 steps
    assert config.pipeline.model.scale_reg_every == 3
    config = splat_plus_trainer_config()
    scale_schedule(config, 16, DataParallelConfig())
    assert config.pipeline.model.scale_reg_every == 1


def test_the_model_applies_the_scale_regulariser_on_its_interval(scene, tmp_path):
    config = trainer_config(scene, tmp_path, steps=10)
    config.pipeline.model.use_scale_regularization = True
    config.pipeline.model.max_gauss_ratio = 1.0  # every Gaussian above the ratio: the term is positive when applied
    config.pipeline.model.scale_reg_every = 3
    trainer = build_trainer(config)
    try:
        model = trainer.pipeline.model
        model.gauss_params["scales"].data[:, 0] += 1.0  # anisotropic (the initial Gaussians are round)
        camera, batch = trainer.pipeline.datamanager.next_train(0)
        model.eval()  # a render without the strategy's training hooks: the loss is what is tested
        outputs = model.get_outputs(camera)
        model.train()
        applied = {}
        for step in range(7):
            model.step = step
            applied[step] = float(model.get_loss_dict(outputs, batch)["scale_reg"]) > 0
        assert applied == {s: s % 3 == 0 for s in range(7)}, applied
    finally:
        close_writers()


def test_one_line_says_the_gradient_nan_check_is_off_under_the_grad_scaler(scene, tmp_path, monkeypatch):
    printed = []
    monkeypatch.setattr(trainer_module.CONSOLE, "print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    config = trainer_config(scene, tmp_path / "off", steps=10)
    build_trainer(config)
    close_writers()
    assert not [p for p in printed if "not checked for NaN" in p]
    config = trainer_config(scene, tmp_path / "on", steps=10)
    # the scaler needs CUDA; here a switched-on one is what the trainer finds
    monkeypatch.setattr("torch.cuda.amp.GradScaler.is_enabled", lambda self: True)
    build_trainer(config)
    close_writers()
    assert [p for p in printed if "not checked for NaN" in p] == [trainer_module.GRAD_SCALER_NOTE]


@pytest.mark.slow
def test_ns_train_lite_on_the_cpu_says_why_its_step_is_not_graphed_and_trains(scene, tmp_path):
    """`ns-train splat-plus-lite ...` as typed (--cuda-graph is on by its preset), the viewer on (its default): on a
    machine without CUDA, one line says why the step runs eagerly, and the run trains and saves its checkpoint."""
    cmd = [
        console_script("ns-train"),
        "splat-plus-lite",
        "--data",
        str(scene),
        "--output-dir",
        str(tmp_path / "out"),
        "--max-num-iterations",
        "9",  # lite's schedule is a third of the given steps: 3 steps
        "--machine.device-type",
        "cpu",  # CI has no GPU; the viewer stays on, on a free local port
        "--viewer.websocket-host",
        "127.0.0.1",
        "--viewer.websocket-port",
        str(free_port()),
        "colmap",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("--cuda-graph: the step runs eagerly: it needs a CUDA GPU") == 1, proc.stdout[-3000:]
    (run_dir,) = _run_dirs(tmp_path / "out")
    assert list((run_dir / "nerfstudio_models").glob("step-*.ckpt")), "no checkpoint"
    assert yaml.load((run_dir / "config.yml").read_text(), Loader=yaml.Loader).cuda_graph is True  # the preset's, saved


@pytest.mark.slow
def test_splatfactos_image_placement_flags_run_and_are_said_to_be_ignored(scene, tmp_path):
    """A splatfacto command line with its usual memory flag (and the other placement flag) trains: splat-plus
    accepts them and says once, under the line about the train images, that it ignores them."""
    proc = _ns_train(
        scene, tmp_path, "--pipeline.datamanager.cache-images", "cpu", "--pipeline.datamanager.images-on-gpu", "True"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    (note,) = [i for i, line in enumerate(lines) if ": ignored (splatfacto's)" in line]
    assert lines[note].startswith("--pipeline.datamanager.cache-images cpu and --pipeline.datamanager.images-on-gpu")
    assert lines[note - 1].startswith("Train images: "), lines[note - 1]
    assert len(_run_dirs(tmp_path)) == 1


@pytest.mark.slow
def test_colour_only_gaussians_train_from_full_white_points(scene, tmp_path):
    """`--pipeline.model.sh-degree 0` (splatfacto's colour-only Gaussians, a sigmoid of ``features_dc``) on a scene
    whose SfM points have full-white channels (255): their logit starts finite, so training runs and saves."""
    proc = _ns_train(scene, tmp_path / "out", "--pipeline.model.sh-degree", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = _run_dirs(tmp_path / "out")
    assert list((run_dir / "nerfstudio_models").glob("step-*.ckpt")), "no checkpoint"
