"""Where options live: each in the config of the code that reads it, bookkeeping off the command line.

``--fused-adam`` is the trainer's (it steps the optimizers), not the model's; the schedule-scaling
bookkeeping of ``DataParallelConfig`` (``scaled_for_*``) is no option, but config.yml keeps it so that
a config loaded again is not scaled twice; config.yml files written before the move still load.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from clirun import ns_train_help

from ns_splat_plus import parallel
from ns_splat_plus.method import splat_plus_fast, splat_plus_trainer_config
from ns_splat_plus.parallel import DeviceResolutionError

LEGACY_CONFIG = Path(__file__).parents[1] / "data" / "legacy-run-0.1.0" / "config.yml"


@pytest.mark.slow
def test_help_lists_the_options_and_not_the_bookkeeping(tmp_path_factory):
    proc = ns_train_help(tmp_path_factory)  # run once, also read by tests/cli/test_help.py and tests/docs
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--fused-adam" in proc.stdout and "--data-parallel.lr-scaling" in proc.stdout
    assert "scaled-for" not in proc.stdout and "scaled_for" not in proc.stdout
    assert "--pipeline.model.fused-adam" not in proc.stdout


def test_the_schedule_bookkeeping_is_saved_and_a_loaded_config_is_not_scaled_again():
    config = splat_plus_trainer_config()
    config.steps_scaler = 0.5
    assert parallel.scale_schedule(config, 4, config.data_parallel)
    # what save_config writes and --load-config / ns-eval read back
    loaded = yaml.load(yaml.dump(config), Loader=yaml.Loader)
    assert loaded.data_parallel.scaled_for_world_size == 4 and loaded.data_parallel.scaled_for_steps_scaler == 0.5
    steps = loaded.max_num_iterations
    assert steps == 30000 // 8
    assert parallel.scale_schedule(loaded, 4, loaded.data_parallel) == [] and loaded.max_num_iterations == steps
    with pytest.raises(DeviceResolutionError, match="already scaled for 4"):
        parallel.scale_schedule(loaded, 2, loaded.data_parallel)


def test_fused_adam_is_the_trainers_option():
    config = splat_plus_trainer_config()
    assert config.fused_adam is None and not hasattr(config.pipeline.model, "fused_adam")
    assert config.fused_adam_on("cuda:0") and not config.fused_adam_on("cpu")  # None: on with CUDA
    config.fused_adam = False
    assert not config.fused_adam_on("cuda:0")
    assert splat_plus_fast.config.fused_adam is True and splat_plus_fast.config.fused_adam_on("cpu")


@pytest.mark.parametrize("value, on_cpu", [("true", True), ("false", False), ("null", False)])
def test_a_config_yml_with_the_models_old_fused_adam_still_loads_and_is_honoured(value, on_cpu):
    text = LEGACY_CONFIG.read_text()
    anchor = "    init_seed: null\n"  # a line of pipeline.model
    assert anchor in text
    config = yaml.load(text.replace(anchor, anchor + f"    fused_adam: {value}\n"), Loader=yaml.Loader)
    assert config.fused_adam is None  # not in that file: the class default
    assert config.fused_adam_on("cpu") is on_cpu
    trainer_says_off = copy.copy(config)
    trainer_says_off.fused_adam = False  # --fused-adam False wins over the old model option
    assert not trainer_says_off.fused_adam_on("cuda:0")
