"""The eager step's loss replayed from CUDA graphs (ns_splat_plus/model/loss_graphs.py): bitwise the loss and
gradients of the operators launched one by one, on the GPU, at one and at B cameras, through a change of
image size; used by a real CUDA training step; declined on the CPU, for fused-ssim and inside another recording.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus.model import loss_graphs
from ns_splat_plus.model.images import TrainingOutputs
from ns_splat_plus.model.loss import photometric_loss, reference_photometric_loss
from ns_splat_plus.model.loss_graphs import LossGraphs, Recording
from ns_splat_plus.model.ssim import TrainingSSIM

SSIM_LAMBDA = 0.2  # splatfacto's default
GPU_KERNEL = "triton"
"""The GPU tests' SSIM: the Triton kernels every install has. Under ``auto`` an installed fused-ssim runs eagerly
and no graph is recorded (test_a_cuda_training_step_replays_the_loss checks both)."""


def _step_inputs(batch: int, height: int, width: int, seed: int, device: str):
    """A render as the rasterizer leaves it (4 channels when depth is rendered: colors a strided view),
    alphas, a background and a uint8 photo; leaves the test differentiates against."""
    generator = torch.Generator().manual_seed(seed)
    render = torch.rand((batch, height, width, 4), generator=generator).to(device).requires_grad_()
    alphas = torch.rand((batch, height, width, 1), generator=generator).to(device).requires_grad_()
    background = torch.rand(3, generator=generator).to(device)
    gt = torch.randint(0, 256, (batch, height, width, 3), generator=generator, dtype=torch.uint8).to(device)
    return render, alphas, background, gt if batch > 1 else gt[0]


def _loss_and_grads(render, alphas, background, gt, graphs, kernel="auto"):
    """The step's loss as the model computes it (:func:`photometric_loss` of its TrainingOutputs), and the
    gradients of the render and alphas."""
    render.grad, alphas.grad = None, None
    colors = render[..., :3]  # a strided view, as the rasterizer's colors beside its depth
    outputs = TrainingOutputs(
        render_colors=colors, render_alphas=alphas * 0.9, background=background, batched=gt.dim() == 4
    )
    ssim = graphs.ssim if isinstance(graphs, LossGraphs) else TrainingSSIM(kernel)  # the graphs record their model's
    loss = photometric_loss(outputs, gt, ssim, SSIM_LAMBDA, graphs=graphs)
    loss.backward()
    return loss.detach().clone(), render.grad.clone(), alphas.grad.clone()


def _graphs(kernel="auto") -> LossGraphs:
    return LossGraphs(TrainingSSIM(kernel), SSIM_LAMBDA, reference_photometric_loss)


def test_on_the_cpu_the_loss_is_launched_as_before():
    graphs = _graphs()
    inputs = _step_inputs(1, 24, 32, seed=0, device="cpu")
    eager = _loss_and_grads(*inputs, graphs=None)
    declined = _loss_and_grads(*inputs, graphs=graphs)
    for a, b in zip(eager, declined):
        assert torch.equal(a, b)
    assert graphs.recordings == 0 and graphs.replays == 0 and graphs.failure is None


class _Stub:
    """Graphs that answer with a value of their own where they apply (``answer`` None: they decline)."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def __call__(self, colors, alphas, background, gt, batched, ssim, ssim_lambda):
        self.calls.append((tuple(colors.shape), tuple(gt.shape), batched))
        return self.answer


def test_the_loss_takes_the_graphs_answer_and_runs_itself_where_they_decline():
    render, alphas, background, gt = _step_inputs(1, 24, 32, seed=1, device="cpu")
    outputs = TrainingOutputs(render_colors=render[..., :3], render_alphas=alphas, background=background, batched=False)
    eager = photometric_loss(outputs, gt, TrainingSSIM(), SSIM_LAMBDA)
    replayed = _Stub(torch.tensor(7.0))
    assert float(photometric_loss(outputs, gt, TrainingSSIM(), SSIM_LAMBDA, graphs=replayed)) == 7.0
    assert replayed.calls == [((1, 24, 32, 3), (24, 32, 3), False)]
    declining = _Stub(None)
    assert torch.equal(photometric_loss(outputs, gt, TrainingSSIM(), SSIM_LAMBDA, graphs=declining), eager)
    assert len(declining.calls) == 1
    mask = torch.ones((24, 32, 1))  # a mask: the reference, graphs not asked
    photometric_loss(outputs, gt, TrainingSSIM(), SSIM_LAMBDA, mask=mask, graphs=replayed)
    assert len(replayed.calls) == 1


@pytest.mark.parametrize("loss_cuda_graph", [True, False])
def test_the_model_s_loss_goes_through_its_graphs(tmp_path, loss_cuda_graph):
    """The option builds the model's graphs (none when off), and the training loss asks them first."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=1)
    config.pipeline.model.loss_cuda_graph = loss_cuda_graph
    trainer = build_trainer(config)
    close_writers()
    model = trainer.pipeline.model
    assert isinstance(model.loss_graphs, LossGraphs) if loss_cuda_graph else model.loss_graphs is None
    _, batch = trainer.pipeline.datamanager.next_train(0)
    height, width = batch["image"].shape[:2]
    render, alphas, background, _ = _step_inputs(1, height, width, seed=2, device="cpu")
    outputs = TrainingOutputs(render_colors=render[..., :3], render_alphas=alphas, background=background, batched=False)
    eager = model.get_loss_dict(outputs, batch)["main_loss"]
    model.loss_graphs = _Stub(torch.tensor(7.0))
    assert float(model.get_loss_dict(outputs, batch)["main_loss"]) == 7.0 != float(eager)


class _EagerStandIn(Recording):
    """A :class:`Recording` whose two "graphs" run the function eagerly into its static tensors (the CPU has no
    CUDA graphs): the replay's autograd plumbing, and the recordings' check, on the CPU. ``grad_scale`` != 1
    makes a recording that replays wrong gradients."""

    def __init__(self, fn, samples, grad_scale: float = 1.0):
        self.samples, self.forward_replays = samples, 0
        self.out, self.grad_out = torch.empty(()), torch.empty(())
        self.grads = tuple(torch.empty_like(t) for t in samples if t.requires_grad)

        def forward():
            self.out.copy_(fn(*samples))

        def backward():
            with torch.enable_grad():
                inputs = [t.detach().requires_grad_(t.requires_grad) for t in samples]
                grads = torch.autograd.grad(fn(*inputs), [t for t in inputs if t.requires_grad], self.grad_out)
            for static, grad in zip(self.grads, grads):
                static.copy_(grad * grad_scale)

        self.forward_graph, self.backward_graph = SimpleNamespace(replay=forward), SimpleNamespace(replay=backward)


def _product_loss(a, b, c):
    return (a * c).sum() + (b * b * c).mean()


def test_a_replay_gives_the_function_s_value_and_gradients_on_new_inputs():
    """_Replay copies the new inputs into the recording's, hands the incoming gradient to its backward and returns
    each gradient to its own input (None for an input without one)."""
    generator = torch.Generator().manual_seed(3)
    a, b, c = (torch.rand(5, 4, generator=generator) for _ in range(3))
    samples = (torch.zeros(5, 4).requires_grad_(), torch.zeros(5, 4).requires_grad_(), torch.zeros(5, 4))
    recording = _EagerStandIn(_product_loss, samples)
    results = []
    for run in (_product_loss, recording):
        leaf_a, leaf_b = a.clone().requires_grad_(), b.clone().requires_grad_()
        out = run(leaf_a * 1.0, leaf_b[:], c)  # non-leaf inputs, as the rasterizer's outputs
        (3.0 * out).backward()  # an incoming gradient other than one
        results.append((out.detach(), leaf_a.grad, leaf_b.grad))
    for eager, replayed in zip(*results):
        assert torch.equal(eager, replayed)


def test_a_replay_keeps_its_value_and_refuses_a_late_backward():
    """The loss a replay returns is its own (the next replay overwrites the graph's output), and the backward of a
    replay that another forward replay followed raises: its saved intermediates are the later one's."""
    samples = (torch.zeros(5, 4).requires_grad_(), torch.zeros(5, 4).requires_grad_(), torch.zeros(5, 4))
    recording = _EagerStandIn(_product_loss, samples)
    a, b, c = (torch.full((5, 4), value) for value in (1.0, 2.0, 3.0))
    first = recording(a.requires_grad_(), b.requires_grad_(), c)
    value = float(first)
    recording(a * 2, b * 2, c)
    assert float(first) == value == float(_product_loss(a, b, c))
    with pytest.raises(RuntimeError, match="replayed again before the backward"):
        first.backward()


def _cpu_graphs(monkeypatch, grad_scale: float) -> LossGraphs:
    monkeypatch.setattr(LossGraphs, "_applies", lambda self, *args: True)  # the CPU: only the stand-in records
    graphs = _graphs()
    graphs.recorder = lambda fn, samples: _EagerStandIn(fn, samples, grad_scale)
    return graphs


def test_a_recording_is_used_once_it_replays_the_eager_loss(monkeypatch):
    graphs = _cpu_graphs(monkeypatch, grad_scale=1.0)
    for seed in (4, 5):
        inputs = _step_inputs(1, 24, 32, seed=seed, device="cpu")
        eager = _loss_and_grads(*inputs, graphs=None)
        replayed = _loss_and_grads(*inputs, graphs=graphs)
        assert all(torch.equal(a, b) for a, b in zip(eager, replayed))
    assert graphs.recordings == 1 and graphs.replays == 2 and graphs.failure is None


def test_a_recording_that_replays_other_gradients_is_never_used(monkeypatch):
    graphs = _cpu_graphs(monkeypatch, grad_scale=2.0)
    inputs = _step_inputs(1, 24, 32, seed=6, device="cpu")
    eager = _loss_and_grads(*inputs, graphs=None)
    assert all(torch.equal(a, b) for a, b in zip(eager, _loss_and_grads(*inputs, graphs=graphs)))  # the eager loss
    assert graphs.replays == 0 and not graphs.graphs
    assert graphs.failure is not None and "did not give the loss and gradients" in graphs.failure


def _cuda() -> None:
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 3])
def test_replays_give_the_eager_loss_and_gradients_bitwise(batch):
    """Each replay against the eager operators on the same inputs, for new inputs each call (the graph copies
    them in), across a change of image size (a second recording) and back to the first size (kept)."""
    _cuda()
    graphs = _graphs(GPU_KERNEL)
    sizes = [(250, 376), (250, 376), (500, 752), (250, 376)]
    for seed, (height, width) in enumerate(sizes):
        inputs = _step_inputs(batch, height, width, seed=seed, device="cuda")
        eager = _loss_and_grads(*inputs, graphs=None, kernel=GPU_KERNEL)
        replayed = _loss_and_grads(*inputs, graphs=graphs)
        for name, a, b in zip(("loss", "render gradient", "alphas gradient"), eager, replayed):
            assert torch.equal(a, b), f"{name} differs at {height}x{width}, seed {seed}"
    assert graphs.recordings == 2 and graphs.replays == len(sizes) and graphs.failure is None


@pytest.mark.gpu
def test_many_image_sizes_stop_the_recordings(monkeypatch):
    _cuda()
    monkeypatch.setattr(loss_graphs, "MAX_RECORDINGS", 2)
    monkeypatch.setattr(loss_graphs, "MAX_GRAPHS", 1)
    graphs = _graphs(GPU_KERNEL)
    for height in (40, 48, 40):  # the third is a new recording: the first size's graph was let go
        inputs = _step_inputs(1, height, 64, seed=height, device="cuda")
        eager = _loss_and_grads(*inputs, graphs=None, kernel=GPU_KERNEL)
        assert all(torch.equal(a, b) for a, b in zip(eager, _loss_and_grads(*inputs, graphs=graphs)))
    assert graphs.recordings == 2 and graphs.replays == 2
    assert graphs.failure is not None and "many sizes" in graphs.failure and not graphs.graphs


@pytest.mark.gpu
def test_declined_for_fused_ssim_and_inside_another_recording(monkeypatch):
    _cuda()
    graphs = _graphs()
    render, alphas, background, gt = _step_inputs(1, 48, 64, seed=0, device="cuda")
    colors = render[..., :3] * 1.0
    monkeypatch.setattr(TrainingSSIM, "backend", lambda self, device: "fused-ssim")
    ssim = graphs.ssim
    assert graphs(colors, alphas * 1.0, background, gt, False, ssim, SSIM_LAMBDA) is None  # eager: fused-ssim's
    graphs.ssim.recordable = True  # a --cuda-graph run: its eager steps run the Triton kernels too
    assert graphs(colors, alphas * 1.0, background, gt, False, ssim, SSIM_LAMBDA) is not None
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert graphs(colors, alphas * 1.0, background, gt, False, ssim, SSIM_LAMBDA) is None
    assert graphs.recordings == 1


@pytest.mark.gpu
@pytest.mark.parametrize("loss_cuda_graph, kernel", [(True, "auto"), (True, GPU_KERNEL), (False, "auto")])
def test_a_cuda_training_step_replays_the_loss(tmp_path, loss_cuda_graph, kernel):
    """splat-plus's eager step on CUDA (its default) replays the loss from the graph of its one image size
    in every step after the warmup's recording, and launches it one operator at a time with the option off.
    Under ``auto`` with fused-ssim installed, the loss runs fused-ssim eagerly: no recording, no failure."""
    _cuda()
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=30)
    config.machine.device_type = "cuda"
    config.pipeline.model.loss_cuda_graph = loss_cuda_graph
    config.pipeline.model.ssim_kernel = kernel
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    model = trainer.pipeline.model
    graphs = model.loss_graphs
    if not loss_cuda_graph:
        assert graphs is None
        return
    if model.loss_ssim.backend(torch.device("cuda")) == "fused-ssim":
        assert kernel == "auto" and graphs.failure is None and graphs.recordings == graphs.replays == 0
        return
    assert graphs.failure is None and graphs.recordings == 1
    assert graphs.replays >= 30  # every training step, and the warmup's


def _trained_gaussians(tmp_path, name: str, replayed: bool, monkeypatch):
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / name, steps=40)
    config.pipeline.model.loss_cuda_graph = replayed
    trainer = build_trainer(config)
    graphs, initial = trainer.pipeline.model.loss_graphs, trainer.pipeline.model.num_points
    if replayed:  # the CPU: the stand-in records, every step replays it
        monkeypatch.setattr(LossGraphs, "_applies", lambda self, *args: True)
        graphs.recorder = _EagerStandIn
    try:
        trainer.train()
    finally:
        close_writers()
        monkeypatch.undo()
    return {k: v.detach().clone() for k, v in trainer.pipeline.model.gauss_params.items()}, graphs, initial


def test_forty_steps_with_refines_give_bitwise_the_same_gaussians_with_the_loss_replayed(tmp_path, monkeypatch):
    """The acceptance form of an optimisation that leaves the arithmetic as it was: 40 CPU steps with three refines,
    the loss through a recording's replay (the stand-in's: the CPU has no CUDA graphs) against the loss run in place."""
    eager, none, initial = _trained_gaussians(tmp_path, "eager", False, monkeypatch)
    replayed, graphs, _ = _trained_gaussians(tmp_path, "replayed", True, monkeypatch)
    assert none is None and graphs.failure is None and graphs.recordings == 1 and graphs.replays >= 40
    assert len(eager["means"]) != initial  # the refines added or removed Gaussians
    for key in eager:
        assert torch.equal(eager[key], replayed[key]), key


def test_a_recording_is_not_reused_for_other_gradients_or_another_loss(monkeypatch):
    graphs = _cpu_graphs(monkeypatch, grad_scale=1.0)
    render, alphas, background, gt = _step_inputs(1, 24, 32, seed=7, device="cpu")
    colors = render[..., :3]
    assert graphs(colors, alphas, background, gt, False, graphs.ssim, SSIM_LAMBDA) is not None
    assert graphs(colors, alphas.detach(), background, gt, False, graphs.ssim, SSIM_LAMBDA) is not None
    assert graphs.recordings == 2  # alphas without a gradient: a recording of its own
    assert graphs(colors, alphas, background, gt, False, TrainingSSIM(), SSIM_LAMBDA) is None  # not the model's SSIM
    assert graphs(colors, alphas, background, gt, False, graphs.ssim, 0.5) is None  # another weight
    assert graphs.recordings == 2 and graphs.replays == 2


class _StaleStandIn(_EagerStandIn):
    """A recording that missed a kernel: its replays keep the photo's value of the moment it was recorded (as a
    kernel launched off the recorded stream would), right on its own inputs only."""

    def __init__(self, fn, samples):
        recorded_gt = samples[3].detach().clone()
        super().__init__(lambda colors, alphas, background, gt: fn(colors, alphas, background, recorded_gt), samples)


def test_a_recording_right_on_its_own_inputs_only_is_never_used(monkeypatch):
    graphs = _cpu_graphs(monkeypatch, grad_scale=1.0)
    graphs.recorder = _StaleStandIn
    inputs = _step_inputs(1, 24, 32, seed=8, device="cpu")
    eager = _loss_and_grads(*inputs, graphs=None)
    assert all(torch.equal(a, b) for a, b in zip(eager, _loss_and_grads(*inputs, graphs=graphs)))
    assert graphs.replays == 0 and graphs.failure is not None and "bit for bit" in graphs.failure
