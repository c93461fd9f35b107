"""The loop's per-step timing events: written to the event writers only on logging steps, while the
running averages the console and viewer read are nerfstudio's, step for step."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.utils import writer

from ns_splat_plus.training.loop import put_step_times

ITER = writer.EventName.ITER_TRAIN_TIME.value
RAYS = writer.EventName.TRAIN_RAYS_PER_SEC.value
ETA = writer.EventName.ETA.value


def _fresh_buffer(max_iter: int = 100) -> None:
    writer.EVENT_STORAGE.clear()
    writer.GLOBAL_BUFFER.clear()
    writer.GLOBAL_BUFFER.update(max_iter=max_iter, max_buffer_size=20, steps_per_log=10, events={})


@pytest.fixture
def fake_trainer():
    datamanager = SimpleNamespace(get_train_rays_per_batch=lambda: 1000)
    yield SimpleNamespace(world_size=1, pipeline=SimpleNamespace(datamanager=datamanager))
    writer.EVENT_STORAGE.clear()
    writer.GLOBAL_BUFFER.clear()


def test_step_times_reach_the_writers_only_on_logging_steps(fake_trainer):
    durations = [0.01 * (1 + (k % 7)) for k in range(35)]  # 35 steps: the 20-step buffer wraps
    _fresh_buffer()
    for step, duration in enumerate(durations):
        put_step_times(fake_trainer, step, duration, log_step=step % 10 == 0)
    written = [(e["name"], e["step"]) for e in writer.EVENT_STORAGE]
    ours = {k: dict(v) if isinstance(v, dict) else v for k, v in writer.GLOBAL_BUFFER["events"].items()}

    # nerfstudio's own loop: put_time on every step
    _fresh_buffer()
    for step, duration in enumerate(durations):
        writer.put_time(ITER, duration, step, avg_over_steps=True, update_eta=True)
        if step > 1:
            writer.put_time(RAYS, 1000 / duration, step, avg_over_steps=True)
    upstream = writer.GLOBAL_BUFFER["events"]
    upstream_points = [(e["name"], e["step"]) for e in writer.EVENT_STORAGE]

    assert ours == upstream  # the same running averages and ETA after every step
    assert ours[ITER]["avg"] == pytest.approx(sum(durations[-20:]) / 20)
    assert {name for name, _ in written} == {ITER, RAYS, ETA}
    assert sorted({step for _, step in written}) == [0, 10, 20, 30]
    assert [s for n, s in written if n == RAYS] == [10, 20, 30]  # from step 2, as nerfstudio
    assert len(upstream_points) > 3 * len(written)  # nerfstudio queued a point per event and step


def test_nothing_is_recorded_before_the_writers_are_set_up(fake_trainer):
    writer.GLOBAL_BUFFER.clear()
    writer.EVENT_STORAGE.clear()
    put_step_times(fake_trainer, 5, 0.01, log_step=True)
    put_step_times(fake_trainer, 6, 0.01, log_step=False)
    assert writer.EVENT_STORAGE == [] and writer.GLOBAL_BUFFER == {}


def test_a_training_run_logs_iteration_times_at_logging_steps(tmp_path):
    """A real (CPU) run: TensorBoard holds the iteration time at the logging steps only, and the losses,
    written without torch's warning about reading a tensor that requires grad (a line on the console)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=25)
    config.logging.steps_per_log = 10
    trainer = build_trainer(config)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train()
    finally:
        close_writers()
    events = EventAccumulator(str(config.get_base_dir())).Reload()
    assert [e.step for e in events.Scalars(ITER)] == [0, 10, 20]
    assert [e.step for e in events.Scalars("Train Loss")] == [0, 10, 20]
    assert all(math.isfinite(e.value) and e.value > 0 for e in events.Scalars("Train Loss"))
    assert [str(w.message) for w in caught if "requires_grad" in str(w.message)] == []


def test_eval_iteration_runs_only_on_steps_with_an_evaluation_due(tmp_path):
    """nerfstudio's loop calls eval_iteration every step; ours only where one of its intervals is due."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=25)
    config.steps_per_eval_batch, config.steps_per_eval_image, config.steps_per_eval_all_images = 7, 0, 0
    trainer = build_trainer(config)
    calls = []
    evaluate = trainer.eval_iteration
    trainer.eval_iteration = lambda step: calls.append(step) or evaluate(step)
    try:
        trainer.train()
    finally:
        close_writers()
    assert calls == [7, 14, 21]
