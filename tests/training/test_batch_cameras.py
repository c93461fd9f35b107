"""B cameras per step (--pipeline.datamanager.cameras-per-step): one batched render gives the mean
of the B one-camera losses and gradients, the same densification statistics as the B views one by
one, identical replicas on 2 ranks and the schedule scaled for W x B (on the torchrun run of
tests/parallel/test_rank_local_images.py); the splat-plus-fast preset."""

from __future__ import annotations

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.engine.callbacks import TrainingCallbackLocation

from ns_splat_plus import parallel
from ns_splat_plus.errors import UserInputError
from ns_splat_plus.method import splat_plus_fast, splat_plus_trainer_config
from ns_splat_plus.model.cameras import HOST_IMAGE_SIZE
from ns_splat_plus.parallel.schedule import effective_batch
from ns_splat_plus.training import inputs

B = 3  # not a power of two: the 1/B of the mean is not exact in floating point
STEP = 25  # SH degree 1 (interval 20) and accumulated statistics


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    scene = small_scene(tmp_path_factory.mktemp("batch_scene"))
    config = trainer_config(scene, tmp_path_factory.mktemp("batch_run"), steps=30)
    config.warmup_steps = 0
    config.pipeline.datamanager.cameras_per_step = B
    trainer = build_trainer(config)
    trainer.pipeline.model.config.background_color = "white"  # not random: the same for 1 and B renders
    with torch.no_grad():  # anisotropic Gaussians: isotropic ones have quats gradients of rounding noise only
        scales = trainer.pipeline.model.gauss_params["scales"]
        scales.add_(0.5 * torch.randn(scales.shape, generator=torch.Generator().manual_seed(3)))
    for callback in trainer.callbacks:  # sets model.step (SH degree) as the loop does
        callback.run_callback_at_location(STEP, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    yield trainer
    close_writers()


def _loss_and_grads(model, camera, batch):
    """Main loss, the Gaussians' gradients and the rasterizer info of one render of ``camera``."""
    model.train()
    model.zero_grad(set_to_none=True)
    outputs = model.get_outputs(camera)
    loss = model.get_loss_dict(outputs, batch)["main_loss"]
    loss.backward()
    grads = {k: p.grad.detach().clone() for k, p in model.gauss_params.items()}
    return loss.detach(), grads, model.info


@pytest.fixture(scope="module")
def renders(trainer):
    """The batched render of the step's B cameras, and each of them rendered alone."""
    model = trainer.pipeline.model
    datamanager = trainer.pipeline.datamanager
    camera, batch = datamanager.next_train(STEP)
    assert camera.shape[0] == B and batch["image"].shape[0] == B and batch["image"].dtype == torch.uint8
    expected = parallel.cameras_for_step(
        STEP, 0, 1, len(datamanager.train_dataset), datamanager.config.train_cameras_sampling_seed, B
    )
    assert camera.metadata["cam_idx"] == expected and len(set(expected)) == B
    batched = _loss_and_grads(model, camera, batch)
    singles = []
    for i, index in enumerate(expected):
        one = datamanager.train_cameras[index : index + 1].to(datamanager.device)
        one.metadata = {"cam_idx": index, HOST_IMAGE_SIZE: camera.metadata[HOST_IMAGE_SIZE]}
        singles.append(_loss_and_grads(model, one, {"image": datamanager.cached_train[index]["image"]}))
        assert torch.equal(batch["image"][i], datamanager.cached_train[index]["image"])
    return batched, singles


def test_batched_loss_and_gradients_are_the_mean_of_the_single_camera_ones(renders):
    (loss, grads, info), singles = renders
    assert info["n_cameras"] == B and info["means2d"].shape[0] == B
    mean_loss = sum(s[0] for s in singles) / B
    # float32: the batched mean sums B*H*W*3 terms in another order than B separate means
    assert torch.allclose(loss, mean_loss, rtol=1e-6, atol=0), (loss, mean_loss)
    assert max(abs(s[0] - mean_loss) for s in singles) > 1e-4  # the cameras differ: a mean, not one of them
    for name, grad in grads.items():
        reference = sum(s[1][name] for s in singles) / B
        scale = reference.abs().max()
        assert scale > 0, name
        # the same per-camera terms, summed across cameras in another order: rounding only
        assert torch.allclose(grad, reference, rtol=1e-4, atol=1e-6 * scale), (
            name,
            (grad - reference).abs().max(),
            scale,
        )


def test_densification_statistics_are_the_views_accumulated_one_by_one(trainer, renders):
    (_, _, info), singles = renders
    strategy = trainer.pipeline.model.strategy
    params = trainer.pipeline.model.gauss_params
    assert strategy.refine_scale2d_stop_iter > 0  # radii are accumulated too

    def fresh():
        return {"grad2d": None, "count": None, "radii": None}

    batched = fresh()
    strategy._update_state(params, batched, info)
    one_by_one = fresh()
    for _, _, single_info in singles:
        strategy._update_state(params, one_by_one, single_info)
    assert torch.equal(batched["count"], one_by_one["count"])
    assert batched["count"].max() >= 2  # some Gaussian seen by several of the B views
    assert torch.equal(batched["radii"], one_by_one["radii"])
    # each view's means2d gradient is 1/B of its alone-gradient, times n_cameras = B (gsplat's rule)
    scale = one_by_one["grad2d"].max()
    assert torch.allclose(batched["grad2d"], one_by_one["grad2d"], rtol=1e-4, atol=1e-6 * scale)


def test_a_step_s_cameras_are_the_kept_ones_concatenated_with_their_cached_matrices(trainer, monkeypatch):
    """The B cameras of a step are the datamanager's kept [1] cameras concatenated (no host index
    tensor sliced into the device cameras: a synchronisation per field on CUDA), with the same
    fields as slicing; their view matrices, inverses and K come from the members' render caches:
    one torch.inverse per camera over two epochs, not one per step."""
    from nerfstudio.cameras.cameras import Cameras
    from nerfstudio.models.splatfacto import get_viewmat

    from ns_splat_plus.model.cameras import (
        BATCH_MEMBERS,
        RENDER_CACHE,
        camera_intrinsics,
        render_intrinsics,
        view_matrices,
    )

    datamanager, model = trainer.pipeline.datamanager, trainer.pipeline.model
    n = len(datamanager.train_dataset)
    for camera in datamanager.__dict__.get("_single_cameras", {}).values():  # earlier tests may have rendered
        camera.metadata[RENDER_CACHE].clear()
    inverses, slices = [], []
    inverse, getitem = torch.inverse, Cameras.__getitem__
    monkeypatch.setattr(torch, "inverse", lambda x: inverses.append(x.shape[0]) or inverse(x))
    monkeypatch.setattr(Cameras, "__getitem__", lambda self, i: slices.append(i) or getitem(self, i))
    steps = range(STEP, STEP + 2 * -(-n // B))  # two epochs of B-camera steps
    for step in steps:
        camera, _ = datamanager.next_train(step)
        indices = camera.metadata["cam_idx"]
        assert camera.shape == (len(indices),) and len(indices) >= 1
        assert [m.metadata["cam_idx"] for m in camera.metadata[BATCH_MEMBERS]] == indices
        model.get_outputs(camera)  # training mode (the strategy retains means2d's gradient)
        viewmat, camtoworlds = view_matrices(camera)
        K, W, H = camera_intrinsics(camera, 1.0 / model._get_downscale_factor())
        expected = getitem(datamanager.train_cameras, torch.tensor(indices))
        for name in ("camera_to_worlds", "fx", "fy", "cx", "cy", "width", "height", "camera_type"):
            assert torch.equal(getattr(camera, name), getattr(expected, name)), name
        assert torch.equal(viewmat, get_viewmat(expected.camera_to_worlds))
        torch.testing.assert_close(camtoworlds, inverse(viewmat), rtol=0, atol=1e-6)
        K_sliced, W_sliced, H_sliced = render_intrinsics(expected, 1.0 / model._get_downscale_factor())
        assert torch.equal(K, K_sliced) and (W, H) == (W_sliced, H_sliced)
    monkeypatch.undo()
    seen = {
        i
        for step in steps
        for i in parallel.cameras_for_step(step, 0, 1, n, datamanager.config.train_cameras_sampling_seed, B)
    }
    assert len(seen) == n
    assert inverses == [1] * n  # each camera's inverse once (a batch's own inverse: one call per step)
    # only the kept cameras' first slices (by slice, never by a host index tensor), at most one per camera
    assert all(isinstance(i, slice) for i in slices) and len(slices) <= n


def test_cameras_for_step_shards_one_permutation():
    from ns_splat_plus.parallel.sharding import camera_shard

    n, seed = 22, 7
    assert [parallel.cameras_for_step(s, 0, 1, n, seed, 1)[0] for s in range(50)] == [
        parallel.camera_for_step(s, 0, 1, n, seed) for s in range(50)
    ]
    # W=2 ranks x B=3: the 6 cameras of a step are distinct, each rank's from its own shard
    # (more in tests/parallel/test_rank_local_images.py)
    for step in range(12):
        per_rank = [parallel.cameras_for_step(step, r, 2, n, seed, 3) for r in range(2)]
        assert all(set(cams) <= set(camera_shard(r, 2, n, seed)) for r, cams in enumerate(per_rank))
        assert len({c for cams in per_rank for c in cams}) == 6


def test_schedule_scales_with_ranks_times_cameras():
    config = splat_plus_trainer_config()
    config.pipeline.datamanager.cameras_per_step = 2
    assert effective_batch(config, 2) == 4
    parallel.scale_schedule(config, effective_batch(config, 2), config.data_parallel)
    assert config.max_num_iterations == 30000 // 4
    assert config.pipeline.model.refine_every == 100 // 4
    means = config.optimizers["means"]
    assert means["optimizer"].lr == pytest.approx(1.6e-4 * 2)
    assert means["optimizer"].betas == pytest.approx((0.9**4, 0.999**4))
    assert means["scheduler"].max_steps == 30000 // 4


def test_launch_scales_for_b_cameras_on_one_process(tmp_path):
    config = splat_plus_fast.config
    import copy

    config = copy.deepcopy(config)
    config.machine.device_type = "cpu"
    plan = parallel.prepare_launch(config)
    assert plan.world_size == 1
    assert config.max_num_iterations == 30000 // 4 and config.data_parallel.scaled_for_world_size == 4
    assert config.optimizers["quats"]["optimizer"].lr == pytest.approx(0.001 * 2)
    parallel.prepare_launch(config)  # once per config
    assert config.max_num_iterations == 30000 // 4


def test_auto_cameras_per_step_keeps_four_cameras_per_step_in_all():
    """The rule of ``cameras-per-step auto``: W x B = 4 where W divides 4, at most 4 otherwise, B >= 1."""
    from ns_splat_plus.parallel.schedule import AUTO_EFFECTIVE_BATCH, auto_cameras_per_step

    assert AUTO_EFFECTIVE_BATCH == 4  # splat-plus-fast's batch, the one compared with splatfacto (docs)
    assert [auto_cameras_per_step(w) for w in (1, 2, 3, 4, 5, 8, 64)] == [4, 2, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("world_size, per_rank", [(1, 4), (2, 2), (4, 1)])
def test_auto_is_a_number_before_anything_reads_it(world_size, per_rank):
    """resolve_cameras_per_step writes B into the config (the saved config.yml holds the number), and
    every reader gives the same B before and after."""
    import copy

    from ns_splat_plus.parallel.schedule import cameras_per_step_of, resolve_cameras_per_step

    config = copy.deepcopy(splat_plus_fast.config)
    assert config.pipeline.datamanager.cameras_per_step == "auto"
    assert cameras_per_step_of(config.pipeline.datamanager, world_size) == per_rank
    assert effective_batch(config, world_size) == world_size * per_rank
    assert resolve_cameras_per_step(config, world_size) == per_rank
    assert config.pipeline.datamanager.cameras_per_step == per_rank
    assert resolve_cameras_per_step(config, world_size) is None  # a number stays as it is
    assert effective_batch(config, world_size) == world_size * per_rank


def test_launch_resolves_auto_and_says_so(capsys):
    import copy

    config = copy.deepcopy(splat_plus_fast.config)
    config.machine.device_type = "cpu"
    parallel.prepare_launch(config)
    assert config.pipeline.datamanager.cameras_per_step == 4 and config.max_num_iterations == 30000 // 4
    out = capsys.readouterr().out
    assert "cameras-per-step auto: 4 per rank on 1 rank (4 cameras per step)" in out
    assert "schedule for 1 rank x 4 cameras per step" in out


def test_auto_with_the_camera_optimizer_is_refused_where_it_gives_b_above_1():
    """The check of what B > 1 does not work with runs again once auto is a number (at launch)."""
    import copy

    config = copy.deepcopy(splat_plus_fast.config)
    config.pipeline.model.camera_optimizer.mode = "SO3xR3"
    inputs.check_cameras_per_step(config)  # auto: not yet a number
    config.machine.device_type = "cpu"
    parallel.prepare_launch(config)
    with pytest.raises(UserInputError, match="cameras-per-step 4 does not work with"):
        inputs.check_cameras_per_step(config)


def test_launch_applies_the_steps_scaler_and_says_so(capsys):
    import copy

    config = copy.deepcopy(splat_plus_trainer_config())
    config.machine.device_type = "cpu"
    config.steps_scaler = 0.5
    parallel.prepare_launch(config)
    assert config.max_num_iterations == 15000 and config.pipeline.model.refine_every == 50
    assert "splat-plus: schedule for --steps-scaler 0.5: max_num_iterations 30000->15000" in capsys.readouterr().out
    parallel.prepare_launch(config)  # once per config
    assert config.max_num_iterations == 15000


def test_fast_preset():
    """splat-plus-fast is splat-plus with B > 1 cameras per step and one fused Adam update; its schedule is
    splat-plus's (written for one camera per step) until the launch scales it for B: steps / B, learning
    rates x sqrt(B), Adam betas ^ B. Each expected value is derived from splat-plus's and B."""
    import copy
    import math

    from ns_splat_plus.method import splat_plus

    fast, base = copy.deepcopy(splat_plus_fast.config), copy.deepcopy(splat_plus.config)
    b = effective_batch(fast, 1)  # one process renders the B cameras of a step at once (auto: 4 on one GPU)
    assert fast.method_name == "splat-plus-fast" and b > 1 and base.pipeline.datamanager.cameras_per_step == 1
    assert effective_batch(fast, 2) == b  # on 2 GPUs the same cameras per step in all: 2 each
    assert fast.fused_adam_on("cpu") and not base.fused_adam_on("cpu")  # fused even where the default is not
    for told in (f"{b} cameras per step", f"1/{b} of the steps", f"x sqrt({b})", f"betas ^{b}"):
        assert told in splat_plus_fast.description, told
    model, base_model = fast.pipeline.model, base.pipeline.model
    # unscaled in the preset (scaled once, at launch): splat-plus's schedule
    assert (fast.max_num_iterations, model.refine_every) == (base.max_num_iterations, base_model.refine_every)
    for config in (fast, base):
        config.machine.device_type = "cpu"
        parallel.prepare_launch(config)
    assert fast.max_num_iterations == math.ceil(base.max_num_iterations / b)
    assert model.refine_every == math.ceil(base_model.refine_every / b)
    assert model.stop_split_at == math.ceil(base_model.stop_split_at / b)
    assert fast.optimizers.keys() == base.optimizers.keys()
    for group, entry in base.optimizers.items():
        scaled, one = fast.optimizers[group]["optimizer"], entry["optimizer"]
        assert scaled.lr == pytest.approx(one.lr * math.sqrt(b)), group
        betas = getattr(one, "betas", (0.9, 0.999))  # torch's Adam default where a config leaves them
        assert getattr(scaled, "betas", (0.9, 0.999)) == pytest.approx((betas[0] ** b, betas[1] ** b)), group
        if entry["scheduler"] is not None:
            max_steps = entry["scheduler"].max_steps
            assert fast.optimizers[group]["scheduler"].max_steps == math.ceil(max_steps / b), group


def test_camera_optimizer_with_several_cameras_is_one_error_at_start():
    config = splat_plus_trainer_config()
    config.pipeline.datamanager.cameras_per_step = 2
    inputs.check_options(config)  # fine without them
    config.pipeline.model.camera_optimizer.mode = "SO3xR3"
    with pytest.raises(
        UserInputError, match="cameras-per-step 2 does not work with --pipeline.model.camera-optimizer.mode"
    ):
        inputs.check_options(config)
    config.pipeline.model.camera_optimizer.mode = "off"
    config.pipeline.model.use_bilateral_grid = True
    with pytest.raises(UserInputError, match="use-bilateral-grid"):
        inputs.check_options(config)


# 2 ranks x 2 cameras per step (cameras-per-step auto) through the real torchrun: identical replicas through
# refines and the schedule scaled for W x B are checked on the run of
# tests/parallel/test_rank_local_images.py::test_torchrun_two_ranks_hold_their_shards_and_evaluate_once
