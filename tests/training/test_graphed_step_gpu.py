"""--cuda-graph on CUDA (ns_splat_plus.training.graphed_step): a replayed step computes the eager step's loss and
gradients; training through refines records again and densifies from the replayed gradients; a step whose tiles do
not fit is recorded again with room. The background is black, so that a step's loss does not hang on its draw,
except in the test of the random background: a replay draws a new one, the eager run's."""

from __future__ import annotations

import json

import pytest
import torch
from inprocess import build_trainer, close_writers, default_strategy_state, small_scene, trainer_config

from ns_splat_plus import strategy, upstream
from ns_splat_plus.training import graphed_step
from ns_splat_plus.training.step import run_training_step

LOSS_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 1e-3
"""The eager step's SH are gsplat's kernel, the recorded step's PyTorch's (upstream.recordable_spherical_harmonics):
the same formula summed in another order, and the backward adds with atomics. A replay that misses a kernel is off
by tens of percent (benchmarks/2026-11-29-h200-cuda-graph-first-runs/)."""

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("graphed_gpu_scene"))


def _cuda_config(scene, out, steps, cuda_graph):
    config = trainer_config(scene, out, steps=steps)
    config.machine.device_type = "cuda"
    config.cuda_graph = cuda_graph
    config.warmup_steps = 0
    config.pipeline.model.background_color = "black"
    return config


def _stepped_with_next_cameras(scene, tmp_path, cameras: int):
    """A trainer stepped eagerly through steps 0-11, in train mode, and the (camera, batch) of the
    next ``cameras`` steps, 12 on, their photos copied (the prefetcher reuses its buffers)."""
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=30, cuda_graph=False))
    for step in range(12):
        run_training_step(trainer, step)
    trainer.pipeline.train()
    pairs = []
    for step in range(12, 12 + cameras):
        camera, batch = trainer.pipeline.datamanager.next_train(step)
        pairs.append((camera, dict(batch, image=batch["image"].clone())))
    return trainer, pairs


def _eager_step(trainer, step: int):
    """The eager forward and backward of ``step`` in train mode, from no gradients: its camera, batch and loss
    (the caller drops the loss: no step's autograd graph may stay, see graphed_step's module docstring)."""
    model = trainer.pipeline.model
    trainer.pipeline.train()
    model.step = step
    camera, batch = trainer.pipeline.datamanager.next_train(step)
    model.zero_grad(set_to_none=True)
    loss = sum(model.get_loss_dict(model(camera), batch, {}).values())
    loss.backward()
    return camera, batch, loss


def test_a_replayed_step_gives_the_eager_step_s_loss_and_gradients(scene, tmp_path):
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=30, cuda_graph=False))
    try:
        for step in range(15):  # past a refine: Gaussians added and removed
            run_training_step(trainer, step)
        model = trainer.pipeline.model
        step = 15
        camera, batch, loss = _eager_step(trainer, step)
        params = [p for p in model.parameters() if p.requires_grad]
        eager_loss = float(loss)
        eager = [None if p.grad is None else p.grad.detach().clone() for p in params]  # SH degree 0: no rest grad
        eager_grad2d = model.info["means2d"].grad.detach().clone()
        del loss  # as the loop, which keeps no step's autograd graph (graphed_step's module docstring)

        graphed = graphed_step.GraphedForwardBackward(trainer)
        graphed._capture(step, camera, batch)
        graphed.graph.replay()
        torch.cuda.synchronize()
        assert not bool(graphed._info["isect_overflow"])
        assert float(graphed._loss) == pytest.approx(eager_loss, rel=LOSS_TOLERANCE)
        for p, g in zip(params, eager):  # gsplat's backward adds with atomics: equal up to the order of the sums
            assert (p.grad is None) == (g is None)
            if g is None:
                continue
            assert float((p.grad - g).abs().max()) <= GRADIENT_TOLERANCE * float(g.abs().max()) + 1e-12
        replayed_grad2d = graphed._info["means2d"].grad
        assert (
            float((replayed_grad2d - eager_grad2d).abs().max())
            <= GRADIENT_TOLERANCE * float(eager_grad2d.abs().max()) + 1e-12
        )
    finally:
        close_writers()


def test_graphed_training_records_again_at_refines_and_densifies_from_replayed_gradients(scene, tmp_path):
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=45, cuda_graph=True))
    try:
        trainer.train()
    finally:
        close_writers()
    graphed = trainer.graphed_step
    assert isinstance(graphed, graphed_step.GraphedForwardBackward)
    assert graphed.failure is None, graphed.failure
    records = [json.loads(line) for line in (trainer.base_dir / strategy.JSONL_NAME).read_text().splitlines()]
    refines = [r for r in records if r.get("event") == "refine"]
    assert refines, "no refine in 45 steps"
    assert graphed.captures >= len(refines) + 1  # each refine replaces the Parameters: recorded again
    grown = sum(r.get("duplicated", 0) + r.get("split", 0) for r in refines)
    assert grown > 0, "densification saw no gradient: the replayed step's 2D gradients did not reach it"
    assert all(torch.isfinite(p).all() for p in trainer.pipeline.model.parameters())


def test_a_step_whose_tiles_do_not_fit_is_recorded_again_with_room(scene, tmp_path, monkeypatch):
    monkeypatch.setattr(graphed_step, "CAPACITY_MARGIN", 1.0)  # room for the recording camera's count only
    monkeypatch.setattr(graphed_step, "CAPACITY_SLACK", 0)
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=9, cuda_graph=True))
    try:
        trainer.train()  # refine_every 10: one recording's Parameters through all 9 steps, 14 cameras
    finally:
        close_writers()
    graphed = trainer.graphed_step
    assert graphed.failure is None, graphed.failure
    assert graphed.overflows > 0, "every camera had at most the first camera's tile count: no overflow to test"
    assert graphed.recordings["tiles"] > 0  # read one step late, then recorded with room
    # step 0's opacity reset replaces a Parameter (as gsplat's DefaultStrategy): nothing else records again
    assert set(graphed.recordings) <= {"first", "new Parameters", "tiles"}, dict(graphed.recordings)
    assert graphed.capacity >= graphed.largest_count > 0


def test_replays_on_other_cameras_give_each_camera_s_loss_and_gradients(scene, tmp_path):
    """One recording, replayed on five cameras: each replay must compute what the eager step computes for that
    camera and its photo (nothing of the recording camera baked in)."""
    try:
        trainer, pairs = _stepped_with_next_cameras(scene, tmp_path, 5)
        model = trainer.pipeline.model
        params = [p for p in model.parameters() if p.requires_grad]
        steps = list(range(12, 17))
        assert len({int(camera.metadata["cam_idx"]) for camera, _ in pairs}) > 1
        eager = []
        for step, (camera, batch) in zip(steps, pairs):
            model.step = step
            for p in params:
                p.grad = None
            loss = sum(model.get_loss_dict(model(camera), batch, {}).values())
            loss.backward()
            grads = [None if p.grad is None else p.grad.clone() for p in params]
            eager.append((float(loss.detach()), grads, model.info["means2d"].grad.clone()))
            del loss
        graphed = graphed_step.GraphedForwardBackward(trainer)
        model.step = steps[0]
        graphed._capture(steps[0], *pairs[0])
        for (camera, batch), (loss, grads, grad2d) in zip(pairs, eager):
            viewmat, camtoworlds, K, _, _ = graphed._camera_inputs(camera)
            graphed.replay(viewmat, camtoworlds, K, batch["image"])
            torch.cuda.synchronize()
            assert not bool(graphed._info["isect_overflow"])
            assert float(graphed._loss) == pytest.approx(loss, rel=LOSS_TOLERANCE), camera.metadata["cam_idx"]
            for p, g in zip(params, grads):
                assert (p.grad is None) == (g is None)
                if g is not None:
                    assert float((p.grad - g).abs().max()) <= GRADIENT_TOLERANCE * float(g.abs().max()) + 1e-12
            replayed = graphed._info["means2d"].grad
            assert float((replayed - grad2d).abs().max()) <= GRADIENT_TOLERANCE * float(grad2d.abs().max()) + 1e-12
    finally:
        close_writers()


def test_a_recording_cuda_refuses_leaves_the_stream_as_it_was(scene, tmp_path, monkeypatch):
    """torch's graph context returns at a failed capture_end without restoring the stream it made current; eager
    steps left on it would race gsplat's SH kernels, which launch on the legacy default stream."""
    forward_backward = graphed_step.GraphedForwardBackward._forward_backward

    def refused_while_recording(self, step):
        forward_backward(self, step)
        if torch.cuda.is_current_stream_capturing():
            torch.cuda.synchronize()  # not allowed while a stream records: CUDA refuses the recording

    monkeypatch.setattr(graphed_step.GraphedForwardBackward, "_forward_backward", refused_while_recording)
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=6, cuda_graph=True))
    before = torch.cuda.current_stream()
    try:
        trainer.train()
    finally:
        close_writers()
    graphed = trainer.graphed_step
    assert graphed.failure is not None and "recording the step failed" in graphed.failure, graphed.failure
    assert graphed.captures == 0
    assert torch.cuda.current_stream() == before
    assert all(torch.isfinite(p).all() for p in trainer.pipeline.model.parameters())


def test_a_replay_whose_tiles_do_not_fit_gives_no_gradient(scene, tmp_path, monkeypatch):
    """Its render dropped entries; the step's update must not follow that render's gradients (graphed_step's module)."""
    monkeypatch.setattr(graphed_step, "CAPACITY_MARGIN", 1.0)  # room for the recording camera's count only
    monkeypatch.setattr(graphed_step, "CAPACITY_SLACK", 0)
    try:
        trainer, pairs = _stepped_with_next_cameras(scene, tmp_path, 14)
        model = trainer.pipeline.model
        params = [p for p in model.parameters() if p.requires_grad]
        graphed = graphed_step.GraphedForwardBackward(trainer)
        model.step = 12
        graphed._capture(12, *pairs[0])
        overflowed = fitted = 0
        for camera, batch in pairs:
            viewmat, camtoworlds, K, _, _ = graphed._camera_inputs(camera)
            graphed.replay(viewmat, camtoworlds, K, batch["image"])
            grads = [p.grad for p in params if p.grad is not None] + [graphed._info["means2d"].grad]
            if bool(graphed._info["isect_overflow"]):
                overflowed += 1
                assert all(not bool(g.any()) for g in grads)
                assert not bool((graphed._info["radii"] > 0).any())  # densification does not count the step
            else:
                fitted += 1
                assert any(bool(g.any()) for g in grads)
        assert overflowed > 0, "no camera had more tile entries than the recording camera"
        assert fitted > 0
    finally:
        close_writers()


def test_at_sh_degree_3_a_replay_gives_densification_the_eager_step_s_statistics(scene, tmp_path):
    """What splat-plus's default strategy reads after a step, at SH degree 3 (the recorded step's SH are Triton's,
    the eager step's gsplat's): the replay's radii are the eager step's, its ``means2d`` gradient and ``absgrad``
    agree within the tolerance, one step of the strategy's state counts the same Gaussians with the same
    accumulated gradient, and every Parameter's gradient agrees by its norm. (Written after splat-plus lost 0.78 dB with the graph,
    benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality.)"""
    trainer = build_trainer(_cuda_config(scene, tmp_path / "run", steps=30, cuda_graph=False))
    try:
        for step in range(15):
            run_training_step(trainer, step)
        model = trainer.pipeline.model
        step = 3 * model.config.sh_degree_interval
        assert min(step // model.config.sh_degree_interval, model.config.sh_degree) == 3
        camera, batch, loss = _eager_step(trainer, step)
        eager_info = model.info
        eager = {name: getattr(eager_info["means2d"], name).detach().clone() for name in ("grad", "absgrad")}
        eager_radii = eager_info["radii"].clone()
        means = model.gauss_params["means"]
        eager_state = default_strategy_state(eager_info, means)
        params = dict(model.named_parameters())
        eager_grads = {name: p.grad.detach().clone() for name, p in params.items() if p.grad is not None}
        # the eager step's autograd graph must go before a recording (graphed_step's module docstring)
        del loss, eager_info
        model.info = {}

        graphed = graphed_step.GraphedForwardBackward(trainer)
        graphed._capture(step, camera, batch)
        graphed.graph.replay()
        torch.cuda.synchronize()
        info = graphed._info
        assert not bool(info["isect_overflow"])
        assert torch.equal(info["radii"], eager_radii)
        for name, expected in eager.items():
            replayed = getattr(info["means2d"], name)
            assert float((replayed - expected).abs().max()) <= GRADIENT_TOLERANCE * float(expected.abs().max()) + 1e-12
        state = default_strategy_state(info, means)
        assert torch.equal(state["count"], eager_state["count"])
        assert torch.equal(state["radii"], eager_state["radii"])
        difference = float((state["grad2d"] - eager_state["grad2d"]).abs().max())
        assert difference <= GRADIENT_TOLERANCE * float(eager_state["grad2d"].abs().max()) + 1e-12
        # the update: every Parameter's gradient, as a whole (a term the SH's view directions add to the means
        # is small next to their largest gradient, so each is compared by its norm, not its largest element)
        assert {name for name, p in params.items() if p.grad is not None} == set(eager_grads)
        for name, expected in eager_grads.items():
            off = float(torch.linalg.vector_norm(params[name].grad - expected))
            assert off <= GRADIENT_TOLERANCE * float(torch.linalg.vector_norm(expected)) + 1e-12, name
    finally:
        close_writers()


def test_a_graphed_run_draws_the_eager_run_s_random_backgrounds(scene, tmp_path):
    """splatfacto's default background is a random colour per training step. A replay draws a new one (torch's CUDA
    generator moves on at each replay), not the recorded one, and the eager run's: a recording leaves the generator
    where it found it (its unrecorded runs draw too), and each replay draws at the generator's offset as an eager
    step does."""
    config = _cuda_config(scene, tmp_path / "run", steps=30, cuda_graph=False)
    config.pipeline.model.background_color = "random"
    trainer = build_trainer(config)
    try:
        for step in range(12):
            run_training_step(trainer, step)
        model = trainer.pipeline.model
        trainer.pipeline.train()
        model.step = 12
        camera, batch = trainer.pipeline.datamanager.next_train(12)
        device = torch.device(trainer.device)
        before = torch.cuda.get_rng_state(device)
        eager = [upstream.background(model).clone() for _ in range(3)]  # what steps 12, 13, 14 draw eagerly
        torch.cuda.set_rng_state(before, device)
        graphed = graphed_step.GraphedForwardBackward(trainer)
        graphed._capture(12, camera, batch)
        assert torch.equal(torch.cuda.get_rng_state(device), before), "the recording moved the generator on"
        drawn = []
        for _ in range(3):
            graphed.graph.replay()
            drawn.append(graphed._outputs["background"].clone())
        torch.cuda.synchronize()
        assert len({tuple(colour.tolist()) for colour in eager}) == 3
        assert all(bool(((colour >= 0) & (colour < 1)).all()) for colour in drawn)
        for want, got in zip(eager, drawn):
            assert torch.equal(got, want), (got, want)
    finally:
        close_writers()
