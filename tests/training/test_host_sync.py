"""The training step never makes the host wait for the GPU, at one and at B cameras per step (GPU).

A synchronisation in the step (a ``.item()``, a host index tensor copied over, ``torch.inverse``'s
error check) drains the GPU's queue: the GPU then idles while the host prepares the next kernels,
and the step time becomes host time plus GPU time. The reads the run makes on purpose are periodic
(finiteness checks and gradient statistics every 25 steps, refines, logging steps, checkpoints) and
fall outside the window checked here; every other synchronisation is reported with where it came from.

Only what torch raises as a Python warning is seen: gsplat's intersection count (``.item()`` inside
its pybind11 extension, the one synchronisation per step by design) does not show up here.
"""

from __future__ import annotations

import traceback
import warnings

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

PERIOD = 25  # CheckedOptimizers' check_every, and the gradient monitor's read interval (patience 100 / 4)
STEPS = 2 * PERIOD + 5
WINDOW = range(PERIOD + 1, 2 * PERIOD - 2)  # past the first epochs (each camera's first step makes its cache)


def _syncs_by_step(tmp_path, cameras_per_step: int):
    """Train STEPS steps through the trainer's own loop with torch's sync debug mode on; returns
    ``{step: [stack summaries]}`` of every synchronising CUDA call."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=STEPS)
    config.machine.device_type = "cuda"
    config.warmup_steps = 0
    config.logging.steps_per_log = 10_000  # step 0 only
    config.pipeline.datamanager.cameras_per_step = cameras_per_step
    model = config.pipeline.model
    model.refine_every = 10_000  # statistics accumulate every step, no refine in the run
    model.warmup_length = 0
    trainer = build_trainer(config)
    found = {}

    def show(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message):
            frames = [f for f in traceback.extract_stack()[:-1] if "site-packages/torch" not in f.filename]
            found.setdefault(trainer.step, []).append(
                " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(frames[-6:]))
            )

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        torch.cuda.set_sync_debug_mode("warn")
        try:
            trainer.train()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            close_writers()
    return found


@pytest.mark.parametrize("cameras_per_step", [1, 4])
def test_training_steps_do_not_synchronise_with_the_gpu(tmp_path, cameras_per_step):
    found = _syncs_by_step(tmp_path, cameras_per_step)
    assert found, "the sync debug mode reported nothing, not even the periodic reads: the check is not working"
    in_window = {step: sites for step, sites in found.items() if step in WINDOW}
    assert not in_window, "\n".join(f"step {s}: {site}" for s, sites in sorted(in_window.items()) for site in sites)
