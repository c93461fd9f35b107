"""SplatPlusModel's own pieces of splatfacto's training step: the same numbers without host syncs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.cameras.cameras import Cameras, CameraType
from nerfstudio.engine.callbacks import TrainingCallbackLocation
from nerfstudio.models.splatfacto import SplatfactoModel

from ns_splat_plus.model.cameras import HOST_IMAGE_SIZE, render_intrinsics


def _camera(width: int, height: int, focal_type=float) -> Cameras:
    return Cameras(
        camera_to_worlds=torch.eye(4)[None, :3, :],
        fx=focal_type(1111.1), fy=focal_type(1113.7), cx=width / 2 + 0.3, cy=height / 2 - 0.7,
        width=width, height=height, camera_type=CameraType.PERSPECTIVE,
    )  # fmt: skip


@pytest.mark.parametrize("size", [(1920, 1080), (1081, 721), (63, 47)])
@pytest.mark.parametrize("downscale", [1, 2, 4, 8])
@pytest.mark.parametrize("host_size", [False, True])
@pytest.mark.parametrize("focal_type", [float, np.float64])  # np.float64: nerfstudio's blender parser (fx float64)
def test_render_intrinsics_are_nerfstudios_rescaled_intrinsics(size, downscale, host_size, focal_type):
    width, height = size
    camera = _camera(width, height, focal_type)
    if host_size:  # what SplatPlusDataManager.next_train adds
        camera.metadata = {HOST_IMAGE_SIZE: (height, width)}
    K, W, H = render_intrinsics(camera, 1.0 / downscale)
    # splatfacto's way: rescale in place, read intrinsics and size, rescale back
    reference = _camera(width, height, focal_type)
    reference.rescale_output_resolution(1 / downscale)
    assert (W, H) == (int(reference.width.item()), int(reference.height.item()))
    assert torch.equal(K, reference.get_intrinsics_matrices())


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    scene = small_scene(tmp_path_factory.mktemp("model_scene"))
    config = trainer_config(scene, tmp_path_factory.mktemp("model_run"), steps=10)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    yield trainer
    close_writers()


@pytest.mark.parametrize("scale_regularization", [False, True])
def test_losses_are_splatfactos(trainer, scale_regularization):
    model = trainer.pipeline.model
    model.config.use_scale_regularization = scale_regularization
    model.config.max_gauss_ratio = 0.5  # below 1: every Gaussian counts, so the regulariser is not 0
    try:
        for callback in trainer.callbacks:  # what the training loop does before step 0 (sets model.step, optimizers)
            callback.run_callback_at_location(0, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
        camera, batch = trainer.pipeline.datamanager.next_train(0)
        assert camera.metadata[HOST_IMAGE_SIZE] == (int(camera.height.item()), int(camera.width.item()))
        outputs = model.get_outputs(camera)
        with torch.no_grad():
            ours = model.get_loss_dict(outputs, batch)
            theirs = SplatfactoModel.get_loss_dict(model, outputs, batch)
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert torch.equal(ours[key].reshape(()), theirs[key].reshape(()).to(ours[key].device)), key
        if scale_regularization:  # step 0: splatfacto's regulariser is on (every 10th step)
            assert ours["scale_reg"].item() > 0
    finally:
        model.config.use_scale_regularization = False
        model.config.max_gauss_ratio = 10.0


def test_the_loss_takes_its_ssim_from_the_configured_training_ssim(trainer, monkeypatch):
    """The loss's SSIM goes through ``loss_ssim`` (fused kernels on CUDA), evaluation keeps pytorch_msssim's."""
    from pytorch_msssim import SSIM

    from ns_splat_plus.model.ssim import TrainingSSIM

    model = trainer.pipeline.model
    assert isinstance(model.loss_ssim, TrainingSSIM) and model.loss_ssim.kernel == model.config.ssim_kernel == "auto"
    assert isinstance(model.ssim, SSIM)  # ns-eval's metrics
    for callback in trainer.callbacks:
        callback.run_callback_at_location(0, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    camera, batch = trainer.pipeline.datamanager.next_train(0)
    outputs = model.get_outputs(camera)
    calls = []
    forward = model.loss_ssim.forward
    monkeypatch.setattr(
        model.loss_ssim, "forward", lambda a, b: calls.append((a.shape, b.requires_grad)) or forward(a, b)
    )
    model.get_loss_dict(outputs, batch)
    # one call, splatfacto's argument order: ground truth [1, 3, H, W] first, the render (with gradient) second
    assert calls == [((1, 3, *outputs["rgb"].shape[:2]), True)]


def test_the_trainer_names_the_loss_ssim_once_and_building_the_model_does_not(tmp_path, monkeypatch, capsys):
    """The line "SSIM of the loss", where it is not splatfacto's: once per run, by the trainer of rank 0, and not by
    the model (ns-eval and ns-export build one too, and train nothing). On the CPU the loss runs
    pytorch_msssim, which is not named: the backend is made Triton's here."""
    from ns_splat_plus.model.ssim import TrainingSSIM

    monkeypatch.setattr(TrainingSSIM, "backend", lambda self, device: "triton")
    monkeypatch.setattr(TrainingSSIM, "describe", lambda self, device: "fused Triton kernels")
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=1)
    capsys.readouterr()
    try:
        built = build_trainer(config)
        assert capsys.readouterr().out.count("SSIM of the loss: fused Triton kernels") == 1
        model = built.pipeline.model
        type(model)(
            config=model.config, scene_box=model.scene_box, num_train_data=model.num_train_data,
            metadata=model.kwargs.get("metadata"), device="cpu", seed_points=None,
        )  # fmt: skip
        assert "SSIM of the loss" not in capsys.readouterr().out
    finally:
        close_writers()


def test_renders_compile_nothing_and_give_splatfactos_view_matrices(trainer):
    """A training and an evaluation render run eagerly: nerfstudio's ``get_viewmat`` is wrapped in
    ``torch.compile``, whose Inductor compile costs seconds of every process start. The
    eager :func:`world_to_camera` gives splatfacto's matrices bitwise (and the inverse of the pose)."""
    from nerfstudio.models.splatfacto import get_viewmat

    from ns_splat_plus import upstream
    from ns_splat_plus.model.cameras import RENDER_CACHE, world_to_camera

    model, datamanager = trainer.pipeline.model, trainer.pipeline.datamanager
    for callback in trainer.callbacks:
        callback.run_callback_at_location(0, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    camera, _ = datamanager.next_train(0)
    eval_camera, _ = datamanager.next_eval(0)
    camera.metadata[RENDER_CACHE].clear()  # its view matrix is made again below
    upstream.reset_dynamo()  # what an earlier test compiled compiles again if called
    compiled = upstream.dynamo_frames_compiled()
    model.get_outputs(camera)
    model.eval()
    try:
        with torch.no_grad():
            model.get_outputs(eval_camera.to(model.device))
    finally:
        model.train()
    assert upstream.dynamo_frames_compiled() == compiled

    c2w = torch.cat((camera.camera_to_worlds, eval_camera.camera_to_worlds.to(camera.camera_to_worlds)))
    stretched = c2w.clone()
    stretched[:, :3, :3] *= c2w.new_tensor([1.0, 2.0, 0.5])  # not rigid: the formula, not an inverse
    c2w = torch.cat((c2w, stretched))
    ours = world_to_camera(c2w)
    assert torch.equal(ours, get_viewmat(c2w))  # nerfstudio's, compiled (it counts a frame here)
    assert upstream.dynamo_frames_compiled() > compiled
    flipped = torch.cat((c2w[:, :3, :3] * c2w.new_tensor([1.0, -1.0, -1.0]), c2w[:, :3, 3:]), dim=2)
    pose = torch.cat((flipped, c2w.new_tensor([0.0, 0.0, 0.0, 1.0]).expand(len(c2w), 1, 4)), dim=1)
    eye = torch.eye(4).expand(len(c2w), 4, 4)
    assert torch.allclose(ours[:2] @ pose[:2], eye[:2], atol=1e-5)  # rigid poses: the inverse


def test_training_cameras_are_made_once_and_keep_their_view_matrix_and_intrinsics(trainer, monkeypatch):
    """A camera's [1] Cameras is sliced once and handed out at each of its steps; the model keeps its
    view matrix, its inverse (handed to the rasterizer) and K in the camera's render cache: the same
    numbers as computing them each step."""
    from nerfstudio.models.splatfacto import get_viewmat

    from ns_splat_plus.model import model as model_module
    from ns_splat_plus.model.cameras import RENDER_CACHE
    from ns_splat_plus.parallel import camera_for_step

    model, datamanager = trainer.pipeline.model, trainer.pipeline.datamanager
    for callback in trainer.callbacks:
        callback.run_callback_at_location(0, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    camera, _ = datamanager.next_train(0)
    n, seed = len(datamanager.train_dataset), datamanager.config.train_cameras_sampling_seed
    index = camera.metadata["cam_idx"]
    later = next(s for s in range(1, 4 * n) if camera_for_step(s, 0, 1, n, seed) == index)
    assert datamanager.next_train(later)[0] is camera
    camera.metadata[RENDER_CACHE].clear()  # earlier tests of this module may have rendered it
    handed = []
    rasterize = model_module.rasterize
    monkeypatch.setattr(
        model_module, "rasterize", lambda *a, **kw: handed.append(kw["camtoworlds"]) or rasterize(*a, **kw)
    )
    model.get_outputs(camera)
    model.get_outputs(camera)
    scale = 1.0 / model._get_downscale_factor()
    cache = camera.metadata[RENDER_CACHE]
    assert set(cache) == {"viewmat", "camtoworlds", ("intrinsics", scale)}
    assert torch.equal(cache["viewmat"], get_viewmat(camera.camera_to_worlds))
    assert torch.equal(cache["camtoworlds"], torch.inverse(get_viewmat(camera.camera_to_worlds)))
    assert len(handed) == 2 and handed[0] is handed[1] is cache["camtoworlds"]
    K, W, H = cache[("intrinsics", scale)]
    K_now, W_now, H_now = render_intrinsics(camera, scale)
    assert torch.equal(K, K_now) and (W, H) == (W_now, H_now)


def test_the_strategy_draws_from_the_seed_the_model_resolved(trainer):
    """The model passes its resolved seed into the strategy options (strategy/ does not import model/)."""
    from ns_splat_plus.model.init import DEFAULT_SEED

    model = trainer.pipeline.model
    configured = model.config.init_seed
    try:
        for init_seed, expected in ((1234, 1234), (None, DEFAULT_SEED)):
            model.config.init_seed = init_seed
            model._build_strategy()
            assert model.strategy.rng_seed == expected
    finally:
        model.config.init_seed = configured
        model._build_strategy()
