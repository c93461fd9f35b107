"""GPU-only paths at real sizes (issue 33): warmup and resume bitwise on CUDA, the side-stream image
prefetch, MCMC relocation with gsplat's kernels, tight tiles at 1080p and 4K, ns-eval / ns-viewer on a
CUDA checkpoint, and the evaluation memory claim at 1500x1000 with LPIPS on.

Every CUDA test is marked ``gpu`` and skipped without CUDA. Where a test has a core that also runs on
the CPU (the state captures, the prefetch check, the MCMC records, the border scene), the same helper
runs with device "cpu" as an unmarked parametrization: it proves the check itself on every CI run
(each a few seconds to ~25 s on two cores), so that a GPU failure is about the GPU path, not the test.

gsplat's backward adds with atomics, so two CUDA trainings are not bitwise equal: the bitwise checks
here compare restored or reloaded state with the state it was taken from, never two trainings' results.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from clirun import assert_ok, blender_scene, console_script, free_port, ns_eval
from inprocess import assert_bitwise_equal, build_trainer, clone_state, close_writers, small_scene, trainer_config
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
from PIL import Image

from ns_splat_plus import evaluation, strategy
from ns_splat_plus.parallel import cameras_for_step
from ns_splat_plus.training import checkpoint, warmup
from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig
from ns_splat_plus.training.images.stores import StreamingImageStore
from ns_splat_plus.training.snapshot import TrainingSnapshot
from ns_splat_plus.training.step import run_training_step

HAS_CUDA = torch.cuda.is_available()
GPU = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")]
CUDA = pytest.param("cuda", marks=GPU, id="cuda")
CPU = pytest.param("cpu", id="cpu")  # the same check on the CPU: runs in the CPU suite


def gpu_only(test):
    for mark in reversed(GPU):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """16 views of 48x36 (14 train, 2 eval): the in-process trainers and the CLI run."""
    return small_scene(tmp_path_factory.mktemp("gpu_paths_scene"))


def _rng_states(device: torch.device) -> dict:
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def _draw_from_every_rng(device: torch.device) -> None:
    """Advance every RNG the training state holds (as densification noise or a sampler would), so that
    a state equal to the captured one can only come from restoring it, not from an untouched stream."""
    random.random()
    np.random.rand()
    torch.rand(1)
    if device.type == "cuda":
        torch.rand(1, device=device)  # the CUDA generator's Philox offset moves on


def _device_config(scene: Path, out: Path, device: str, steps: int, method_name: str = "splat-plus"):
    config = trainer_config(scene, out, steps=steps, method_name=method_name)
    config.machine.device_type = device
    config.warmup_steps = 0
    return config


# --- 1. warmup leaves the run bitwise unchanged on CUDA ------------------------------------------------


def _run_steps(trainer, steps):
    """The training loop's steps (run_training_step, under the train lock as the loop holds it), without the
    loop's writer / eval / checkpoint parts."""
    for step in steps:
        with trainer.train_lock:
            run_training_step(trainer, step)


def _next_batches(trainer, count: int = 3) -> list:
    """What the default sampler hands the loop's next ``count`` steps (from the trainer's start step): each
    step's camera index and image, drawn through the datamanager's next_train as the step draws them (the
    shard's camera_for_step, the image store and the prefetcher). Drawing consumes no RNG stream."""
    dm = trainer.pipeline.datamanager
    assert dm.config.train_cameras_sampling_strategy == "random" and dm.config.cameras_per_step == 1  # the default
    start = trainer._start_step
    batches = []
    for step in range(start, start + count):
        camera, data = dm.next_train(step)
        batches.append((step, int(camera.metadata["cam_idx"]), data["image"].detach().clone()))
    return batches


def _warmup_capture(trainer) -> dict:
    model = trainer.pipeline.model
    optimizers = trainer.optimizers
    return {
        "param_objects": dict(trainer.pipeline.named_parameters()),
        "params": {n: p.detach().clone() for n, p in trainer.pipeline.named_parameters()},
        "grads": {
            n: None if p.grad is None else p.grad.detach().clone() for n, p in trainer.pipeline.named_parameters()
        },
        "optimizer_params": {
            k: [p for g in o.param_groups for p in g["params"]] for k, o in optimizers.optimizers.items()
        },
        "optimizers": {k: copy.deepcopy(o.state_dict()) for k, o in optimizers.optimizers.items()},
        "schedulers": {k: copy.deepcopy(s.state_dict()) for k, s in optimizers.schedulers.items()},
        "scaler": copy.deepcopy(trainer.grad_scaler.state_dict()),
        "rng": _rng_states(torch.device(trainer.device)),
        "sampling": _next_batches(trainer),  # after "rng": drawing the batches must not move an RNG stream
        "strategy_state": clone_state(model.strategy_state),
        "monitor": model.strategy.monitor_state_dict(),
        "model_step": model.step,
        "trainer_step": trainer.step,
        "num_points": model.num_points,
    }


WARMUP_AFTER = {"cuda": 16, "cpu": 6}
"""Steps trained before the warmup (the CPU's fewer, for time); the warmup then runs steps 16 to 18."""


@pytest.mark.parametrize("device", [CUDA, CPU])
def test_warmup_restores_parameters_fused_adam_and_rng_bitwise(scene, tmp_path, monkeypatch, device):
    """On CUDA: the snapshot of the device tensors, the fused (multi-tensor) Adam state and the CUDA RNG
    come back bitwise after three warmup steps that densified. Fails when the snapshot misses a piece
    (e.g. drop ``torch.cuda.set_rng_state`` from TrainingSnapshot.restore: the "rng" key differs, as the
    spy below draws from the CUDA generator before the restore)."""
    config = _device_config(scene, tmp_path, device, steps=100)
    config.pipeline.model.warmup_length = 1
    config.pipeline.model.refine_every = 2  # refines at 16 and 18: inside the warmup, replacing every parameter
    try:
        trainer = build_trainer(config)
        # on CUDA the run steps every Adam group in one multi-tensor update (--fused-adam None: on with CUDA)
        assert trainer.optimizers.fused_adam == (device == "cuda")
        _run_steps(trainer, range(WARMUP_AFTER[device]))  # non-trivial optimizer, scheduler and strategy state
        trainer._start_step = 16  # refines at 16 and 18 (14 train cameras + refine_every after the last reset)
        before = _warmup_capture(trainer)
        assert before["params"]["_model.gauss_params.means"].device.type == device
        seen = {}
        original_restore = TrainingSnapshot.restore

        def spying_restore(snapshot, trainer_):
            seen["num_points"] = trainer_.pipeline.model.num_points
            seen["opacities"] = trainer_.pipeline.model.gauss_params["opacities"]
            seen["viewer_locked_out"] = trainer_.train_lock.locked()  # a viewer render waits for the restore
            _draw_from_every_rng(torch.device(trainer_.device))
            original_restore(snapshot, trainer_)

        monkeypatch.setattr(TrainingSnapshot, "restore", spying_restore)
        result = warmup.run_warmup(trainer, steps=3)
        after = _warmup_capture(trainer)
        assert result.steps == 3 and result.nonzero_gradient_steps == 3
    finally:
        close_writers()
    # the warmup densified: other Gaussians, other Parameter objects, all undone
    assert seen["num_points"] != before["num_points"]
    assert seen["viewer_locked_out"], "the restore ran while a viewer render could run"
    assert seen["opacities"] is not before["param_objects"]["_model.gauss_params.opacities"]
    assert after["num_points"] == before["num_points"]
    assert after["param_objects"].keys() == before["param_objects"].keys()
    for name, p in before["param_objects"].items():
        assert after["param_objects"][name] is p, f"{name}: a different Parameter object after warmup"
    for name, ps in before["optimizer_params"].items():
        assert all(a is b for a, b in zip(after["optimizer_params"][name], ps)), name
    for key in ("params", "grads", "optimizers", "schedulers", "scaler", "rng", "sampling", "strategy_state"):
        assert_bitwise_equal(before[key], after[key], key)
    for key in ("monitor", "model_step", "trainer_step"):
        assert_bitwise_equal(before[key], after[key], key)
    assert any(len(s["state"]) for s in before["optimizers"].values())  # there was optimizer state to restore
    if device == "cuda":
        assert "cuda" in before["rng"]


def _compiled_ssim_kernels() -> set:
    """The compiled Triton kernels the fused SSIM's launchers hold (one per specialization Triton made)."""
    from ns_splat_plus.kernels import ssim as ssim_kernels

    return {id(kernel) for launcher in ssim_kernels._launchers() for kernel in launcher.compiled.values()}


@gpu_only
@pytest.mark.parametrize("later_sizes", [True, False], ids=["warmup", "without-later-sizes"])
def test_after_the_warmup_no_training_size_compiles_a_kernel(tmp_path_factory, tmp_path, monkeypatch, later_sizes):
    """The warmup's passes at the later training sizes leave nothing for Triton to compile after step 0:
    training through the resolution schedule (1/4 size, 1/2 from step 10, full from 20, where the ground
    truth is read as uint8) launches only kernels that the warmup compiled. The control run, without the
    passes, compiles new ones in training: the sizes do change the kernels' specialization."""
    from ns_splat_plus.kernels import ssim as ssim_kernels
    from splatbench.scenes import SceneSpec, make_scene

    scene = make_scene(tmp_path_factory.mktemp("sizes"), SceneSpec(n_views=16, width=192, height=144, focal=168.0))
    config = _device_config(scene, tmp_path, "cuda", steps=30)
    config.warmup_steps = 2
    model = config.pipeline.model
    model.num_downscales, model.resolution_schedule = 2, 10
    model.ssim_kernel, model.fused_loss = "triton", True
    if not later_sizes:
        monkeypatch.setattr(warmup, "later_resolution_steps", lambda trainer: [])
    for launcher in ssim_kernels._launchers():
        launcher.compiled.clear()
    seen = {}
    run_warmup = warmup.run_warmup

    def run_warmup_and_look(trainer_, *args, **kwargs):
        result = run_warmup(trainer_, *args, **kwargs)
        seen["after_warmup"], seen["later_sizes"] = _compiled_ssim_kernels(), result.later_sizes
        return result

    monkeypatch.setattr(warmup, "run_warmup", run_warmup_and_look)
    try:
        trainer = build_trainer(config)
        trainer.train()
    finally:
        close_writers()
    assert seen["after_warmup"], "the launchers hold no compiled kernel: Triton's launches went elsewhere"
    after_training = _compiled_ssim_kernels()
    if later_sizes:
        assert seen["later_sizes"] == [(72, 96), (144, 192)]
        assert after_training == seen["after_warmup"]
    else:
        assert seen["later_sizes"] == []
        assert after_training > seen["after_warmup"]


# --- 2. a resume on CUDA continues bitwise -------------------------------------------------------------

RESUME_STEPS = {"cuda": (40, 35), "cpu": (10, 8)}
"""(steps, the checkpoint step): on CUDA between the refines at 30 and 40, as test_resume.py on the CPU."""


def _resume_state(trainer) -> dict:
    """What a checkpoint must bring back, cloned: Gaussians, optimizer and scheduler state, strategy
    state and monitor, the camera order (the datamanager's sampler), every RNG, the model's step."""
    model = trainer.pipeline.model
    return {
        "params": {k: v.detach().clone() for k, v in model.gauss_params.items()},
        "optimizers": {k: clone_state(o.state_dict()) for k, o in trainer.optimizers.optimizers.items()},
        "schedulers": {k: clone_state(s.state_dict()) for k, s in trainer.optimizers.schedulers.items()},
        "scaler": clone_state(trainer.grad_scaler.state_dict()),
        "strategy_state": clone_state(model.strategy_state),
        "monitor": model.strategy.monitor_state_dict(),
        "sampler": clone_state(checkpoint.sampler_state(trainer.pipeline.datamanager)),
        "rng": clone_state(_rng_states(torch.device(trainer.device))),
        "model_step": int(model.step),
    }


@pytest.mark.parametrize("device", [CUDA, CPU])
def test_resume_reloads_the_state_at_the_checkpoint_bitwise(scene, tmp_path, monkeypatch, device):
    """Train, save at step S, resume a second trainer from that checkpoint (--load-dir / --load-step):
    right after loading it holds the first trainer's state at the save, bitwise and on the same device
    (fused Adam's state on CUDA, the CUDA RNG included), and trains on. Fails when a piece is not saved or
    not restored (e.g. the CUDA RNG: the first run draws from it just before saving), or when the
    optimizers keep the replaced Parameters (nerfstudio #3554: an index error in the next CUDA step)."""
    steps, save_at = RESUME_STEPS[device]
    torch_device = torch.device(device, 0) if device == "cuda" else torch.device(device)
    config = _device_config(scene, tmp_path / "first", device, steps=steps)
    config.steps_per_save = save_at
    config.save_only_latest_checkpoint = False
    at_save = {}
    try:
        first = build_trainer(config)
        assert first.optimizers.fused_adam == (device == "cuda")
        original_save = first.save_checkpoint

        def saving(step):
            if step == save_at:
                _draw_from_every_rng(torch_device)  # the checkpoint must hold these exact streams
            original_save(step)
            if step == save_at:
                at_save.update(_resume_state(first))
                at_save["trainer_step"] = first.step

        monkeypatch.setattr(first, "save_checkpoint", saving)
        first.train()
    finally:
        close_writers()
    assert at_save and at_save["trainer_step"] == save_at == at_save["model_step"]
    assert (first.checkpoint_dir / f"step-{save_at:09d}.ckpt").is_file()

    config = _device_config(scene, tmp_path / "resumed", device, steps=steps)
    config.load_dir = first.checkpoint_dir
    config.load_step = save_at
    try:
        resumed = build_trainer(config)
        at_resume = _resume_state(resumed)
        model = resumed.pipeline.model
        bound = all(
            o.param_groups[0]["params"][0] is model.gauss_params[k]
            for k, o in resumed.optimizers.optimizers.items()
            if k in model.gauss_params
        )
        start_step = resumed._start_step
        resumed.train()  # continues from step S + 1 on the device
    finally:
        close_writers()
    assert start_step == save_at + 1
    assert at_resume["params"]["means"].device == torch_device
    for key in ("params", "optimizers", "schedulers", "scaler", "strategy_state", "monitor", "sampler", "rng"):
        assert_bitwise_equal(at_save[key], at_resume[key], key)
    assert at_resume["model_step"] == save_at
    assert bound, "optimizers still hold the Parameters replaced by load_state_dict (nerfstudio #3554)"
    assert at_save["strategy_state"]["count"].sum() > 0  # statistics accumulated since the last refine
    assert any(len(s["state"]) for s in at_save["optimizers"].values())
    if device == "cuda":
        assert "cuda" in at_save["rng"]
    assert resumed.step == steps - 1
    assert all(torch.isfinite(p).all() for p in resumed.pipeline.model.gauss_params.values())


# --- 3. the side-stream prefetch delivers the right pixels for the right camera --------------------------

SPIN_CYCLES = 2_000_000
"""torch.cuda._sleep: about a millisecond of the compute stream (clock ~2 GHz), longer than the copy
of one 1080p image from pinned memory."""


@pytest.fixture(scope="module")
def hd_scene(tmp_path_factory):
    """16 views of 1920x1080 JPEGs (14 train), each view of the ring different, rendered with gsplat."""
    from splatbench.scenes import make_large_scene

    return make_large_scene(
        tmp_path_factory.mktemp("hd_scene"), n_views=16, width=1920, height=1080, n_gaussians=20_000, device="cuda"
    )


def _decoded_on_host(path: Path) -> torch.Tensor:
    """The photo decoded here, independently of the datamanager and its stores: PIL, as nerfstudio."""
    with Image.open(path) as image:
        pixels = np.array(image, dtype=np.uint8)
    assert pixels.ndim == 3 and pixels.shape[2] == 3, pixels.shape
    return torch.from_numpy(pixels)


def _stall_compute_stream() -> None:
    spin = getattr(torch.cuda, "_sleep", None)
    if spin is not None:
        spin(SPIN_CYCLES)
    else:  # a private helper that may go away: a few large matmuls do the same
        a = torch.randn(4096, 4096, device="cuda")
        for _ in range(8):
            a = a @ a * 1e-3


def check_prefetched_batches(scene: Path, device: str, cameras_per_step: int, image_memory: str) -> dict:
    """For every step of two epochs: the batch's images on ``device`` are, bitwise, the photos of the
    batch's ``image_idx`` decoded here, which are the step's cameras (``cameras_for_step``), and the
    batch's camera poses are those cameras'. Returns the prefetcher's hit and miss counts.

    On CUDA the checks run on the compute stream without synchronising (read at the end), in a pattern
    that opens both races of a side-stream copy: steps 0 mod 4 stall the compute stream before the batch
    is made (its images are read late while the host frees them and the next copies start: a missing
    ``record_stream`` lets the allocator hand their memory to the next copy), steps 2 mod 4 drain it, so
    that step 3 mod 4 reads its images right after their copy was queued (a missing ``wait_event`` reads
    them half copied)."""
    config = SplatPlusDataManagerConfig(
        data=scene,
        dataparser=ColmapDataParserConfig(downscale_factor=1),  # 1920 wide: no automatic downscale prompt
        cache_images_type="uint8",
        image_memory=image_memory,
        cameras_per_step=cameras_per_step,
        stream_buffer=16,
        stream_workers=4,
    )
    datamanager = config.setup(device=device)
    cuda = device == "cuda"
    try:
        dataset = datamanager.train_dataset
        n, seed = len(dataset), datamanager.config.train_cameras_sampling_seed
        expected = [_decoded_on_host(Path(p)).to(device) for p in dataset.image_filenames]
        for i in range(n):  # every view differs: a swapped image cannot pass
            assert not any(torch.equal(expected[i], expected[j]) for j in range(i)), f"image {i} repeats"
        poses = dataset.cameras.camera_to_worlds.to(device)
        verdicts, draws = [], []
        per_epoch = -(-n // cameras_per_step)  # steps of one epoch (its last one wraps when B does not divide n)
        steps = 2 * per_epoch
        for step in range(steps):
            if cuda and step % 4 == 0:
                _stall_compute_stream()
            elif cuda and step % 4 == 2:
                torch.cuda.current_stream().synchronize()
            camera, data = datamanager.next_train(step)
            indices = cameras_for_step(step, 0, 1, n, seed, cameras_per_step)
            batched = cameras_per_step > 1
            image_idx = [int(i) for i in data["image_idx"]] if batched else [int(data["image_idx"])]
            cam_idx = list(camera.metadata["cam_idx"]) if batched else [camera.metadata["cam_idx"]]
            assert image_idx == cam_idx == indices, (step, image_idx, cam_idx, indices)
            images = data["image"] if batched else data["image"][None]
            assert images.device.type == device and images.dtype == torch.uint8
            assert images.shape == (len(indices), *expected[0].shape), images.shape
            want = torch.stack([expected[i] for i in indices])
            verdicts.append((images == want).flatten(1).all(1))  # [B] on the compute stream, read at the end
            verdicts.append((camera.camera_to_worlds.reshape(-1, 3, 4) == poses[indices]).flatten(1).all(1))
            draws.append(indices)
            del camera, data, images, want
            if cuda and image_memory == "stream":
                time.sleep(0.02)  # a training step's time: decoding keeps ahead, so the prefetch has images to copy
        results = [v.tolist() for v in verdicts]  # the one read of the device
        wrong = [
            (step, draws[step], "pixels" if k % 2 == 0 else "pose")
            for step in range(steps)
            for k in (0, 1)
            if not all(results[2 * step + k])
        ]
        assert not wrong, f"steps whose images or poses are not those of their cameras: {wrong}"
        for epoch in range(2):  # two epochs, every camera in each
            assert sorted({i for d in draws[epoch * per_epoch : (epoch + 1) * per_epoch] for i in d}) == list(range(n))
        prefetcher = datamanager._prefetcher
        return {"hits": prefetcher.hits, "misses": prefetcher.misses, "draws": draws}
    finally:
        store = datamanager.__dict__.get("cached_train")
        if isinstance(store, StreamingImageStore):
            store.close()


@pytest.mark.parametrize("image_memory", ["host", "stream"])
@pytest.mark.parametrize("cameras_per_step", [1, 4])
@pytest.mark.parametrize("device", [CUDA, CPU])
def test_prefetch_delivers_each_steps_own_pixels(request, device, cameras_per_step, image_memory):
    """Fails when a prefetched copy is handed to another camera or step (a swap, a stale guess used),
    read before its copy finished, or overwritten while read (see check_prefetched_batches); on CUDA with
    images in host memory also when a step's images did not come from the side-stream prefetch."""
    scene = request.getfixturevalue("hd_scene" if device == "cuda" else "scene")
    counts = check_prefetched_batches(scene, device, cameras_per_step, image_memory)
    gets = sum(len(d) for d in counts["draws"])
    assert counts["hits"] + counts["misses"] == gets
    if device != "cuda":
        return
    if image_memory == "host":
        # every image after the first step was copied one step ahead (a camera drawn twice in one step
        # would be copied again; the sharding rule never draws one twice, so repeats is 0 today)
        repeats = sum(len(d) - len(set(d)) for d in counts["draws"][1:])
        assert counts["misses"] == cameras_per_step + repeats, counts
    else:
        assert counts["hits"] > 0, counts  # the side stream copied decoded images ahead


# --- 4. splat-plus-mcmc through relocations on CUDA -------------------------------------------------

MCMC_STEPS = {"cuda": 60, "cpu": 22}
DEAD_PER_REFINE = 10


@pytest.mark.parametrize("device", [CUDA, CPU])
def test_mcmc_trains_through_relocations(scene, tmp_path, device):
    """splat-plus-mcmc in-process: before each refine (every 10 steps from 20) ten Gaussians are made
    dead (opacity ~5e-5), so every refine must relocate them, on CUDA with gsplat's relocation kernels.
    Fails when a refine relocates nothing, its record disagrees with the Gaussian counts, dead
    Gaussians survive a refine, or the Gaussians end non-finite (optimizer state misaligned after the
    relocation / addition)."""
    steps = MCMC_STEPS[device]
    config = _device_config(scene, tmp_path, device, steps=steps, method_name="splat-plus-mcmc")
    refine_steps = list(range(20, steps, 10))
    after_refine = []
    try:
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        assert isinstance(model.strategy, strategy.InstrumentedMCMCStrategy)
        min_opacity = model.strategy.min_opacity
        start = model.num_points

        def kill_before_refine(step):
            if step in refine_steps:
                first = DEAD_PER_REFINE * refine_steps.index(step)
                with torch.no_grad():
                    model.gauss_params["opacities"][first : first + DEAD_PER_REFINE] = -10.0

        trainer.callbacks.append(
            TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], kill_before_refine)
        )
        model.strategy.log.add_callback(
            lambda r: after_refine.append(int((torch.sigmoid(model.opacities) < 0.5 * min_opacity).sum())),
            events=["refine"],
        )
        trainer.train()
    finally:
        close_writers()
    assert model.means.device.type == device
    records = [json.loads(line) for line in (trainer.base_dir / strategy.JSONL_NAME).read_text().splitlines()]
    refines = [r for r in records if r["event"] == "refine"]
    assert [r["step"] for r in refines] == refine_steps
    count = start
    for r in refines:
        assert r["strategy"] == "mcmc" and r["num_gaussians_before"] == count
        assert r["relocated"] >= DEAD_PER_REFINE, r  # the dead ones at least
        assert r["relocated"] == r["opacity"]["num_below_threshold"]
        assert r["added"] == int(1.05 * count) - count > 0 and r["num_gaussians"] == count + r["added"]
        count = r["num_gaussians"]
    assert after_refine == [0] * len(refine_steps)  # nothing dead is left right after a refine
    assert model.num_points == count
    assert all(torch.isfinite(p).all() for p in model.gauss_params.values())


# --- 5. tight tiles at real sizes: gsplat's image, bitwise -------------------------------------------


BORDER_BAND = 120.0
"""Border Gaussians have their centres within this many pixels of a border, inside or outside."""


def border_gaussians(width: int, height: int, seed: int = 0) -> dict:
    """Gaussians seen by an identity camera (focal 0.8 x width, principal point centred), one per 25
    pixels: a third centred on the image, two thirds within BORDER_BAND of one of the four borders
    (inside or outside it, along the whole border and past the corners). Standard deviations 0.3 to
    60 px, axis ratios up to 100, any rotation, opacities 1e-3 to 1 (log-uniform), SH degree 3.
    Returns rasterize()'s tensors, on the CPU."""
    g = torch.Generator().manual_seed(seed)
    n = width * height // 25
    focal = 0.8 * width
    u = torch.rand(n, generator=g) * width
    v = torch.rand(n, generator=g) * height
    rest = torch.arange(n // 3, n)
    side = torch.randint(0, 4, (len(rest),), generator=g)  # left, right, top, bottom
    across = (torch.rand(len(rest), generator=g) * 2 - 1) * BORDER_BAND  # < 0: outside the image
    along_x = torch.rand(len(rest), generator=g) * (width + 2 * BORDER_BAND) - BORDER_BAND
    along_y = torch.rand(len(rest), generator=g) * (height + 2 * BORDER_BAND) - BORDER_BAND
    u[rest] = torch.where(side == 0, across, torch.where(side == 1, width - across, along_x))
    v[rest] = torch.where(side == 2, across, torch.where(side == 3, height - across, along_y))
    depth = 2.0 + torch.rand(n, generator=g) * 18.0
    means = torch.stack([(u - width / 2) * depth / focal, (v - height / 2) * depth / focal, depth], -1)
    sigma_px = torch.exp(torch.rand(n, generator=g) * math.log(60.0 / 0.3)) * 0.3
    ratios = torch.exp(torch.rand(n, 2, generator=g) * math.log(100.0))
    major = sigma_px * depth / focal
    scales = torch.stack([major, major / ratios[:, 0], major / ratios[:, 1]], -1)
    K = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
    return {
        "means": means,
        "quats": torch.randn(n, 4, generator=g),
        "scales": scales,
        "opacities": torch.exp(torch.rand(n, generator=g) * math.log(1e-3)),
        "colors": torch.randn(n, 16, 3, generator=g) * 0.3,
        "viewmats": torch.eye(4)[None],
        "Ks": K[None],
    }


def _outside(means2d: torch.Tensor, width: int, height: int) -> torch.Tensor:
    u, v = means2d[..., 0], means2d[..., 1]
    return (u < 0) | (u >= width) | (v < 0) | (v >= height)


def test_border_scene_reaches_across_every_edge():
    """CPU, gsplat's PyTorch projection: the scene of the tight-tile test puts visible Gaussians on both
    sides of each border and past the corners, the tight bounds shrink most squares of those outside,
    and the image is well covered (so that an equal image is not an empty one)."""
    from ns_splat_plus import upstream
    from ns_splat_plus.raster.tile_bounds import tile_radii_torch

    width, height = 1920, 1080
    t = border_gaussians(width, height)
    ops = upstream.torch_reference_ops()
    covars, _ = ops._quat_scale_to_covar_preci(t["quats"], t["scales"], True, False, triu=False)
    radii, means2d, _, conics, _ = ops._fully_fused_projection(
        t["means"], covars, t["viewmats"], t["Ks"], width, height
    )
    visible = radii[0] > 0
    u, v = means2d[0, :, 0], means2d[0, :, 1]
    for name, coordinate, edge in (("left", u, 0), ("right", u, width), ("top", v, 0), ("bottom", v, height)):
        near = visible & ((coordinate - edge).abs() < BORDER_BAND)
        assert (near & (coordinate < edge)).sum() > 1000 and (near & (coordinate >= edge)).sum() > 1000, name
    assert (visible & ((u < 0) | (u >= width)) & ((v < 0) | (v >= height))).sum() > 100  # past the corners
    outside = visible & _outside(means2d[0], width, height)
    tight = tile_radii_torch(radii, conics, t["opacities"][None])
    shrunk = (tight[0] < radii[0])[outside].float().mean().item()
    assert shrunk > 0.3, shrunk
    # opacity x the 2D Gaussian's integral (2 pi sqrt(det cov)), summed over the image's pixels
    a, b, c = conics[0].double().unbind(-1)
    mass = t["opacities"].double() * 2 * math.pi / torch.sqrt((a * c - b * b).clamp_min(1e-12))
    coverage = (mass[visible & ~_outside(means2d[0], width, height)].sum() / (width * height)).item()
    print(f"{int(visible.sum())} visible, {int(outside.sum())} of them centred outside, {shrunk:.2f} shrunk, "
          f"coverage {coverage:.2f}")  # fmt: skip
    assert coverage > 1.0, coverage


@gpu_only
@pytest.mark.parametrize("width,height", [(1920, 1080), (3840, 2160)])
def test_tight_tiles_render_gsplats_image_at_real_sizes(width, height):
    """rasterize() with the opacity-aware tiles against gsplat.rasterization (3-sigma tiles), Gaussians
    on and across the borders (1080 is not a multiple of 16: a half tile row at the bottom). Fails when
    a tile bound drops a tile where a Gaussian still reaches alpha 1/255, at a border or anywhere."""
    from gsplat.rendering import rasterization

    from ns_splat_plus.raster import rasterize

    t = {k: v.cuda() for k, v in border_gaussians(width, height).items()}
    args = dict(width=width, height=height, sh_degree=3, render_mode="RGB")
    with torch.no_grad():
        upstream_render, upstream_alpha, upstream_info = rasterization(
            **t, **args, packed=False, sparse_grad=False, rasterize_mode="classic"
        )
        tight_render, tight_alpha, tight_info = rasterize(**t, **args, backend="gsplat", tight_tiles=True)
        loose_render, loose_alpha, _ = rasterize(**t, **args, backend="gsplat", tight_tiles=False)
    assert torch.equal(loose_render, upstream_render) and torch.equal(loose_alpha, upstream_alpha)
    assert torch.equal(tight_info["radii"], upstream_info["radii"])
    differ = (tight_render != upstream_render).any(-1)
    assert not differ.any(), f"{int(differ.sum())} pixels differ, e.g. (y, x) {differ[0].nonzero()[:5].tolist()}"
    assert torch.equal(tight_alpha, upstream_alpha)
    # the case mattered: the image has content, centres outside the image reach it, the lists are shorter
    assert upstream_alpha.mean() > 0.2
    visible = upstream_info["radii"][0] > 0
    centres = upstream_info["means2d"][0]
    outside = visible & _outside(centres, width, height)
    assert outside.sum() > 1000, int(outside.sum())
    shrunk = (tight_info["tile_radii"][0] < upstream_info["radii"][0])[outside].float().mean().item()
    assert shrunk > 0.3, shrunk  # the tight bounds were in play at the borders
    entries, upstream_entries = tight_info["isect_ids"].numel(), upstream_info["isect_ids"].numel()
    print(f"{width}x{height}: tile entries {entries} of gsplat's {upstream_entries}")
    assert entries < upstream_entries


# --- 6. ns-eval and ns-viewer on a CUDA checkpoint -------------------------------------------------


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


CLI_STEPS = 40


@gpu_only
def test_ns_eval_and_ns_viewer_load_a_cuda_checkpoint(scene, tmp_path):
    """The real commands: ns-train splat-plus on CUDA, then ns-eval (exit 0, finite PSNR, the CUDA
    memory report) and ns-viewer (serves its page) on its config.yml. Fails on any traceback, a non-zero
    exit, a missing checkpoint or metric, or a viewer that does not answer within 90 s."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["COLUMNS"] = "200"
    train = subprocess.run(
        [
            console_script("ns-train"), "splat-plus", "--data", str(scene), "--output-dir", str(tmp_path / "out"),
            # one GPU: on a machine with several, ns-train would spawn one rank per GPU and scale the schedule
            "--machine.device-type", "cuda", "--machine.num-devices", "1", "--vis", "tensorboard",
            "--viewer.quit-on-train-completion", "True",
            "--logging.local-writer.enable", "False", "--steps-per-eval-all-images", "100000",
            "--steps-per-eval-image", "100000", "--pipeline.model.num-downscales", "0",
            "--max-num-iterations", str(CLI_STEPS), "colmap",
        ],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    output = train.stdout + train.stderr
    assert train.returncode == 0 and "Traceback" not in output, output[-4000:]
    configs = list((tmp_path / "out").glob("**/config.yml"))
    assert len(configs) == 1, configs
    config_path = configs[0]
    assert (config_path.parent / "nerfstudio_models" / f"step-{CLI_STEPS - 1:09d}.ckpt").is_file()

    metrics_path = tmp_path / "eval.json"
    evaluate = ns_eval(config_path, metrics_path, env=env)
    output = evaluate.stdout + evaluate.stderr
    assert evaluate.returncode == 0 and "Traceback" not in output, output[-4000:]
    report = json.loads(metrics_path.read_text())
    results = report["results"]
    assert report["checkpoint"].endswith(f"step-{CLI_STEPS - 1:09d}.ckpt")
    assert math.isfinite(results["psnr"]) and results["psnr"] > 5.0, results["psnr"]
    assert results["memory"]["device"].startswith("cuda") and results["memory"]["eval_peak_bytes"] > 0
    assert results["memory"]["train_peak_bytes"] > 0  # recorded by the training run, read from the checkpoint
    # the metrics' limit is that training peak, not the peak of ns-eval's own load (a few MiB)
    assert results["memory"]["metrics_limit_bytes"] == results["memory"]["train_peak_bytes"], results["memory"]

    port = free_port()
    log = tmp_path / "ns-viewer.log"
    with open(log, "w") as log_file:
        viewer = subprocess.Popen(
            [
                console_script("ns-viewer"), "--load-config", str(config_path),
                "--viewer.websocket-host", "127.0.0.1", "--viewer.websocket-port", str(port),
            ],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            env={**env, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        served = False
        while time.monotonic() < deadline and viewer.poll() is None:
            if _serves(port):
                served = True
                break
            time.sleep(0.5)
        exited = viewer.poll()
    finally:
        viewer.terminate()
        try:
            viewer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait()
    text = log.read_text(errors="replace")
    assert exited is None, f"ns-viewer exited (rc {exited}) before serving:\n{text[-4000:]}"
    assert served, f"ns-viewer did not answer on port {port} within 90 s:\n{text[-4000:]}"
    assert "Done loading checkpoint" in text, text[-4000:]
    assert "Traceback" not in text, text[-4000:]


# --- 7. evaluation memory at a real size, LPIPS on ------------------------------------------------------


@gpu_only
@pytest.mark.parametrize("method", ["splat-plus", "splat-plus-lite"])  # the eager step; lite's CUDA graph
def test_a_blender_scene_trains_on_cuda_and_evaluates(scene, tmp_path, method):
    """`ns-train <method> --data DIR blender-data` on CUDA, then ns-eval: nerfstudio's blender parser gives float64
    focal lengths, which gsplat's projection refuses; the model renders with splatfacto's float32 K."""
    data = blender_scene(scene, tmp_path / "blender")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["COLUMNS"] = "200"
    train = subprocess.run(
        [
            console_script("ns-train"), method, "--data", str(data), "--output-dir", str(tmp_path / "out"),
            "--machine.device-type", "cuda", "--machine.num-devices", "1", "--vis", "tensorboard",
            "--viewer.quit-on-train-completion", "True", "--max-num-iterations", str(CLI_STEPS), "blender-data",
        ],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    output = train.stdout + train.stderr
    assert train.returncode == 0 and "Traceback" not in output, output[-4000:]
    (config_path,) = (tmp_path / "out").glob("**/config.yml")
    metrics_path = tmp_path / "eval.json"
    assert_ok(ns_eval(config_path, metrics_path, env=env))
    assert math.isfinite(json.loads(metrics_path.read_text())["results"]["psnr"])


@gpu_only
def test_eval_peak_at_1500x1000_with_lpips_stays_within_the_train_peak(tmp_path, monkeypatch):
    """6 views of 1500x1000 (5 train, 1 eval), trained at full resolution on CUDA with LPIPS on
    (stand-in AlexNet weights, as test_evaluation.py; offline): in-training evaluations (one image at
    10 and 20, all images at 20) and ns-eval's evaluate_all_images afterwards. Fails when any
    evaluation's peak device memory exceeds the training peak (e.g. autograd on in evaluation, all eval
    images on the device, LPIPS' cuDNN benchmark workspace), or when LPIPS did not run."""
    import torchvision

    from ns_splat_plus import upstream
    from splatbench.scenes import make_large_scene

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    weights = upstream.alexnet_weights_path()
    weights.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)

    scene = make_large_scene(tmp_path / "scene", n_views=6, width=1500, height=1000, n_gaussians=200_000)
    config = _device_config(scene, tmp_path / "out", "cuda", steps=30)
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(downscale_factor=1)
    config.steps_per_eval_image = 10
    config.steps_per_eval_all_images = 20
    try:
        trainer = build_trainer(config)
        assert trainer.pipeline.model.lpips is not None  # built from the stand-in weights
        trainer.train()
        report = evaluation.evaluate_all_images(trainer.pipeline)
    finally:
        close_writers()
    datamanager = trainer.pipeline.datamanager
    assert datamanager._train_image_sizes[0] == (1000, 1500)
    assert len(report.per_image) == len(datamanager.eval_dataset) == 1
    assert all(isinstance(m["lpips"], float) and m["lpips"] > 0 for m in report.per_image), report.per_image
    tracker = evaluation.memory_tracker(trainer.pipeline.device)
    assert tracker.num_evaluations >= 4, tracker.as_dict()
    assert tracker.train_peak_bytes and tracker.eval_peak_bytes, tracker.as_dict()
    print(f"train peak {tracker.train_peak_bytes / 2**20:.0f} MiB, eval peak {tracker.eval_peak_bytes / 2**20:.0f} MiB")
    assert tracker.eval_peak_bytes <= tracker.train_peak_bytes, tracker.as_dict()


@gpu_only
def test_metrics_in_strips_stay_within_the_limit_with_the_whole_image_values(scene, tmp_path, monkeypatch):
    """SSIM and LPIPS of a 1920x1080 render under a limit that holds neither whole image's metric: both run
    in row strips on the GPU (not the host), the device's peak stays within the limit, and the numbers
    are those of the whole-image metrics (float rounding aside)."""
    import torchvision

    from ns_splat_plus import upstream
    from ns_splat_plus.model import metrics

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    weights = upstream.alexnet_weights_path()
    weights.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)
    trainer = build_trainer(_device_config(scene, tmp_path / "out", "cuda", steps=1))
    close_writers()
    model, device = trainer.pipeline.model, torch.device("cuda")
    assert model.lpips is not None
    monkeypatch.setattr(model, "eval_pixel_budget", lambda: 0)
    # full float32 convolutions: the comparison is of the strips, not of TF32's rounding at two input sizes
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    H, W = 1080, 1920
    generator = torch.Generator(device).manual_seed(0)
    rgb = torch.rand(H, W, 3, device=device, generator=generator)
    outputs = {"rgb": rgb, "background": torch.zeros(3, device=device)}
    batch = {"image": (rgb + 0.1 * torch.randn(rgb.shape, device=device, generator=generator)).clamp(0, 1)}
    used = []
    for name, module in (("ssim_in_row_strips", metrics), ("lpips_in_row_strips", upstream)):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, _real=real, _name=name: used.append(_name) or _real(*args))
    with torch.no_grad():
        model.eval_memory_limit_bytes = None
        whole, _ = metrics.image_metrics(model, outputs, batch)
        assert used == []
        held = torch.cuda.memory_allocated(device)
        limit = held + metrics.SSIM_BYTES_PER_PIXEL * H * W // 2  # half of SSIM's whole image, a third of LPIPS'
        model.eval_memory_limit_bytes = limit
        torch.cuda.reset_peak_memory_stats(device)
        stripped, _ = metrics.image_metrics(model, outputs, batch)
        peak = torch.cuda.max_memory_allocated(device)
    assert sorted(set(used)) == ["lpips_in_row_strips", "ssim_in_row_strips"], used
    assert model.metric_places == {"ssim": "strips", "lpips": "strips"}, model.metric_places  # as ns-eval reports it
    print(f"limit {limit / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, whole {whole}, strips {stripped}")
    assert peak <= limit, (peak, limit)
    # a render over training's pixel budget (held on the host): its crops go to the device, within the limit
    monkeypatch.setattr(model, "eval_pixel_budget", lambda: H * W // 4)
    used.clear()
    with torch.no_grad():
        torch.cuda.reset_peak_memory_stats(device)
        from_host, _ = metrics.image_metrics(model, outputs, batch)
        peak_from_host = torch.cuda.max_memory_allocated(device)
    assert sorted(set(used)) == ["lpips_in_row_strips", "ssim_in_row_strips"], used
    assert peak_from_host <= limit, (peak_from_host, limit)
    for key in ("psnr", "ssim", "lpips"):
        assert stripped[key] == pytest.approx(whole[key], rel=1e-4), (key, whole, stripped)
        assert from_host[key] == pytest.approx(whole[key], rel=1e-4), (key, whole, from_host)
