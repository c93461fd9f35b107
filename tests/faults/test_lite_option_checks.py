"""Issue 50, item 4: splat-plus-lite's ``--pipeline.model.efficient-*`` options (and the other densification
options with a valid range) are checked at launch: one line naming the option and its valid values, exit
status 2, no traceback, no run directory. A cap below the initial Gaussian count is refused at set-up.

The ranges themselves are tested in tests/strategy/test_option_definitions.py; here, that ns-train applies them.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from clirun import TINY_SCENE, assert_one_message, cli_env, ns_eval, ns_train_cmd, run

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.method import splat_plus_lite_trainer_config
from ns_splat_plus.training import inputs
from splatbench.scenes import make_scene


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("efficient_num_views", -3, "must be an integer >= 1, got -3"),
        ("efficient_budget_growth", math.nan, "must be a number >= 0, got nan"),
        ("efficient_prune_fraction", -0.5, "must be "),
    ],
)
def test_check_options_refuses_a_strategy_option_out_of_range(name, value, says):
    config = splat_plus_lite_trainer_config()
    config.machine.device_type = "cpu"
    inputs.check_options(config)  # lite's own values pass
    setattr(config.pipeline.model, name, value)
    with pytest.raises(UserInputError) as info:
        inputs.check_options(config)
    assert f"--pipeline.model.{name.replace('_', '-')} {says}" in str(info.value), str(info.value)
    assert info.value.exit_status == 2


def test_one_strategys_options_typed_for_another_are_refused():
    """An efficient-* or MCMC option on the command line of a run that densifies otherwise would do nothing: one
    message. The same options under their strategy, or not typed (a preset's values, lite's), pass."""
    config = splat_plus_lite_trainer_config()
    model = config.pipeline.model
    inputs.check_strategy_options(model, {"efficient_late_prunes"})  # lite: the efficient strategy
    model.strategy = "default"
    inputs.check_strategy_options(model, set())  # lite's preset values, not typed: nothing to say
    inputs.check_strategy_options(model, {"cull_alpha_thresh"})  # every strategy's option
    with pytest.raises(UserInputError) as info:
        inputs.check_strategy_options(model, {"efficient_num_views", "efficient_late_prunes"})
    message = str(info.value)
    assert message.startswith(
        "--pipeline.model.efficient-late-prunes and --pipeline.model.efficient-num-views are options of "
        "--pipeline.model.strategy efficient, but this run densifies with --pipeline.model.strategy default"
    ), message
    assert "What to do: add --pipeline.model.strategy efficient (splat-plus-lite's)" in message
    assert info.value.exit_status == 2
    with pytest.raises(UserInputError) as info:
        inputs.check_strategy_options(model, {"max_gs_num", "cull_alpha_thresh"})
    assert str(info.value).startswith(
        "--pipeline.model.max-gs-num is an option of --pipeline.model.strategy mcmc, but this run densifies with "
        "--pipeline.model.strategy default: it would do nothing"
    ), str(info.value)
    model.strategy = "mcmc"
    inputs.check_strategy_options(model, {"max_gs_num", "noise_lr", "mcmc_opacity_reg", "mcmc_scale_reg"})
    with pytest.raises(
        UserInputError, match="efficient-prune-score is an option of --pipeline.model.strategy efficient"
    ):
        inputs.check_strategy_options(model, {"efficient_prune_score", "max_gs_num"})


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)  # 200 SfM points: 200 initial Gaussians


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, option, value, needle",
    [
        ("splat-plus-lite", "efficient-num-views", "0", "--pipeline.model.efficient-num-views must be an integer >= 1, got 0"),
        ("splat-plus-lite", "efficient-max-gaussians", "10", "--pipeline.model.efficient-max-gaussians 10 is below the 200 Gaussians"),
        ("splat-plus", "efficient-late-prunes", "4", "--pipeline.model.efficient-late-prunes is an option of --pipeline.model.strategy efficient, but this run densifies with --pipeline.model.strategy default"),
        ("splat-plus-lite", "max-gs-num", "500000", "--pipeline.model.max-gs-num is an option of --pipeline.model.strategy mcmc, but this run densifies with --pipeline.model.strategy efficient"),
    ],
)  # fmt: skip
def test_lite_refuses_a_bad_option_with_one_message(scene, tmp_path, method, option, value, needle):
    """A range checked at launch (every one goes through the same check: the others, a NaN included, in
    test_check_options_refuses_a_strategy_option_out_of_range above), the cap checked at set-up, and one strategy's
    option typed for another's method (efficient-* for splat-plus, MCMC's cap for splat-plus-lite)."""
    cmd = ns_train_cmd(scene, tmp_path, "lite", 5, f"--pipeline.model.{option}", value)
    cmd[cmd.index("splat-plus")] = method
    output = assert_one_message(run(cmd), needle, status=2)
    assert sum(needle in line for line in output.splitlines()) == 1, output  # said once
    left = sorted(str(p) for p in tmp_path.rglob("*") if not p.is_dir())  # set-up may leave lite/<method>/
    assert not left and not (tmp_path / "lite" / method / "run").exists(), left


@pytest.mark.slow
def test_mcmc_under_a_cap_below_its_start_trains_and_says_so_once(scene, tmp_path):
    """splat-plus-mcmc with --pipeline.model.max-gs-num under the 200 SfM points: one line, then it trains keeping
    every Gaussian and adding none (MCMC never removes one), as splatfacto-mcmc would."""
    cmd = ns_train_cmd(scene, tmp_path, "mcmc", 30, "--pipeline.model.max-gs-num", "10",
                       "--pipeline.model.warmup-length", "5", "--pipeline.model.refine-every", "5")  # fmt: skip
    cmd[cmd.index("splat-plus")] = "splat-plus-mcmc"
    proc = run(cmd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    note = "--pipeline.model.max-gs-num 10 is below the 200 Gaussians this run starts from"
    assert proc.stdout.count(note) == 1, proc.stdout[-3000:]
    run_dir = tmp_path / "mcmc" / "splat-plus-mcmc" / "run"
    records = [json.loads(line) for line in (run_dir / "densification.jsonl").read_text().splitlines()]
    refines = [r for r in records if r["event"] == "refine"]
    assert refines and all(r["added"] == 0 and r["num_gaussians"] == 200 for r in refines), refines


@pytest.mark.slow
def test_an_ssim_kernel_named_but_missing_is_refused_before_training(scene, tmp_path):
    """--pipeline.model.ssim-kernel fused-ssim where rahul-goel/fused-ssim does not import: one message, exit 2, no run
    left (a fused_ssim module that fails to import stands in for it, so the test means the same where it is built).
    ns-eval of a run trained where it was installed still loads it: tests/kernels/test_ssim.py constructs one."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "fused_ssim.py").write_text("raise ImportError('fused-ssim is not built here')\n")
    env = cli_env(PYTHONPATH=os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p))
    cmd = ns_train_cmd(scene, tmp_path / "out", "ssim", 5, "--pipeline.model.ssim-kernel", "fused-ssim")
    needle = (
        "--pipeline.model.ssim-kernel fused-ssim: the fused_ssim package (with its CUDA kernels) does not import here"
    )
    output = assert_one_message(run(cmd, env=env), needle, "What to do: pip install", status=2)
    assert output.count(needle) == 1, output
    assert not (tmp_path / "out" / "ssim" / "splat-plus" / "run").exists()
    # a run trained where fused-ssim was installed (its config.yml names it) still evaluates here
    trained = run(ns_train_cmd(scene, tmp_path / "out", "trained", 3))
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    config_yml = tmp_path / "out" / "trained" / "splat-plus" / "run" / "config.yml"
    text = config_yml.read_text()
    assert "ssim_kernel: auto" in text
    config_yml.write_text(text.replace("ssim_kernel: auto", "ssim_kernel: fused-ssim"))
    evaluated = ns_eval(config_yml, tmp_path / "metrics.json", env=env)
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr[-3000:]
    assert (tmp_path / "metrics.json").is_file()


@pytest.mark.slow
def test_an_ssim_kernel_named_on_the_cpu_is_refused_before_training(scene, tmp_path):
    """--pipeline.model.ssim-kernel triton on the CPU trained with pytorch_msssim, silently, while config.yml said
    triton (a fresh-eyes trial): one message, exit 2, no run folder left."""
    env = {k: v for k, v in cli_env().items() if k != "TRITON_INTERPRET"}  # compiled Triton: what a user runs
    cmd = ns_train_cmd(scene, tmp_path / "out", "ssim", 5, "--pipeline.model.ssim-kernel", "triton")
    needle = "--pipeline.model.ssim-kernel triton runs on CUDA GPUs only, and this run trains on cpu"
    output = assert_one_message(
        run(cmd, env=env), needle, "What to do: pass --pipeline.model.ssim-kernel auto", status=2
    )
    assert output.count(needle) == 1, output
    assert not (tmp_path / "out" / "ssim" / "splat-plus" / "run").exists()
