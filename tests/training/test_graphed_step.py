"""--cuda-graph (ns_splat_plus.training.graphed_step): where the recorded step applies, and that the trainer
takes it from the loop's start. The recording and replay themselves need CUDA:
tests/training/test_graphed_step_gpu.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from inprocess import build_trainer, close_writers, default_strategy_state, small_scene, trainer_config

from ns_splat_plus.training import graphed_step
from ns_splat_plus.training import trainer as trainer_module
from ns_splat_plus.training.step import optimize


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("graphed_scene"))


def _fake_trainer(**changes):
    """A trainer as unavailable_reason reads it: every condition met (a CUDA run of lite), then ``changes``."""
    values = dict(device="cuda:0", world_size=1, cameras_per_step=1, rasterizer="auto", camera_optimizer="off",
                  bilateral=False, scale_reg=False, masks=None, mixed_precision=False, accumulation=1,
                  log_gradients=False)  # fmt: skip
    values.update(changes)
    model_config = SimpleNamespace(
        rasterizer=values["rasterizer"],
        camera_optimizer=SimpleNamespace(mode=values["camera_optimizer"]),
        use_bilateral_grid=values["bilateral"],
        use_scale_regularization=values["scale_reg"],
    )
    dataset = SimpleNamespace(_dataparser_outputs=SimpleNamespace(mask_filenames=values["masks"]))
    return SimpleNamespace(
        device=values["device"],
        world_size=values["world_size"],
        mixed_precision=values["mixed_precision"],
        gradient_accumulation_steps={"means": values["accumulation"], "scales": 1},
        config=SimpleNamespace(
            log_gradients=values["log_gradients"],
            pipeline=SimpleNamespace(datamanager=SimpleNamespace(cameras_per_step=values["cameras_per_step"])),
        ),
        pipeline=SimpleNamespace(
            model=SimpleNamespace(config=model_config), datamanager=SimpleNamespace(train_dataset=dataset)
        ),
    )


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"device": "cpu"}, "CUDA"),
        ({"cameras_per_step": 2}, "one camera per step"),
        ({"cameras_per_step": "auto", "world_size": 1}, "one camera per step"),  # auto: 4 on one GPU
        ({"rasterizer": "reference"}, "reference"),
        ({"camera_optimizer": "SO3xR3"}, "camera optimizer"),
        ({"bilateral": True}, "bilateral grid"),
        ({"scale_reg": True}, "scale regulariser"),
        ({"masks": ["mask.png"]}, "masks"),
        ({"mixed_precision": True}, "mixed precision"),
        ({"accumulation": 2}, "gradient accumulation"),
        ({"log_gradients": True}, "--log-gradients"),
    ],
)
def test_each_condition_the_graph_cannot_reproduce_is_named(change, reason):
    assert graphed_step.unavailable_reason(_fake_trainer()) is None
    why = graphed_step.unavailable_reason(_fake_trainer(**change))
    assert why is not None and reason in why, why


def test_several_ranks_step_eagerly(monkeypatch):
    monkeypatch.setattr(graphed_step.collectives, "get_world_size", lambda: 2)
    assert "one process" in graphed_step.unavailable_reason(_fake_trainer())


def test_cuda_graph_on_the_cpu_says_why_and_trains_eagerly(scene, tmp_path, capsys):
    config = trainer_config(scene, tmp_path / "run", steps=4)
    config.cuda_graph = True
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    assert trainer.graphed_step is None
    assert "--cuda-graph: the step runs eagerly: it needs a CUDA GPU" in capsys.readouterr().out


def test_where_fused_ssim_would_run_the_graphed_run_takes_tritons_ssim_and_says_so(
    scene, tmp_path, monkeypatch, capsys
):
    """fused-ssim's kernels launch on CUDA's legacy stream, which a recording does not capture: from its first
    recording the graphed step makes every step of the run, eager ones too, take the Triton kernels (so that they ran
    before the recording), and the run says so in one line. The CPU stands in for CUDA: the graph's conditions and the
    SSIM's backend are made to hold, and the recording stops at the CUDA graph itself."""
    from ns_splat_plus.model.ssim import TrainingSSIM

    monkeypatch.setattr(graphed_step, "unavailable_reason", lambda trainer: None)
    monkeypatch.setattr(TrainingSSIM, "backend", lambda self, device: "fused-ssim")
    config = trainer_config(scene, tmp_path / "run", steps=1)
    config.cuda_graph = True
    trainer = build_trainer(config)
    try:
        ssim = trainer.pipeline.model.loss_ssim
        capsys.readouterr()
        graphed = graphed_step.graphed_step_for(trainer)
        assert isinstance(graphed, graphed_step.GraphedForwardBackward)
        assert capsys.readouterr().out.count("--cuda-graph: the loss's SSIM runs the fused Triton kernels") == 1
        assert not ssim.recordable

        class Stop(Exception):
            pass

        def before_the_unrecorded_run(params, step):
            raise Stop(ssim.recordable)

        monkeypatch.setattr(graphed, "_run_unrecorded", before_the_unrecorded_run)
        camera, batch = trainer.pipeline.datamanager.next_train(0)
        with pytest.raises(Stop) as stopped:
            graphed._capture(0, camera, batch)
        assert stopped.value.args == (True,)  # set before the eager run that precedes the recording
        trainer.pipeline.model.config.fused_loss = True  # lite's fused loss holds its own SSIM: no line
        monkeypatch.setattr(TrainingSSIM, "fused_on", lambda self, device: True)
        graphed_step.graphed_step_for(trainer)
        assert "SSIM" not in capsys.readouterr().out
    finally:
        close_writers()


def test_off_by_default_no_line(scene, tmp_path, capsys):
    trainer = build_trainer(trainer_config(scene, tmp_path / "run", steps=2))
    try:
        trainer.train()
    finally:
        close_writers()
    assert trainer.config.cuda_graph is False and trainer.graphed_step is None
    assert "--cuda-graph" not in capsys.readouterr().out


def test_splat_plus_lite_asks_for_the_graph_and_the_other_methods_do_not():
    from ns_splat_plus.method import splat_plus, splat_plus_fast, splat_plus_lite, splat_plus_mcmc

    assert splat_plus_lite.config.cuda_graph is True
    assert [m.config.cuda_graph for m in (splat_plus, splat_plus_fast, splat_plus_mcmc)] == [False, False, False]


def test_the_loop_takes_every_step_from_the_graphed_step_after_the_warmup(scene, tmp_path, monkeypatch, capsys):
    """What graphed_step_for returns steps the loop: every training step after the warmup, none before; its
    summary is printed when training ends."""
    stepped = []

    class Recording:
        def __init__(self, trainer):
            self.trainer = trainer

        def __call__(self, number):
            stepped.append(number)
            return optimize(self.trainer, number)

        def summary(self):
            return f"--cuda-graph: stepped {len(stepped)} times"

    def recording(trainer):
        return Recording(trainer)

    monkeypatch.setattr(trainer_module, "graphed_step_for", recording)
    config = trainer_config(scene, tmp_path / "run", steps=6)
    config.warmup_steps = 2
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    assert stepped == list(range(6))
    assert "--cuda-graph: stepped 6 times" in capsys.readouterr().out


def test_the_summary_names_each_reason_for_a_recording_and_the_capacity():
    graphed = graphed_step.GraphedForwardBackward(SimpleNamespace())
    graphed.recordings.update({"first": 1, "new Parameters": 45, "SH degree": 3, "tiles": 2})
    graphed.capacity = 123456
    assert graphed.captures == 51
    assert graphed.summary() == (
        "--cuda-graph: 51 recordings of the step (1 first, 45 new Parameters, 3 SH degree, 2 tiles); "
        "123,456 tile slots at the end"
    )
    graphed.overflows = 3
    assert "; 3 replays' tiles did not fit (no gradient); 123,456 tile slots" in graphed.summary()


def _recorded(params, key):
    """A GraphedForwardBackward as if it had recorded ``params`` (their current gradients) under ``key``."""
    model = SimpleNamespace(parameters=lambda: list(params))
    graphed = graphed_step.GraphedForwardBackward(SimpleNamespace(pipeline=SimpleNamespace(model=model)))
    graphed.graph = object()
    graphed._params = list(params)
    graphed._storages = [p.data_ptr() for p in params]
    graphed._grads = [p.grad for p in params]
    graphed._key = key
    return graphed


def test_each_change_of_what_the_recording_baked_in_is_named_as_its_reason():
    params = [torch.nn.Parameter(torch.zeros(3)) for _ in range(2)]
    for p in params:
        p.grad = torch.zeros(3)
    key = (64, 48, 1, 0, (48, 64, 3), torch.float32, 5000, True)
    assert _recorded(params, key)._why_record(key) is None
    assert graphed_step.GraphedForwardBackward(SimpleNamespace())._why_record(key) == "first"
    changes = {0: "image size", 1: "image size", 2: "downscale", 3: "SH degree", 4: "photo shape", 5: "photo type",
               6: "capacity", 7: "train mode"}  # fmt: skip
    for index, reason in changes.items():
        changed = list(key)
        changed[index] = 2 if index != 7 else False
        assert _recorded(params, key)._why_record(tuple(changed)) == reason
    graphed = _recorded(params, key)
    params[1].grad = torch.zeros(3)  # an eager step set the gradients to new tensors
    assert graphed._why_record(key) == "gradients reset"
    graphed = _recorded(params, key)
    params[1].data = torch.ones(3)  # a restored snapshot: the same Parameter on other memory
    assert graphed._why_record(key) == "new Parameters"
    graphed = _recorded(params, key)
    params[0] = torch.nn.Parameter(torch.zeros(5))  # a refine or an opacity reset replaced a Parameter
    assert graphed._why_record(key) == "new Parameters"


def test_a_recording_cuda_refuses_says_so_once_and_every_later_step_is_eager(monkeypatch, capsys):
    stepped = []
    monkeypatch.setattr(graphed_step, "optimize", lambda trainer, step: stepped.append(step) or ("loss", {}, {}))
    monkeypatch.setattr(graphed_step.torch.cuda, "synchronize", lambda: None)
    model = SimpleNamespace(info={"means2d": "of an eager step"})
    trainer = SimpleNamespace(pipeline=SimpleNamespace(model=model))
    graphed = graphed_step.GraphedForwardBackward(trainer)

    def refused(step, camera, batch):
        raise torch.AcceleratorError("CUDA error: operation not permitted when stream is capturing")

    monkeypatch.setattr(graphed, "_capture", refused)
    assert graphed._record(7, None, None, "first") is False
    assert graphed.failure is not None and "step 7" in graphed.failure and "not permitted" in graphed.failure
    assert capsys.readouterr().out.count("recording the step failed") == 1
    assert model.info == {} and graphed.captures == 0
    assert graphed(8) == ("loss", {}, {}) and graphed(9) == ("loss", {}, {})
    assert stepped == [8, 9]
    assert graphed.summary() == f"--cuda-graph: {graphed.failure}"


def test_a_failure_that_is_not_cuda_s_refusal_to_record_is_raised(monkeypatch):
    graphed = graphed_step.GraphedForwardBackward(SimpleNamespace(pipeline=SimpleNamespace(model=SimpleNamespace())))

    def out_of_memory(step, camera, batch):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(graphed, "_capture", out_of_memory)
    with pytest.raises(torch.OutOfMemoryError):
        graphed._record(3, None, None, "first")
    assert graphed.failure is None


def _render(colors: float, alphas: float):
    return {"render_colors": torch.full((1, 4, 4, 3), colors), "render_alphas": torch.full((1, 4, 4, 1), alphas)}


def test_a_replay_is_checked_against_the_eager_render_of_its_recording_camera():
    eager = graphed_step.render_sums(_render(0.25, 0.5))
    assert eager.tolist() == [0.25 * 48, 0.5 * 16]
    assert graphed_step.replay_mismatch(eager, graphed_step.render_sums(_render(0.25, 0.5))) is None
    assert graphed_step.replay_mismatch(eager, eager * (1 + 0.1 * graphed_step.REPLAY_TOLERANCE)) is None
    off = graphed_step.replay_mismatch(eager, graphed_step.render_sums(_render(0.25 * 1.68, 0.5)))
    assert off is not None and "colours summed 20.16 against 12" in off and "alphas" not in off
    assert "alphas" in graphed_step.replay_mismatch(eager, graphed_step.render_sums(_render(0.25, float("nan"))))


def test_a_replay_that_renders_other_pixels_than_the_eager_step_gives_the_run_back_to_eager_steps(monkeypatch, capsys):
    stepped = []
    monkeypatch.setattr(graphed_step, "optimize", lambda trainer, step: stepped.append(step) or ("eager", {}, {}))
    datamanager = SimpleNamespace(next_train=lambda step: ("camera", {"image": None}))
    trainer = SimpleNamespace(pipeline=SimpleNamespace(model=SimpleNamespace(info={}), datamanager=datamanager))
    graphed = graphed_step.GraphedForwardBackward(trainer)
    monkeypatch.setattr(graphed, "_camera_inputs", lambda camera: (None, None, None, 4, 4))
    monkeypatch.setattr(graphed, "_baked_in", lambda *args: ())
    monkeypatch.setattr(graphed, "_why_record", lambda key: None)  # recorded before this step
    monkeypatch.setattr(graphed, "replay", lambda *args: None)
    monkeypatch.setattr(graphed, "_queue_overflow_read", lambda: None)  # no overflow: none read
    graphed._eager_sums = graphed_step.render_sums(_render(0.25, 0.5))
    graphed._outputs = _render(0.25 * 1.68, 0.5)  # what the replay rendered
    assert graphed(3) == ("eager", {}, {}) and stepped == [3]
    assert graphed.failure is not None and "rendered other pixels" in graphed.failure and "step 3" in graphed.failure
    assert capsys.readouterr().out.count("rendered other pixels") == 1
    assert graphed(4) == ("eager", {}, {}) and stepped == [3, 4]


def test_a_replay_s_loss_is_checked_against_the_loss_of_its_own_render():
    eager = torch.tensor(0.225)
    assert graphed_step.loss_mismatch(eager, torch.tensor(0.225)) is None
    assert graphed_step.loss_mismatch(eager, eager * (1 + 0.1 * graphed_step.REPLAY_TOLERANCE)) is None
    assert graphed_step.loss_mismatch(eager, torch.tensor(0.288)) == "loss 0.288 against 0.225"
    assert graphed_step.loss_mismatch(eager, torch.tensor(float("nan"))) == "loss nan against 0.225"


def test_a_replay_whose_loss_is_not_its_render_s_gives_the_run_back_to_eager_steps(monkeypatch, capsys):
    """A kernel of the loss that the recording did not capture (fused-ssim's, on the legacy stream) leaves the replay's
    loss stale while its render is right: the first replay of a recording recomputes the loss from its render, photo
    and background outside the graph, and a difference ends the graph with one line."""
    stepped = []
    monkeypatch.setattr(graphed_step, "optimize", lambda trainer, step: stepped.append(step) or ("eager", {}, {}))
    datamanager = SimpleNamespace(next_train=lambda step: ("camera", {"image": None}))
    losses_read = []

    def get_loss_dict(outputs, batch, metrics_dict):
        losses_read.append((outputs, batch))
        return {"main_loss": torch.tensor(0.2), "scale_reg": torch.tensor(0.025)}

    model = SimpleNamespace(info={}, get_loss_dict=get_loss_dict)
    trainer = SimpleNamespace(pipeline=SimpleNamespace(model=model, datamanager=datamanager))
    graphed = graphed_step.GraphedForwardBackward(trainer)
    monkeypatch.setattr(graphed, "_camera_inputs", lambda camera: (None, None, None, 4, 4))
    monkeypatch.setattr(graphed, "_baked_in", lambda *args: ())
    monkeypatch.setattr(graphed, "_why_record", lambda key: None)  # recorded before this step
    monkeypatch.setattr(graphed, "replay", lambda *args: None)
    monkeypatch.setattr(graphed, "_queue_overflow_read", lambda: None)
    graphed._eager_sums = graphed_step.render_sums(_render(0.25, 0.5))
    graphed._outputs, graphed._batch = _render(0.25, 0.5), {"image": "the photo"}  # the render is right...
    graphed._loss = torch.tensor(0.288)  # ...its loss is not
    replayed = (graphed._outputs, graphed._batch)
    assert graphed(3) == ("eager", {}, {}) and stepped == [3]
    assert len(losses_read) == 1 and all(a is b for a, b in zip(losses_read[0], replayed))  # the replay's own
    assert graphed.failure is not None and "computed another loss" in graphed.failure
    assert "step 3 (loss 0.288 against 0.225)" in graphed.failure
    assert capsys.readouterr().out.count("computed another loss") == 1


def test_the_loss_recomputed_from_a_render_is_the_training_step_s_loss(scene, tmp_path):
    """What the guard recomputes from a replay's outputs is the loss the training step computes from them (the CPU's
    eager step stands in for the replay: the model's own outputs and photo), and it keeps no autograd graph."""
    trainer = build_trainer(trainer_config(scene, tmp_path / "run", steps=2))
    try:
        from ns_splat_plus.training.step import run_training_step

        model = trainer.pipeline.model
        run_training_step(trainer, 0)  # a training step sets the model up for the next (its optimizers)
        camera, batch = trainer.pipeline.datamanager.next_train(1)
        outputs = model(camera)
        want = float(sum(model.get_loss_dict(outputs, batch, {}).values()))
        graphed = graphed_step.GraphedForwardBackward(trainer)
        graphed._outputs, graphed._batch = outputs, batch
        got = graphed._eager_loss()
        assert not got.requires_grad and got.grad_fn is None
        assert float(got) == pytest.approx(want, rel=1e-6)
        assert graphed_step.loss_mismatch(got, torch.tensor(want)) is None
    finally:
        close_writers()


def test_a_replay_s_overflow_is_read_once_at_the_next_step_with_its_tile_count():
    graphed = graphed_step.GraphedForwardBackward(SimpleNamespace())
    waited = []
    event = SimpleNamespace(synchronize=lambda: waited.append(True))
    assert not graphed._previous_replay_overflowed()  # nothing replayed yet
    graphed._overflow_read, graphed._overflow_pending = (event, torch.tensor(False), torch.tensor(900)), True
    assert not graphed._previous_replay_overflowed() and waited == [True]
    assert (graphed.overflows, graphed.largest_count) == (0, 0)
    graphed._overflow_read, graphed._overflow_pending = (event, torch.tensor(True), torch.tensor(1234)), True
    assert graphed._previous_replay_overflowed()
    assert (graphed.overflows, graphed.largest_count) == (1, 1234)
    assert not graphed._previous_replay_overflowed()  # read once: the next step's replay queues the next flag
    assert graphed.overflows == 1


@pytest.mark.parametrize("other_reason", [None, "new Parameters"])
def test_a_step_after_an_overflowed_replay_records_again_before_it_replays(monkeypatch, other_reason):
    """The flag read at the next step (graphed_step's module): that step records with room first ("tiles", unless
    it records for another reason anyway), and its camera is replayed only from the new recording."""
    events = []
    datamanager = SimpleNamespace(next_train=lambda step: ("camera", {"image": None}))
    trainer = SimpleNamespace(pipeline=SimpleNamespace(model=SimpleNamespace(info={}), datamanager=datamanager))
    graphed = graphed_step.GraphedForwardBackward(trainer)
    monkeypatch.setattr(graphed, "_camera_inputs", lambda camera: (None, None, None, 4, 4))
    monkeypatch.setattr(graphed, "_baked_in", lambda *args: ())
    monkeypatch.setattr(graphed, "_why_record", lambda key: other_reason)
    monkeypatch.setattr(graphed, "_previous_replay_overflowed", lambda: events.append("flag read") or True)
    monkeypatch.setattr(graphed, "_record", lambda step, camera, batch, why: events.append(why) or False)  # refused
    monkeypatch.setattr(graphed, "replay", lambda *args: events.append("replay"))
    monkeypatch.setattr(graphed_step, "optimize", lambda trainer, step: ("eager", {}, {}))
    assert graphed(7) == ("eager", {}, {})  # a refused recording: this step eager, nothing replayed
    assert events == ["flag read", other_reason or "tiles"]


def _replay_info(overflowed: bool) -> dict:
    """A one-camera rasterization info of 5 Gaussians, 4 of them visible, with their 2D gradients."""
    means2d = torch.zeros(1, 5, 2, requires_grad=True)
    (means2d * torch.arange(1.0, 11.0).reshape(1, 5, 2)).sum().backward()
    means2d.absgrad = means2d.grad.abs() * 2  # type: ignore[attr-defined]  # as gsplat sets it
    radii = torch.tensor([[3, 0, 2, 5, 1]], dtype=torch.int32)
    return {"means2d": means2d, "radii": radii, "width": 8, "height": 6, "n_cameras": 1, "gaussian_ids": None,
            "isect_overflow": torch.tensor(overflowed)}  # fmt: skip


@pytest.mark.parametrize("absgrad", [False, True])
def test_an_overflowed_replay_is_no_step_for_densification(absgrad):
    """A replay whose tiles did not fit: its gradients are zero and densification does not count it (splat-plus's
    default strategy would otherwise count a zero gradient for each visible Gaussian and lower its mean)."""

    parameter = torch.nn.Parameter(torch.ones(5, 3))
    parameter.grad = torch.full((5, 3), 2.0)
    kept = _replay_info(overflowed=False)
    graphed_step.drop_step_on_overflow(kept, [parameter])  # no overflow: nothing changes
    assert torch.equal(parameter.grad, torch.full((5, 3), 2.0))
    assert torch.equal(kept["radii"], _replay_info(False)["radii"])
    state = default_strategy_state(kept, parameter, absgrad)
    assert state["count"].tolist() == [1.0, 0.0, 1.0, 1.0, 1.0] and bool((state["grad2d"] > 0).any())

    dropped = _replay_info(overflowed=True)
    graphed_step.drop_step_on_overflow(dropped, [parameter])
    assert not parameter.grad.any()
    assert not dropped["means2d"].grad.any() and not dropped["means2d"].absgrad.any()
    state = default_strategy_state(dropped, parameter, absgrad)
    assert state["count"].tolist() == [0.0] * 5  # not counted as a visible step
    assert state["grad2d"].tolist() == [0.0] * 5
    assert state["radii"].tolist() == [0.0] * 5


def test_a_block_under_generator_kept_leaves_the_draws_after_it_as_they_were():
    torch.manual_seed(5)
    expected = torch.rand(4)
    torch.manual_seed(5)
    with graphed_step.generator_kept(torch.device("cpu")):
        torch.rand(7)
    assert torch.equal(torch.rand(4), expected)


@pytest.mark.parametrize("fails", [False, True])
def test_a_recording_leaves_the_generator_where_it_found_it(monkeypatch, fails):
    """Its unrecorded runs draw backgrounds; a run with the graph must then draw the eager run's colours (the
    replays draw them: tests/training/test_graphed_step_gpu.py). So must a recording that CUDA refuses."""
    graphed = graphed_step.GraphedForwardBackward(SimpleNamespace(device="cpu", pipeline=SimpleNamespace()))

    def drawing(step, camera, batch):
        torch.rand(5)
        if fails:
            raise torch.AcceleratorError("CUDA error: operation not permitted when stream is capturing")

    monkeypatch.setattr(graphed, "_capture_with_generator", drawing)
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    if fails:
        with pytest.raises(torch.AcceleratorError):
            graphed._capture(1, None, None)
    else:
        graphed._capture(1, None, None)
    assert torch.equal(torch.rand(2), expected)
