"""Build and run splat-plus trainers inside the test process (no ns-train subprocess).

config = trainer_config(scene_dir, out_dir, steps=40)
trainer = build_trainer(config)       # what ns-train's train_loop does, minus train()
trainer.train()
close_writers()                       # nerfstudio's writers are process globals
"""

from __future__ import annotations

from pathlib import Path

from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from nerfstudio.utils import writer

from ns_splat_plus.method import splat_plus_trainer_config
from splatbench.scenes import SceneSpec, make_scene

SMALL_SCENE = SceneSpec(n_views=16, width=48, height=36, focal=42.0)


def small_scene(out_dir: Path) -> Path:
    """16 views of 48x36 (the colmap parser's interval split holds out 2 of them)."""
    return make_scene(out_dir, SMALL_SCENE)


def trainer_config(scene: Path, out_dir: Path, steps: int, method_name: str = "splat-plus", preset=None):
    """splat-plus on a CPU, no viewer, no periodic evaluation, a refine every 10 steps from step 10.
    ``preset``: a method's own config (e.g. ``splat_plus_lite_trainer_config()``) to adjust so, instead."""
    if preset is not None:
        config = preset
    else:
        config = splat_plus_trainer_config(method_name, strategy="mcmc" if method_name.endswith("mcmc") else "default")
    config.pipeline.datamanager.data = Path(scene)
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig()
    config.machine.device_type = "cpu"
    config.output_dir = Path(out_dir)
    config.experiment_name = "test"
    config.max_num_iterations = steps
    config.vis = "tensorboard"  # eval_iteration runs only with an event writer
    config.viewer.quit_on_train_completion = True
    config.logging.local_writer.enable = False
    config.steps_per_eval_image = 0
    config.steps_per_eval_batch = 0
    config.steps_per_eval_all_images = 0
    config.steps_per_save = 1000
    model = config.pipeline.model
    model.num_downscales = 0
    model.warmup_length = 10
    model.refine_every = 10
    model.sh_degree_interval = 20
    config.set_timestamp()
    return config


def build_trainer(config):
    """ns-train's train_loop up to train(): seed, construct, set up."""
    from nerfstudio.scripts.train import _set_random_seed

    config.save_config()
    _set_random_seed(config.machine.seed)
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def run_config(scene: Path, out: Path, name: str, steps: int, timestamp: str = "run"):
    """:func:`trainer_config` laid out as a CLI run of ``clirun.ns_train(scene, out, name, steps)``
    (``out/name/splat-plus/timestamp``), no warmup: a run for a test that only reads it (ns-eval, ns-export,
    --load-dir, --load-config) or one whose subject is not the command line."""
    config = trainer_config(scene, out, steps=steps)
    config.experiment_name = name
    config.timestamp = timestamp
    config.warmup_steps = 0
    return config


def train(config):
    """Builds and trains ``config`` in this process (ns-train's train_loop); the finished trainer."""
    try:
        trainer = build_trainer(config)
        trainer.train()
    finally:
        close_writers()
    return trainer


def close_writers() -> None:
    for event_writer in writer.EVENT_WRITERS:
        inner = getattr(event_writer, "tb_writer", None)
        if inner is not None:
            inner.close()
    writer.EVENT_WRITERS.clear()
    writer.EVENT_STORAGE.clear()
    writer.GLOBAL_BUFFER.clear()


def clone_state(obj):
    """A detached copy of nested dicts / lists / tuples of tensors and plain values (a state to compare
    later with :func:`assert_bitwise_equal`)."""
    import copy

    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: clone_state(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone_state(v) for v in obj)
    return copy.deepcopy(obj)


def assert_bitwise_equal(a, b, where: str = "state") -> None:
    """Bitwise equality of nested dicts / lists / tuples of tensors, arrays and plain values
    (tensors must also agree in dtype, shape and device); ``where`` names the first difference."""
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert a.device == b.device and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_bitwise_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_bitwise_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a} != {b}"


def default_strategy_state(info, parameter, absgrad: bool = True):
    """splat-plus's default strategy's running state (count, grad2d, radii) after one step of ``info``, for the
    Gaussians of ``parameter`` (their means)."""
    from ns_splat_plus import strategy

    default = strategy.InstrumentedDefaultStrategy(absgrad=absgrad, refine_scale2d_stop_iter=1, verbose=False)
    state = default.initialize_state()
    default._update_state({"means": parameter}, state, info)
    return state
