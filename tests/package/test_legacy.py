"""Run directories written before the package was reshaped (0.1.0, flat modules) still load."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from clirun import console_script

from splatbench.scenes import SceneSpec, make_scene

FIXTURE = Path(__file__).parents[1] / "data" / "legacy-run-0.1.0"
SPEC = SceneSpec(n_views=8, width=32, height=24, focal=28.0, n_points=200)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The layout the old run was written in: scene/ and out/legacy/splat-plus/old/ (relative paths)."""
    root = tmp_path_factory.mktemp("legacy")
    make_scene(root / "scene", SPEC)
    shutil.copytree(FIXTURE, root / "out" / "legacy" / "splat-plus" / "old", ignore=shutil.ignore_patterns("README.md"))
    return root


def test_the_old_layouts_config_loads_into_todays_classes():
    """What ns-eval, ns-viewer and resume do first with an old run directory: load its config.yml, whose
    classes are named by 0.1.0's flat modules, into the classes of today."""
    import yaml

    from ns_splat_plus.model import SplatPlusModel, SplatPlusModelConfig
    from ns_splat_plus.parallel import DataParallelConfig, SplatPlusMachineConfig
    from ns_splat_plus.training.datamanager import SplatPlusDataManager, SplatPlusDataManagerConfig
    from ns_splat_plus.training.pipeline import SplatPlusPipeline, SplatPlusPipelineConfig
    from ns_splat_plus.training.trainer import SplatPlusTrainer, SplatPlusTrainerConfig
    from ns_splat_plus.viewer import SplatPlusViewerConfig

    text = (FIXTURE / "config.yml").read_text()
    # the fixture still names the old modules (else this test and the slow ones below would prove nothing)
    named = set(re.findall(r"!!python/(?:object|name):(ns_splat_plus\.\w+)\.\w+", text))
    assert {"ns_splat_plus.trainer", "ns_splat_plus.distributed", "ns_splat_plus.devices"} <= named, named
    config = yaml.load(text, Loader=yaml.Loader)
    assert type(config) is SplatPlusTrainerConfig and config._target is SplatPlusTrainer
    assert type(config.data_parallel) is DataParallelConfig and type(config.machine) is SplatPlusMachineConfig
    pipeline = config.pipeline
    assert type(pipeline) is SplatPlusPipelineConfig and pipeline._target is SplatPlusPipeline
    assert type(pipeline.datamanager) is SplatPlusDataManagerConfig
    assert pipeline.datamanager._target is SplatPlusDataManager
    assert type(pipeline.model) is SplatPlusModelConfig and pipeline.model._target is SplatPlusModel
    assert type(config.viewer) is SplatPlusViewerConfig
    assert config.method_name == "splat-plus" and pipeline.datamanager.train_cameras_sampling_seed == 42


@pytest.mark.slow
def test_ns_eval_scores_a_run_written_by_the_old_layout(workdir):
    out = workdir / "metrics.json"
    proc = subprocess.run(
        [console_script("ns-eval"), "--load-config", "out/legacy/splat-plus/old/config.yml", "--output-path", str(out)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert results["num_images"] == 1 and 5.0 < results["psnr"] < 60.0
    assert (
        results["num_gaussians"]
        == json.loads((FIXTURE / "densification.jsonl").read_text().splitlines()[0])["num_gaussians"]
    )


@pytest.mark.slow
def test_ns_train_resumes_a_checkpoint_written_by_the_old_layout(workdir):
    proc = subprocess.run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            "scene",
            "--output-dir",
            "resumed",
            "--machine.device-type",
            "cpu",
            "--vis",
            "tensorboard",
            "--max-num-iterations",
            "15",
            "--pipeline.model.num-downscales",
            "0",
            "--warmup-steps",
            "1",
            "--load-dir",
            "out/legacy/splat-plus/old/nerfstudio_models",
            "colmap",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Resumed from" in proc.stdout and "step 11" in proc.stdout, proc.stdout[-2000:]
    saved = sorted((workdir / "resumed").rglob("step-*.ckpt"))
    assert [p.name for p in saved] == ["step-000000014.ckpt"]


def test_a_config_written_before_the_layers_loads_with_its_options():
    """0.2.0's config.yml names viewer/exit_rule.py (now viewer/config.py, aliased in legacy.py) and keeps
    fused_adam on the model (now the trainer's): it loads, the old option is honoured, and its
    already scaled schedule is not scaled again."""
    import yaml

    from ns_splat_plus import parallel
    from ns_splat_plus.viewer import SplatPlusViewerConfig

    text = (Path(__file__).parents[1] / "data" / "config-0.2.0" / "config.yml").read_text()
    assert "ns_splat_plus.viewer.exit_rule.SplatPlusViewerConfig" in text and "    fused_adam: true" in text
    config = yaml.load(text, Loader=yaml.Loader)
    assert type(config.viewer) is SplatPlusViewerConfig
    assert config.fused_adam is None and config.fused_adam_on("cpu")  # the model's old option, honoured
    assert config.max_num_iterations == 7500 and config.data_parallel.scaled_for_world_size == 4
    assert parallel.scale_schedule(config, 4, config.data_parallel) == [] and config.max_num_iterations == 7500
