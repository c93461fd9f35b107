"""The fused SSIM of the training loss against pytorch_msssim in float64.

On the CPU the Triton kernels run in Triton's interpreter, the same kernel code that runs on the
GPU, each check in a child process (tests/interpreted.py); the `gpu` test runs them compiled, at
training's image sizes.
"""

from __future__ import annotations

import os

import pytest
import torch
from interpreted import main, run_interpreted
from pytorch_msssim import SSIM

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.model import ssim as ssim_module
from ns_splat_plus.model.ssim import TrainingSSIM, fused_ssim

# float32 sums against a float64 reference: measured ~4e-8 (value) and ~4e-7 (relative gradient norm)
VALUE_TOLERANCE = 1e-6
GRADIENT_TOLERANCE = 1e-5


def _interpreted(check: str, *args) -> None:
    run_interpreted(__file__, check, *args)


def _images(shape_nhwc, seed, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    gt = torch.rand(shape_nhwc, generator=generator)
    pred = (gt + 0.2 * torch.randn(shape_nhwc, generator=generator)).clamp(0, 1)
    return gt.to(device), pred.to(device)


def _reference(gt_nchw, pred_nchw):
    """pytorch_msssim's value and d value / d pred in float64."""
    pred64 = pred_nchw.detach().double().requires_grad_()
    value = SSIM(data_range=1.0, size_average=True, channel=gt_nchw.shape[1])(gt_nchw.double(), pred64)
    value.backward()
    return value.detach(), pred64.grad


def _relative(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize(
    "shape_nhwc",
    [(1, 37, 45, 3), (2, 13, 270, 3), (1, 11, 11, 1)],  # odd sizes; 270 > one block of columns; the smallest image
)
def test_fused_ssim_matches_pytorch_msssim(shape_nhwc):
    _interpreted("check_matches_pytorch_msssim", shape_nhwc)


def test_fused_ssim_contiguous_input_and_symmetry():
    _interpreted("check_contiguous_input_and_symmetry")


def test_training_ssim_differentiates_the_image_that_needs_it():
    _interpreted("check_training_ssim_differentiates_the_image_that_needs_it")


def test_training_ssim_falls_back_to_pytorch_msssim():
    _interpreted("check_falls_back_to_pytorch_msssim")


def test_fused_ssim_rejects_bad_input():
    _interpreted("check_rejects_bad_input")


def check_matches_pytorch_msssim(shape_nhwc):
    gt, pred = _images(shape_nhwc, seed=sum(shape_nhwc))
    ref_value, ref_grad = _reference(gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2))
    render = pred.clone().requires_grad_()  # the render layout: [N, H, W, C], read through a permute
    value = fused_ssim(render.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2))
    (2.5 * value).backward()  # the incoming gradient is applied
    assert value.dtype == torch.float32 and value.shape == ()
    assert abs(float(value) - float(ref_value)) < VALUE_TOLERANCE
    assert _relative(render.grad, 2.5 * ref_grad.permute(0, 2, 3, 1)) < GRADIENT_TOLERANCE
    assert render.grad.is_contiguous()  # written in the render's layout, no copy behind the permute


def check_contiguous_input_and_symmetry():
    gt, pred = _images((2, 15, 18, 3), seed=7)
    gt, pred = gt.permute(0, 3, 1, 2).contiguous(), pred.permute(0, 3, 1, 2).contiguous()
    ref_value, ref_grad = _reference(gt, pred)
    x = pred.clone().requires_grad_()
    value = fused_ssim(x, gt)
    value.backward()
    assert abs(float(value) - float(ref_value)) < VALUE_TOLERANCE
    assert _relative(x.grad, ref_grad) < GRADIENT_TOLERANCE
    # SSIM is symmetric, and the fused value is so bitwise (the same float operations on either image)
    assert torch.equal(fused_ssim(gt, pred), fused_ssim(pred, gt))


def check_training_ssim_differentiates_the_image_that_needs_it():
    gt, pred = _images((1, 24, 31, 3), seed=3)
    gt_nchw = gt.permute(0, 3, 1, 2)
    ref_value, ref_grad = _reference(gt_nchw, pred.permute(0, 3, 1, 2))
    loss_ssim = TrainingSSIM("auto")
    render = pred.clone().requires_grad_()
    pred_nchw = render.permute(0, 3, 1, 2)
    assert loss_ssim.uses_fused(gt_nchw, pred_nchw)
    value = loss_ssim(gt_nchw, pred_nchw)  # splatfacto's argument order: ground truth first
    value.backward()
    assert abs(float(value) - float(ref_value)) < VALUE_TOLERANCE
    assert _relative(render.grad, ref_grad.permute(0, 2, 3, 1)) < GRADIENT_TOLERANCE
    with torch.no_grad():  # evaluation-style call: no derivative maps kept, the same value
        assert torch.equal(loss_ssim(gt_nchw, pred_nchw), value.detach())


def check_falls_back_to_pytorch_msssim():
    gt, pred = _images((1, 10, 40, 3), seed=1)  # 10 rows: pytorch_msssim skips the vertical filter
    a, b = gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2)
    assert not TrainingSSIM("auto").uses_fused(a, b)
    assert torch.equal(TrainingSSIM("auto")(a, b), SSIM(data_range=1.0, size_average=True, channel=3)(a, b))
    gt, pred = _images((1, 16, 16, 3), seed=2)
    a, b = gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2)
    assert not TrainingSSIM("pytorch-msssim").uses_fused(a, b)
    assert not TrainingSSIM("auto").uses_fused(a.requires_grad_(), b.clone().requires_grad_())  # both need gradients
    huge = torch.empty((8, 3, 4320, 7680), device="meta")  # eight 8K images: past the kernels' 32-bit offsets
    assert not TrainingSSIM("auto").uses_fused(huge, huge) and TrainingSSIM("auto").uses_fused(huge[:1], huge[:1])
    os.environ["TRITON_INTERPRET"] = "0"
    assert not TrainingSSIM("auto").uses_fused(a.detach(), b)  # CPU tensors, compiled Triton: pytorch_msssim
    ssim_module.triton_available = lambda: False
    unavailable = TrainingSSIM("triton")  # constructed (ns-eval loads such a run), refused for training
    assert unavailable.backend(torch.device("cuda")) == "pytorch-msssim"
    with pytest.raises(UserInputError, match="ssim-kernel triton: Triton does not import here"):
        unavailable.check_available()


def check_rejects_bad_input():
    gt, pred = _images((1, 16, 16, 3), seed=4)
    with pytest.raises(ValueError, match="one shape"):
        fused_ssim(pred.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2)[..., :15])
    with pytest.raises(ValueError, match="at least 11"):
        fused_ssim(pred.permute(0, 3, 1, 2)[..., :10], gt.permute(0, 3, 1, 2)[..., :10])
    huge = torch.empty((8, 3, 4320, 7680), device="meta")
    with pytest.raises(ValueError, match="32-bit"):
        fused_ssim(huge, huge)
    with pytest.raises(ValueError, match="second image"):
        fused_ssim(pred.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2).clone().requires_grad_())


@pytest.mark.gpu
@pytest.mark.parametrize("shape_nhwc", [(1, 1080, 1920, 3), (4, 545, 963, 3), (2, 3000, 4000, 3)])
def test_fused_ssim_on_cuda_matches_float64(shape_nhwc):
    """Compiled kernels at training's sizes (fox full size, a B=4 level, 12 MP), against float64."""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    gt, pred = _images(shape_nhwc, seed=11, device="cuda")
    ref_value, ref_grad = _reference(gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2))
    render = pred.clone().requires_grad_()
    value = fused_ssim(render.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2))
    value.backward()
    assert abs(float(value) - float(ref_value)) < VALUE_TOLERANCE
    assert torch.isfinite(render.grad).all()
    assert _relative(render.grad, ref_grad.permute(0, 2, 3, 1)) < GRADIENT_TOLERANCE


def _fake_fused_ssim_library():
    """A stand-in for rahul-goel/fused-ssim's module (CUDA only, not installable here): its call signature."""
    import types

    module = types.ModuleType("fused_ssim")
    module.fusedssim = object()
    module.fused_ssim = lambda img1, img2, padding="same", train=True: None
    return module


def test_auto_prefers_fused_ssim_where_installed_and_triton_else(monkeypatch):
    """The choice alone (the kernels are CUDA only): auto takes fused-ssim on CUDA when its module imports,
    Triton when it does not; the CPU keeps pytorch_msssim; the fused loss keeps its Triton kernels."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr(ssim_module, "triton_available", lambda: True)
    monkeypatch.setattr(ssim_module, "fused_ssim_library", lambda: None)
    assert (
        TrainingSSIM("auto").backend(cuda) == "triton" and TrainingSSIM("auto").describe(cuda) == "fused Triton kernels"
    )
    with pytest.raises(UserInputError, match="ssim-kernel fused-ssim: the fused_ssim package") as info:
        TrainingSSIM("fused-ssim").check_available()
    assert "What to do: pip install git+https://github.com/rahul-goel/fused-ssim" in str(info.value)
    assert info.value.exit_status == 2
    TrainingSSIM("auto").check_available()  # auto never insists
    monkeypatch.setattr(ssim_module, "fused_ssim_library", _fake_fused_ssim_library)
    auto = TrainingSSIM("auto")
    assert auto.backend(cuda) == "fused-ssim" and auto.describe(cuda) == "fused-ssim"
    assert auto.fused_on(cuda)  # --pipeline.model.fused-loss True still finds its Triton kernels
    assert TrainingSSIM("fused-ssim").backend(cuda) == "fused-ssim" and not TrainingSSIM("fused-ssim").fused_on(cuda)
    assert TrainingSSIM("triton").backend(cuda) == "triton"
    assert TrainingSSIM("pytorch-msssim").backend(cuda) == "pytorch-msssim"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert auto.backend(cpu) == "pytorch-msssim"
    monkeypatch.setattr(ssim_module, "triton_available", lambda: False)
    assert auto.backend(cuda) == "fused-ssim"


def test_a_kernel_named_for_the_cpu_is_refused_not_replaced_silently(monkeypatch):
    """A fresh-eyes trial: --pipeline.model.ssim-kernel triton on the CPU trained with pytorch_msssim, without a
    word, and config.yml said triton. Named kernels run on CUDA only (the Triton interpreter aside: the tests')."""
    cpu = torch.device("cpu")
    monkeypatch.setattr(ssim_module, "triton_available", lambda: True)
    monkeypatch.setattr(ssim_module, "fused_ssim_library", _fake_fused_ssim_library)
    monkeypatch.setattr(ssim_module, "triton_interpreting", lambda: False)
    for kernel in ("triton", "fused-ssim"):
        with pytest.raises(UserInputError, match=f"ssim-kernel {kernel} runs on CUDA GPUs only") as info:
            TrainingSSIM(kernel).check_available(cpu)
        assert "pass --pipeline.model.ssim-kernel auto" in str(info.value)
        TrainingSSIM(kernel).check_available(torch.device("cuda"))  # where it runs: accepted
    for kernel in ("auto", "pytorch-msssim"):
        TrainingSSIM(kernel).check_available(cpu)
    monkeypatch.setattr(ssim_module, "triton_interpreting", lambda: True)
    TrainingSSIM("triton").check_available(cpu)  # interpreted on the CPU: it runs


def test_inside_a_cuda_graph_recording_triton_runs_in_place_of_fused_ssim(monkeypatch):
    """The choice alone: where fused-ssim would run, a CUDA-graph recording gets the Triton kernels (fused-ssim
    launches on the legacy default stream, which the recording does not capture), or pytorch_msssim without Triton;
    outside a recording fused-ssim stays."""
    monkeypatch.setattr(TrainingSSIM, "backend", lambda self, device: "fused-ssim")  # CUDA with fused-ssim installed
    monkeypatch.setattr(ssim_module, "triton_available", lambda: True)
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    loss_ssim = TrainingSSIM("auto")
    gt, pred = _images((1, 16, 16, 3), seed=5)
    gt, render = gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2).requires_grad_()
    assert loss_ssim._fused_backend(gt, render) == "fused-ssim"
    capturing[0] = True
    assert loss_ssim._fused_backend(gt, render) == "triton"
    monkeypatch.setattr(ssim_module, "triton_available", lambda: False)
    assert loss_ssim._fused_backend(gt, render) is None  # pytorch_msssim
    capturing[0] = False
    loss_ssim.recordable = True  # what the CUDA-graph step sets for the whole run: eager steps take Triton's too
    monkeypatch.setattr(ssim_module, "triton_available", lambda: True)
    assert loss_ssim._fused_backend(gt, render) == "triton"


def test_the_start_up_line_names_lites_fused_loss_where_it_holds_the_ssim(monkeypatch):
    """splat-plus-lite's fused loss runs its own SSIM (Triton's), fused-ssim installed or not: the line says so."""
    from types import SimpleNamespace

    from ns_splat_plus.model.model import SplatPlusModel

    monkeypatch.setattr(TrainingSSIM, "backend", lambda self, device: "fused-ssim")  # CUDA with fused-ssim installed
    monkeypatch.setattr(TrainingSSIM, "fused_on", lambda self, device: True)
    model = SimpleNamespace(
        kwargs={"device": "cuda"}, loss_ssim=TrainingSSIM(), config=SimpleNamespace(fused_loss=False)
    )
    model.ssim_in_fused_loss = lambda: SplatPlusModel.ssim_in_fused_loss(model)  # type: ignore[arg-type]
    assert SplatPlusModel.loss_ssim_note(model) == "SSIM of the loss: fused-ssim"  # type: ignore[arg-type]
    model.config.fused_loss = True
    assert SplatPlusModel.loss_ssim_note(model) == (  # type: ignore[arg-type]
        "SSIM of the loss: fused Triton kernels, with the composite and L1 (--pipeline.model.fused-loss)"
    )


@pytest.mark.gpu
def test_a_cuda_graph_replays_the_ssim_that_fused_ssim_computes_eagerly():
    """A recording of the loss's SSIM (forward and backward), replayed on new images, gives the value and gradient
    that fused-ssim computes eagerly for them. (fused-ssim's own kernels inside the recording were not captured:
    the replays returned the recording's stale SSIM.)"""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    assert ssim_module.fused_ssim_library() is not None, "fused_ssim does not import (the GPU tier installs it)"
    loss_ssim = TrainingSSIM("auto")
    gt, pred = _images((1, 64, 96, 3), seed=3, device="cuda")
    gt_in = gt.permute(0, 3, 1, 2).contiguous()
    render = pred.permute(0, 3, 1, 2).contiguous().requires_grad_()
    side = torch.cuda.Stream()  # torch's recipe: warm up on a side stream before recording
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            render.grad = None
            loss_ssim(gt_in, render).backward()  # fused-ssim
            ssim_module.fused_ssim(render, gt_in).backward()  # Triton's: compiled and loaded before the recording
    torch.cuda.current_stream().wait_stream(side)
    render.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        recorded = loss_ssim(gt_in, render)
        recorded.backward()
    new_gt, new_pred = _images((1, 64, 96, 3), seed=4, device="cuda")
    with torch.no_grad():
        gt_in.copy_(new_gt.permute(0, 3, 1, 2))
        render.copy_(new_pred.permute(0, 3, 1, 2))
    graph.replay()
    torch.cuda.synchronize()
    replayed_value, replayed_grad = float(recorded), render.grad.clone()
    render.grad = None
    eager = loss_ssim(gt_in, render)  # outside a recording: fused-ssim
    eager.backward()
    assert abs(replayed_value - float(eager)) < VALUE_TOLERANCE
    assert _relative(replayed_grad, render.grad) < GRADIENT_TOLERANCE


@pytest.mark.gpu
def test_fused_ssim_library_runs_the_loss_on_cuda_and_matches_float64():
    """With rahul-goel/fused-ssim installed (the GPU tier installs it, docs/development.md), the loss's
    SSIM under auto runs it, with pytorch_msssim's valid padding, against float64 at fox's size."""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    library = ssim_module.fused_ssim_library()
    assert library is not None, "fused_ssim does not import: pip install git+https://github.com/rahul-goel/fused-ssim"
    gt, pred = _images((1, 1080, 1920, 3), seed=12, device="cuda")
    ref_value, ref_grad = _reference(gt.permute(0, 3, 1, 2), pred.permute(0, 3, 1, 2))
    calls = []
    original = library.fused_ssim
    library.fused_ssim = lambda *args, **kwargs: calls.append(kwargs) or original(*args, **kwargs)
    try:
        render = pred.clone().requires_grad_()
        loss_ssim = TrainingSSIM("auto")
        value = loss_ssim(gt.permute(0, 3, 1, 2), render.permute(0, 3, 1, 2))  # splatfacto's order: ssim(gt, pred)
        value.backward()
    finally:
        library.fused_ssim = original
    assert calls == [{"padding": "valid", "train": True}]
    assert abs(float(value) - float(ref_value)) < VALUE_TOLERANCE
    assert _relative(render.grad, ref_grad.permute(0, 2, 3, 1)) < GRADIENT_TOLERANCE


if __name__ == "__main__":
    main(globals())
