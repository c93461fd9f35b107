"""splatfacto's photometric loss, written once (ns_splat_plus/model/loss.py): its fused backend
(background composite + L1 + SSIM in the kernels) against the PyTorch reference on the same inputs,
the cases where the fused backend declines, the kernels against a float64 form, and the model's use.

CPU checks run the kernels in Triton's interpreter in a child process (tests/interpreted.py); the
`gpu` test runs them compiled at training's sizes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from interpreted import main, run_interpreted
from pytorch_msssim import SSIM

from ns_splat_plus.model.fused_loss import fused_photometric_loss

# float32 sums against a float64 reference: measured ~1e-8 (value) and ~2e-7 (relative gradient norms)
VALUE_TOLERANCE = 1e-6
GRADIENT_TOLERANCE = 1e-5
SSIM_LAMBDA = 0.2  # splatfacto's default


def _render(batch, height, width, seed, gt_uint8, channels=3, device="cpu"):
    """A render (colors premultiplied by alpha, some composites outside [0, 1] so that the clamp acts),
    its alphas, a background and a ground truth: [B, H, W, C], [B, H, W, 1], [3], [B, H, W, 3]."""
    generator = torch.Generator().manual_seed(seed)
    alphas = torch.rand((batch, height, width, 1), generator=generator)
    colors = (1.4 * torch.rand((batch, height, width, channels), generator=generator) - 0.2) * alphas
    background = torch.rand(3, generator=generator)
    if gt_uint8:
        gt = torch.randint(0, 256, (batch, height, width, 3), generator=generator, dtype=torch.uint8)
    else:
        gt = torch.rand((batch, height, width, 3), generator=generator)
    return colors.to(device), alphas.to(device), background.to(device), gt.to(device)


def _reference(colors, alphas, background, gt):
    """splatfacto's loss in float64 and its gradients for colors and alphas."""
    colors64 = colors.detach().double().requires_grad_()
    alphas64 = alphas.detach().double().requires_grad_()
    target = gt.double() / 255.0 if gt.dtype == torch.uint8 else gt.double()
    rgb = torch.clamp(colors64 + (1 - alphas64) * background.double(), 0.0, 1.0)
    l1 = torch.abs(target - rgb).mean()
    ssim = SSIM(data_range=1.0, size_average=True, channel=3)(target.permute(0, 3, 1, 2), rgb.permute(0, 3, 1, 2))
    loss = (1 - SSIM_LAMBDA) * l1 + SSIM_LAMBDA * (1 - ssim)
    loss.backward()
    return loss.detach(), colors64.grad, alphas64.grad


def _relative(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def _check_against_reference(colors, alphas, background, gt, grad_scale=1.0):
    ref_loss, ref_colors, ref_alphas = _reference(colors, alphas, background, gt)
    colors = colors.detach().clone().requires_grad_()
    alphas = alphas.detach().clone().requires_grad_()
    loss = fused_photometric_loss(colors, alphas, background, gt, SSIM_LAMBDA)
    (grad_scale * loss).backward()
    assert loss.dtype == torch.float32 and loss.shape == ()
    assert abs(float(loss) - float(ref_loss)) < VALUE_TOLERANCE
    assert _relative(colors.grad, grad_scale * ref_colors) < GRADIENT_TOLERANCE
    assert _relative(alphas.grad, grad_scale * ref_alphas) < GRADIENT_TOLERANCE
    return colors.grad, alphas.grad


# --- the loss written once: photometric_loss's two backends on the same inputs ------------------------------


@pytest.mark.parametrize("ssim_lambda", [SSIM_LAMBDA, 0.7])
@pytest.mark.parametrize("shape,gt_uint8", [((1, 23, 37), True), ((3, 19, 26), False)])
def test_fused_backend_computes_the_reference_loss(shape, gt_uint8, ssim_lambda):
    """photometric_loss(fused=True), where the kernels apply (B = 1 and B = 3), against
    photometric_loss(fused=False), the PyTorch reference the model runs by default: value and gradients.
    Fails when the reference is edited (weighting, composite, L1, SSIM) and the kernels are not."""
    run_interpreted(__file__, "check_backends_agree", shape, gt_uint8, ssim_lambda)


@pytest.mark.parametrize("case", ["mask", "mask-batched", "rgb-only", "pytorch-msssim", "float64-gt", "too-small"])
def test_fused_backend_declines_and_the_reference_runs(case):
    """Where the kernels do not compute the function (masks, a composite already made, the SSIM kernel
    set to pytorch_msssim, another ground-truth dtype, images under the SSIM window), photometric_loss
    runs the reference: bitwise photometric_loss(fused=False), and the fused backend is never called."""
    run_interpreted(__file__, "check_declines", case)


def _training_outputs(colors, alphas, background):
    from ns_splat_plus.model.images import TrainingOutputs

    return TrainingOutputs(batched=True, render_colors=colors, render_alphas=alphas, background=background)


def _loss_and_grads(colors, alphas, background, gt, ssim_lambda, fused, mask=None, kernel="auto", rgb_only=False):
    """photometric_loss and its gradients for colors and alphas, and how often the fused backend ran."""
    from ns_splat_plus.model import loss as loss_module
    from ns_splat_plus.model.images import composite
    from ns_splat_plus.model.ssim import TrainingSSIM

    colors = colors.detach().clone().requires_grad_()
    alphas = alphas.detach().clone().requires_grad_()
    outputs = _training_outputs(colors, alphas, background)
    if rgb_only:
        outputs = {"rgb": composite(colors, alphas, background)}
    calls = []
    real = loss_module.fused_photometric_loss
    loss_module.fused_photometric_loss = lambda *a: calls.append(1) or real(*a)
    try:
        loss = loss_module.photometric_loss(outputs, gt, TrainingSSIM(kernel), ssim_lambda, mask=mask, fused=fused)
    finally:
        loss_module.fused_photometric_loss = real
    loss.backward()
    return loss.detach(), colors.grad, alphas.grad, len(calls)


def check_backends_agree(shape, gt_uint8, ssim_lambda):
    batch, height, width = shape
    inputs = _render(batch, height, width, seed=height * width, gt_uint8=gt_uint8)
    reference = _loss_and_grads(*inputs, ssim_lambda, fused=False, kernel="pytorch-msssim")
    fused = _loss_and_grads(*inputs, ssim_lambda, fused=True)
    assert reference[3] == 0 and fused[3] == 1  # the reference in PyTorch, the other through the kernels
    assert abs(float(fused[0]) - float(reference[0])) < VALUE_TOLERANCE, (float(fused[0]), float(reference[0]))
    assert _relative(fused[1], reference[1]) < GRADIENT_TOLERANCE
    assert _relative(fused[2], reference[2]) < GRADIENT_TOLERANCE


def check_declines(case):
    colors, alphas, background, gt = _render(2 if case == "mask-batched" else 1, 17, 29, seed=7, gt_uint8=True)
    options = {}
    if case.startswith("mask"):
        options["mask"] = (torch.rand(alphas.shape, generator=torch.Generator().manual_seed(8)) > 0.3).float()
    elif case == "rgb-only":
        options["rgb_only"] = True
    elif case == "pytorch-msssim":
        options["kernel"] = "pytorch-msssim"
    elif case == "float64-gt":
        gt = gt.double() / 255.0
    elif case == "too-small":
        colors, alphas, gt = colors[:, :10], alphas[:, :10], gt[:, :10]
    declined = _loss_and_grads(colors, alphas, background, gt, SSIM_LAMBDA, fused=True, **options)
    reference = _loss_and_grads(colors, alphas, background, gt, SSIM_LAMBDA, fused=False, **options)
    assert declined[3] == 0 and reference[3] == 0
    for a, b in zip(declined[:3], reference[:3]):
        assert torch.equal(a, b)
    if case.startswith("mask"):  # the mask acts: without it the loss differs
        unmasked = _loss_and_grads(colors, alphas, background, gt, SSIM_LAMBDA, fused=False)
        assert abs(float(unmasked[0]) - float(reference[0])) > 1e-3


# --- the kernels against a float64 form of splatfacto's loss -----------------------------------------------


@pytest.mark.parametrize("shape", [(1, 23, 37), (2, 15, 300)])  # odd sizes; 300 > one block of columns
@pytest.mark.parametrize("gt_uint8", [True, False])
def test_fused_loss_matches_splatfactos_loss(shape, gt_uint8):
    run_interpreted(__file__, "check_matches_reference", shape, gt_uint8)


def test_fused_loss_reads_a_strided_render_and_clamps_like_torch():
    run_interpreted(__file__, "check_strided_render_and_clamp")


def test_fused_loss_rejects_bad_input():
    run_interpreted(__file__, "check_rejects_bad_input")


def test_model_loss_takes_the_fused_path_with_splatfactos_numbers():
    run_interpreted(__file__, "check_model_fused_path")


def check_matches_reference(shape, gt_uint8):
    batch, height, width = shape
    _check_against_reference(*_render(batch, height, width, seed=height + width, gt_uint8=gt_uint8), grad_scale=2.5)


def check_strided_render_and_clamp():
    # depth mode: the colors are the first three of four channels, read in place
    colors4, alphas, background, gt = _render(1, 19, 26, seed=5, gt_uint8=True, channels=4)
    grad_colors, _ = _check_against_reference(colors4[..., :3], alphas, background, gt)
    assert grad_colors.shape == (1, 19, 26, 3)
    # where the composite is clamped, no gradient reaches the render (torch's clamp); elsewhere it does
    composite = colors4[..., :3] + (1 - alphas) * background
    clamped = (composite < 0) | (composite > 1)
    assert clamped.any() and (~clamped).any()
    assert torch.all(grad_colors[clamped] == 0) and torch.count_nonzero(grad_colors[~clamped]) > 0.9 * (~clamped).sum()


def check_rejects_bad_input():
    colors, alphas, background, gt = _render(1, 16, 16, seed=1, gt_uint8=True)
    with pytest.raises(ValueError, match="one shape"):
        fused_photometric_loss(colors, alphas, background, gt[:, :15], SSIM_LAMBDA)
    with pytest.raises(ValueError, match="at least 11"):
        fused_photometric_loss(colors[:, :10], alphas[:, :10], background, gt[:, :10], SSIM_LAMBDA)
    with pytest.raises(ValueError, match="do not match"):
        fused_photometric_loss(colors, alphas[..., :0], background, gt, SSIM_LAMBDA)
    with pytest.raises(ValueError, match="ground truth takes no gradient"):
        fused_photometric_loss(colors, alphas, background, gt.float().requires_grad_(), SSIM_LAMBDA)


def test_splat_plus_lite_trains_with_the_fused_loss_and_splat_plus_without():
    run_interpreted(__file__, "check_presets_fused_loss")


def check_presets_fused_loss():
    """splat-plus-lite's preset turns the fused loss on (method.py's LITE_FUSED_LOSS, chosen on 5 runs against
    5): each of its training steps, through the trainer's own step, calls the fused kernels; splat-plus's
    steps never do."""
    from inprocess import build_trainer, close_writers, small_scene, trainer_config

    from ns_splat_plus.method import splat_plus_lite_trainer_config, splat_plus_trainer_config
    from ns_splat_plus.model import loss as loss_module
    from ns_splat_plus.training.step import run_training_step

    fused_calls = []
    fused = loss_module.fused_photometric_loss
    loss_module.fused_photometric_loss = lambda *a: fused_calls.append(a[0].shape) or fused(*a)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            scene = small_scene(Path(tmp) / "scene")
            for preset, expected in ((splat_plus_lite_trainer_config(), 2), (splat_plus_trainer_config(), 0)):
                fused_calls.clear()
                config = trainer_config(scene, Path(tmp) / preset.method_name, steps=10, preset=preset)
                config.warmup_steps = 0
                trainer = build_trainer(config)
                try:
                    for step in range(2):
                        run_training_step(trainer, step)
                finally:
                    close_writers()
                assert len(fused_calls) == expected, (preset.method_name, fused_calls)
    finally:
        loss_module.fused_photometric_loss = fused


def check_model_fused_path():
    """Off by default; with --pipeline.model.fused-loss the model's training loss goes through the fused
    kernels and gives the PyTorch path's loss and parameter gradients: uint8 ground truth at full
    size, float after the 2x downscale."""
    from inprocess import build_trainer, close_writers, small_scene, trainer_config
    from nerfstudio.engine.callbacks import TrainingCallbackLocation

    from ns_splat_plus.model import loss as loss_module
    from ns_splat_plus.model.images import TrainingOutputs

    with tempfile.TemporaryDirectory() as tmp:
        config = trainer_config(small_scene(Path(tmp) / "scene"), Path(tmp) / "run", steps=10)
        config.warmup_steps = 0
        config.pipeline.model.num_downscales = 1  # step 0: half size; resolution_schedule steps on: full
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        fused_calls = []  # the ground truth's dtype of each fused call
        fused = loss_module.fused_photometric_loss
        loss_module.fused_photometric_loss = lambda *a: fused_calls.append(a[3].dtype) or fused(*a)
        try:
            assert not model.config.fused_loss  # off by default: the PyTorch loss, no fused call
            for callback in trainer.callbacks:
                callback.run_callback_at_location(0, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
            camera, batch = trainer.pipeline.datamanager.next_train(0)
            model.get_loss_dict(model.get_outputs(camera), batch)
            assert fused_calls == []
            model.config.fused_loss = True
            for step, gt_dtype in ((0, torch.float32), (config.pipeline.model.resolution_schedule, torch.uint8)):
                for callback in trainer.callbacks:
                    callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
                camera, batch = trainer.pipeline.datamanager.next_train(step)
                outputs = model.get_outputs(camera)
                assert isinstance(outputs, TrainingOutputs) and "rgb" not in outputs  # no composite made yet
                params = list(model.gauss_params.values())
                fused_loss = model.get_loss_dict(outputs, batch)["main_loss"]
                assert fused_calls[-1] == gt_dtype and "rgb" not in outputs
                fused_grads = torch.autograd.grad(fused_loss, params, retain_graph=True)
                model.loss_ssim.kernel = "pytorch-msssim"  # the PyTorch path, on the same render
                try:
                    torch_loss = model.get_loss_dict(outputs, batch)["main_loss"]
                finally:
                    model.loss_ssim.kernel = "auto"
                assert len(fused_calls) == 1 + (step > 0) and "rgb" in outputs
                torch_grads = torch.autograd.grad(torch_loss, params)
                assert abs(float(fused_loss) - float(torch_loss)) < VALUE_TOLERANCE
                assert (
                    _relative(
                        torch.cat([g.reshape(-1) for g in fused_grads]), torch.cat([g.reshape(-1) for g in torch_grads])
                    )
                    < GRADIENT_TOLERANCE
                )
                total = float(torch.cat([g.reshape(-1) for g in torch_grads]).norm())
                for name, a, b in zip(model.gauss_params.keys(), fused_grads, torch_grads):
                    # float32 on both sides: relative to each gradient, or to the whole where one is ~0
                    # (features_rest at SH degree 0; quats of the isotropic initial Gaussians, 1e-8 of it)
                    assert (a - b).norm() <= 1e-4 * max(float(b.norm()), 1e-2 * total), name
        finally:
            loss_module.fused_photometric_loss = fused
            close_writers()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1080, 1920), (4, 545, 963)])
def test_fused_loss_on_cuda_matches_float64(shape):
    """Compiled kernels at training's sizes (fox full size, a B=4 level), against float64."""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    batch, height, width = shape
    _check_against_reference(*_render(batch, height, width, seed=3, gt_uint8=True, device="cuda"))


@pytest.mark.gpu
def test_direct_kernel_launches_give_the_numbers_of_tritons_dispatch():
    """The kernels launched without JITFunction.run (kernel_launch.KernelLauncher, from the second call
    with the same argument signature) give bitwise the loss and gradients of the dispatched launch, for
    uint8 and float ground truth (two signatures), and every launch after the first is direct."""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    from ns_splat_plus.kernels import ssim as ssim_kernels

    launchers = ssim_kernels._launchers()
    for launcher in launchers:
        launcher.compiled.clear()
    # float ground truth: a new signature for the two kernels that read it, the same for the other three
    for gt_uint8, first_direct in ((True, 0), (False, 3)):
        colors, alphas, background, gt = _render(2, 300, 517, seed=5, gt_uint8=gt_uint8, device="cuda")
        results = []
        for _ in range(3):  # dispatched, then direct twice
            c, a = colors.clone().requires_grad_(), alphas.clone().requires_grad_()
            before = sum(launcher.direct_launches for launcher in launchers)
            loss = fused_photometric_loss(c, a, background, gt, SSIM_LAMBDA)
            loss.backward()
            results.append((loss.detach(), c.grad, a.grad, sum(x.direct_launches for x in launchers) - before))
        assert [r[3] for r in results] == [first_direct, 5, 5]
        for loss, grad_colors, grad_alphas, _ in results[1:]:
            assert torch.equal(loss, results[0][0])
            assert torch.equal(grad_colors, results[0][1]) and torch.equal(grad_alphas, results[0][2])
    _check_against_reference(*_render(1, 64, 96, seed=6, gt_uint8=True, device="cuda"))  # a direct path, too


@pytest.mark.gpu
def test_a_new_image_size_or_gaussian_count_compiles_no_kernel():
    """A second image size whose strides divide differently by 16 (96 columns, 3 x 96 = 288 per row,
    against 100 and 300) and a Gaussian count that is not a multiple of 16 reuse the kernels compiled
    for the first: the sizes, strides and counts are not specialized (kernels/ssim.py's OUTER_STRIDES)."""
    if not torch.cuda.is_available():
        pytest.fail("needs CUDA")
    from ns_splat_plus.kernels import ssim as ssim_kernels
    from ns_splat_plus.kernels import tile_bounds

    launchers = (*ssim_kernels._launchers(), tile_bounds._launcher())
    for launcher in launchers:  # what earlier tests compiled stays in Triton's cache, not in these
        launcher.compiled.clear()

    def compiled() -> set:
        return {id(kernel) for launcher in launchers for kernel in launcher.compiled.values()}

    def run(height: int, width: int, n: int) -> None:
        colors, alphas, background, gt = _render(1, height, width, seed=7, gt_uint8=False, device="cuda")
        c, a = colors.requires_grad_(), alphas.requires_grad_()
        fused_photometric_loss(c, a, background, gt, SSIM_LAMBDA).backward()
        radii = torch.full((1, n), 9, dtype=torch.int32, device="cuda")
        conics = torch.tensor([0.5, 0.0, 0.5], device="cuda").repeat(1, n, 1)
        tile_bounds.tile_radii_triton(radii, conics, torch.full((1, n), 0.5, device="cuda"), 1e-6, 1e-4, 0.01, 1e-6)
        torch.cuda.synchronize()

    run(72, 96, 4096)
    first = compiled()
    assert len(first) == 6, len(first)  # the five loss kernels and the tile bounds
    run(75, 100, 4099)
    assert compiled() == first, "a new size or count compiled another kernel"


if __name__ == "__main__":
    main(globals())
