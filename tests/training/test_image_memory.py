"""Train images in host memory or streamed from disk, the per-step prefetch, device OOM messages,
empty_cache after refine, and the large synthetic scene generator (all on the CPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

from ns_splat_plus import upstream
from ns_splat_plus.parallel import camera_for_step
from ns_splat_plus.training import datamanager as dm_module
from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig
from ns_splat_plus.training.images.plan import choose_image_memory, ignored_placement_note
from ns_splat_plus.training.images.stores import StreamingImageStore

GIB = 1 << 30
K4 = (2160, 3840)


# --- the memory plan: a pure function -------------------------------------------------------------


def test_images_that_fit_stay_in_host_memory_pinned_on_cuda():
    plan = choose_image_memory([K4] * 1000, 60 * GIB, "auto", cuda=True)
    assert plan.mode == "host" and plan.pinned
    assert plan.describe() == (
        "Train images: 1000 x 3840x2160 uint8 = 23.2 GiB in host memory (pinned; 60.0 GiB available)"
    )
    assert not choose_image_memory([K4] * 1000, 60 * GIB, "auto", cuda=False).pinned  # pinning needs CUDA
    # fits in host memory but over the pinned budget: pageable
    plan = choose_image_memory([K4] * 1000, 30 * GIB, "auto", cuda=True)
    assert plan.mode == "host" and not plan.pinned


def test_photos_of_several_sizes_are_counted_up_to_the_largest():
    """A fresh-eyes trial: 7 photos of 128x96 and 14 of 64x48 were "21 x 128x96"."""
    plan = choose_image_memory([(96, 128)] * 7 + [(48, 64)] * 14, 60 * GIB, "auto")
    assert plan.describe().startswith("Train images: 21 x up to 128x96 uint8 = ")


def test_images_that_do_not_fit_are_streamed():
    plan = choose_image_memory([K4] * 8000, 60 * GIB, "auto", cuda=True, workers=4, buffered=16)
    assert plan.mode == "stream" and not plan.pinned
    line = plan.describe()
    assert "streaming from disk, 4 workers, 16 images buffered (images need 185.4 GiB, 60.0 GiB available)" in line
    assert choose_image_memory([K4] * 1000, 20 * GIB, "auto").mode == "stream"  # 23.2 GiB > 80 % of 20


def test_the_option_overrides_the_choice():
    assert choose_image_memory([K4] * 8000, 60 * GIB, "host").mode == "host"
    plan = choose_image_memory([K4] * 10, 60 * GIB, "stream", cuda=True)
    assert plan.mode == "stream" and "--pipeline.datamanager.image-memory" in plan.describe()
    assert choose_image_memory([K4] * 10, 60 * GIB, "auto", dtype="float32").total_bytes == 10 * 2160 * 3840 * 12
    with pytest.raises(ValueError):
        choose_image_memory([K4], GIB, "gpu")


def test_splatfactos_placement_options_are_said_to_be_ignored_only_where_set():
    assert ignored_placement_note("gpu", False) is None  # nerfstudio's defaults: nothing to say
    line = ignored_placement_note("cpu", False)
    assert line is not None and line.startswith("--pipeline.datamanager.cache-images cpu: ignored")
    assert "images-on-gpu" not in line and "--pipeline.datamanager.image-memory" in line
    both = ignored_placement_note("cpu", True)
    assert both is not None and both.startswith(
        "--pipeline.datamanager.cache-images cpu and --pipeline.datamanager.images-on-gpu True: ignored"
    )


# --- the datamanager: the images the camera order asks for, same pixels as nerfstudio's ---------------


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """A pinhole scene and the same scene with OpenCV distortion (nerfstudio undistorts it)."""
    root = tmp_path_factory.mktemp("scenes")
    plain = small_scene(root / "plain")
    distorted = root / "distorted"
    shutil.copytree(plain, distorted)
    cameras = distorted / "colmap" / "sparse" / "0" / "cameras.txt"
    _, _, w, h, fx, fy, cx, cy = cameras.read_text().split()
    cameras.write_text(f"1 OPENCV {w} {h} {fx} {fy} {cx} {cy} -0.08 0.02 0.002 -0.001\n")
    return {"plain": plain, "distorted": distorted}


def _datamanager(scene: Path, image_memory: str = "auto", buffer: int = 16):
    config = SplatPlusDataManagerConfig(
        data=scene,
        dataparser=ColmapDataParserConfig(),
        cache_images_type="uint8",
        image_memory=image_memory,
        stream_buffer=buffer,
        stream_workers=2,
    )
    return config.setup(device="cpu")


def _nerfstudio_images(scene: Path):
    """nerfstudio 1.1.5's in-memory path: ``_load_images`` (decode, undistort, update the cameras)."""
    reference = _datamanager(scene)
    images = upstream.load_images(reference, "train", cache_images_device="gpu")  # "gpu" on a CPU device: plain
    return images, reference.train_dataset.cameras


@pytest.mark.parametrize("image_memory", ["host", "stream"])
@pytest.mark.parametrize("scene_name", ["plain", "distorted"])
def test_each_step_gets_the_image_of_the_camera_order(scenes, scene_name, image_memory, monkeypatch):
    scene = scenes[scene_name]
    expected, expected_cameras = _nerfstudio_images(scene)
    # rank 1 of 2: the image of step s is camera_for_step(s, 1, 2, ...), not rank 0's
    monkeypatch.setattr(dm_module.collectives, "get_rank", lambda: 1)
    monkeypatch.setattr(dm_module.collectives, "get_world_size", lambda: 2)
    monkeypatch.setattr(dm_module.agreement, "agree", lambda values: {})  # no second rank to agree with
    datamanager = _datamanager(scene, image_memory, buffer=2)
    n, seed = len(datamanager.train_dataset), datamanager.config.train_cameras_sampling_seed
    assert datamanager.image_plan.mode == image_memory
    # the cameras are on the device already: a step slices them, no Cameras.to (a copy of the dataclass)
    monkeypatch.setattr(dm_module.Cameras, "to", lambda *a, **k: pytest.fail("Cameras.to in a training step"))
    for step in range(2 * n // 2 + 3):  # past an epoch boundary (n / 2 steps per epoch on 2 ranks)
        camera, data = datamanager.next_train(step)
        idx = camera_for_step(step, 1, 2, n, seed)
        assert camera.metadata["cam_idx"] == idx
        assert data["image"].dtype == torch.uint8
        assert torch.equal(data["image"], expected[idx]["image"]), f"step {step}: pixels of image {idx}"
        # the undistorted intrinsics, as nerfstudio writes them
        for attr in ("fx", "fy", "cx", "cy", "width", "height"):
            assert torch.equal(getattr(camera, attr)[0], getattr(expected_cameras, attr)[idx]), attr
        store = datamanager.cached_train
        if isinstance(store, StreamingImageStore):  # the next step's image is already asked for
            assert camera_for_step(step + 1, 1, 2, n, seed) in store._futures
            assert len(store._futures) <= 2
    if scene_name == "distorted":  # undistortion really changed something
        assert not torch.equal(expected_cameras.fx, _datamanager(scene).train_dataset.cameras.fx)
    if isinstance(datamanager.cached_train, StreamingImageStore):
        datamanager.cached_train.close()


@pytest.mark.parametrize("scene_name", ["plain", "distorted"])
def test_eval_images_are_nerfstudios_pixels_and_intrinsics(scenes, scene_name, monkeypatch):
    """The eval cache (decoded like the train images, into pinned blocks on CUDA) holds what nerfstudio
    1.1.5's ``_load_images("eval")`` would: the same pixels and the same undistorted eval cameras."""
    from ns_splat_plus.training.images import load as image_loading

    scene = scenes[scene_name]
    reference = _datamanager(scene)
    expected = upstream.load_images(reference, "eval", cache_images_device="gpu")  # "gpu" on a CPU device: plain
    calls = []
    real = image_loading.load_host_images
    monkeypatch.setattr(image_loading, "load_host_images", lambda *a, **k: calls.append(k) or real(*a, **k))
    datamanager = _datamanager(scene)
    cached = datamanager.cached_eval
    assert calls and calls[0]["description"] == "Decoding eval images"  # the shared decoder, not upstream's
    assert len(cached) == len(expected) == len(datamanager.eval_dataset) > 0
    for ours, theirs in zip(cached, expected):
        assert ours["image"].dtype == torch.uint8 and torch.equal(ours["image"], theirs["image"])
        assert ours["image_idx"] == theirs["image_idx"]
    for attr in ("fx", "fy", "cx", "cy", "width", "height"):
        assert torch.equal(
            getattr(datamanager.eval_dataset.cameras, attr), getattr(reference.eval_dataset.cameras, attr)
        ), attr
    if scene_name == "distorted":  # undistortion really changed the eval cameras
        assert not torch.equal(reference.eval_dataset.cameras.fx, _datamanager(scene).eval_dataset.cameras.fx)


# --- streaming through the real trainer ------------------------------------------------------------


def _train(scene: Path, out: Path, image_memory: str, steps: int = 4):
    config = trainer_config(scene, out, steps=steps)
    config.warmup_steps = 0
    config.pipeline.datamanager.image_memory = image_memory
    config.pipeline.datamanager.stream_buffer = 2
    trainer = build_trainer(config)
    trainer.train()
    close_writers()
    return trainer


@pytest.fixture(scope="module")
def host_trainer(scenes, tmp_path_factory):
    return _train(scenes["plain"], tmp_path_factory.mktemp("host"), "host")


def test_streaming_trains_exactly_like_host_memory(scenes, host_trainer, tmp_path):
    streamed = _train(scenes["plain"], tmp_path, "stream")
    store = streamed.pipeline.datamanager.cached_train
    assert isinstance(store, StreamingImageStore) and 0 < store.decoded and store.max_held <= 2
    host_params = host_trainer.pipeline.model.gauss_params
    for name, value in streamed.pipeline.model.gauss_params.items():
        assert torch.equal(value, host_params[name]), name  # same pixels, same steps: same Gaussians
    store.close()


def test_startup_time_is_printed_and_written(host_trainer, monkeypatch, capsys):
    from nerfstudio.utils import writer

    from ns_splat_plus.training import startup

    written = {}
    monkeypatch.setattr(writer, "put_scalar", lambda name, scalar, step: written.update({name: (scalar, step)}))
    seconds = startup.report_startup(host_trainer)
    assert written[startup.STARTUP_SCALAR] == (seconds, 0) and seconds > 0
    assert "from process start to the warmup before the first training step" in capsys.readouterr().out


# --- out of device memory --------------------------------------------------------------------------


def test_out_of_memory_in_a_step_is_one_message(host_trainer, monkeypatch):
    from ns_splat_plus.training.oom import DeviceOutOfMemoryError
    from ns_splat_plus.training.step import run_training_step

    model = host_trainer.pipeline.model

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(model, "get_outputs", oom)
    with pytest.raises(DeviceOutOfMemoryError) as caught:
        run_training_step(host_trainer, 4)
    message = str(caught.value)
    assert f"with {model.num_points:,} Gaussians" in message
    assert "rendering a 48x36 image" in message
    for setting in (
        "--pipeline.model.densify-grad-thresh",
        "--pipeline.model.cull-alpha-thresh",
        "--pipeline.model.max-gs-num",
        "--pipeline.datamanager.image-memory stream",
        "fewer cameras per step",
    ):
        assert setting in message, setting
    assert caught.value.__context__ is None  # no CUDA traceback chained to the message
    assert all(p.grad is None for p in model.parameters())  # freed before raising


def test_out_of_memory_in_the_warmups_pass_at_a_later_size_is_one_message(host_trainer, monkeypatch):
    """The warmup's render at a later training size runs outside a training step: the same message, saying when."""
    from ns_splat_plus.training.oom import DeviceOutOfMemoryError
    from ns_splat_plus.training.step import run_forward_and_backward

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    model = host_trainer.pipeline.model
    monkeypatch.setattr(model, "get_outputs", oom)
    with pytest.raises(DeviceOutOfMemoryError) as caught:
        run_forward_and_backward(host_trainer, 4000)
    message = str(caught.value)
    assert (
        f"out of device memory in the warmup's render at step 4000's image size with {model.num_points:,} " in message
    )
    assert "Tried to allocate 8.00 GiB" in message and "--pipeline.datamanager.image-memory stream" in message
    assert caught.value.__context__ is None


# --- empty_cache after refine --------------------------------------------------------------------


def test_empty_cache_after_refine_switch_and_expandable_segments(monkeypatch):
    from ns_splat_plus.strategy.monitor import maybe_empty_cache

    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    cuda = torch.device("cuda", 0)
    assert maybe_empty_cache(cuda, True) and len(calls) == 1
    assert not maybe_empty_cache(cuda, False) and not maybe_empty_cache(torch.device("cpu"), True)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512,expandable_segments:True")
    assert not maybe_empty_cache(cuda, True) and len(calls) == 1


def test_the_model_option_reaches_the_strategy():
    from ns_splat_plus.model import SplatPlusModelConfig
    from ns_splat_plus.strategy import build_strategy
    from ns_splat_plus.strategy.build import StrategyOptions

    for strategy in ("default", "mcmc"):
        config = SplatPlusModelConfig(strategy=strategy, empty_cache_after_refine=False)
        built = build_strategy(StrategyOptions.from_model_config(config, num_train_data=10, world_size=1, rng_seed=0))
        assert built.empty_cache_after_refine is False


# --- the large synthetic scene --------------------------------------------------------------------


def test_large_scene_is_read_by_nerfstudios_colmap_dataparser(tmp_path):
    from splatbench.scenes import make_large_scene

    scene = make_large_scene(tmp_path / "large", n_views=6, width=64, height=48, n_gaussians=2000, device="cpu")
    parser = ColmapDataParserConfig(data=scene).setup()
    train, val = parser.get_dataparser_outputs("train"), parser.get_dataparser_outputs("val")
    assert len(train.image_filenames) + len(val.image_filenames) == 6
    assert set(train.cameras.width.reshape(-1).tolist()) == {64}
    assert set(train.cameras.height.reshape(-1).tolist()) == {48}
    assert train.metadata["points3D_xyz"].shape == (2000, 3)
    from PIL import Image

    pixels = np.asarray(Image.open(train.image_filenames[0]))
    assert pixels.shape == (48, 64, 3) and pixels.std() > 10  # content, not a blank frame


# --- pinned host memory in blocks --------------------------------------------------------------------


def test_pinned_slabs_pack_images_into_a_few_blocks():
    from ns_splat_plus.training.images.stores import PinnedSlabs, slab_size_for

    # 875 images of 3840x2160x3 bytes: 1 GiB blocks of 43 (21 GiB), not 875 blocks of 32 MiB (27.3 GiB)
    assert slab_size_for(3840 * 2160 * 3, 875) == 1 << 30
    assert slab_size_for(2400, 7) == 8192 and slab_size_for(100, 1) == 128

    slabs = PinnedSlabs(slab_bytes=4096, pin=False)  # the same layout as pinned, in ordinary memory
    images = [torch.full((10, 100), i, dtype=torch.uint8) for i in range(10)]  # 1000 bytes each
    copies = [slabs.copy_in(image) for image in images]
    assert all(torch.equal(a, b) for a, b in zip(images, copies))
    # 1000 bytes aligned to 1024: four images per 4096-byte block, not one (power-of-two) block each
    assert len(slabs.slabs) == 3 and slabs.reserved_bytes == 3 * 4096
    storages = {c.untyped_storage().data_ptr() for c in copies}
    assert len(storages) == 3
    odd = slabs.copy_in(torch.ones(3, dtype=torch.uint8))  # leaves the free offset unaligned
    floats = slabs.copy_in(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert floats.dtype == torch.float32 and floats[1, 2] == 5.0 and int(odd.sum()) == 3
    assert (floats.data_ptr() - floats.untyped_storage().data_ptr()) % 64 == 0  # aligned after the odd copy
    big = slabs.copy_in(torch.ones(5000, dtype=torch.uint8))  # larger than a block: a block of its own
    assert big.numel() == 5000 and slabs.slabs[-1].numel() == 8192
    assert all(torch.equal(a, b) for a, b in zip(images, copies))  # later copies overwrote nothing


def test_pinned_host_images_share_blocks_sized_to_the_dataset(monkeypatch):
    from ns_splat_plus.training.images import stores as image_store

    class Unpinned(image_store.PinnedSlabs):  # no CUDA here: same code path, ordinary memory
        def __init__(self, slab_bytes, pin=True):
            super().__init__(slab_bytes, pin=False)

    monkeypatch.setattr(image_store, "PinnedSlabs", Unpinned)
    rng = np.random.default_rng(0)
    pixels = [torch.from_numpy(rng.integers(0, 255, (20, 40, 3), dtype=np.uint8)) for _ in range(7)]  # 2400 bytes
    decoded = []

    def decode(idx):
        decoded.append(idx)
        return {"image": pixels[idx].clone(), "image_idx": idx}

    store = image_store.load_host_images(decode, 7, workers=3, pin=True)
    assert sorted(decoded) == list(range(7))  # each image decoded once
    assert all(torch.equal(store[i]["image"], pixels[i]) for i in range(7))
    # alone, each would take 4096 bytes (28,672 in all); three per 8192-byte block: 24,576
    assert store.slabs is not None and len(store.slabs.slabs) == 3 and store.slabs.reserved_bytes == 24576
    plain = image_store.load_host_images(decode, 7, workers=3, pin=False)
    assert plain.slabs is None and torch.equal(plain[3]["image"], pixels[3])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pinned_host_images_are_page_locked_without_per_image_rounding():
    from ns_splat_plus.training.images.stores import load_host_images

    shape = (700, 1000, 3)  # 2.1 MB: a pinned allocation of its own would take 4 MiB
    store = load_host_images(lambda i: {"image": torch.full(shape, i, dtype=torch.uint8)}, 12, workers=4, pin=True)
    assert all(store[i]["image"].is_pinned() and int(store[i]["image"][0, 0, 0]) == i for i in range(12))
    total = 12 * 700 * 1000 * 3
    assert total <= store.slabs.reserved_bytes <= (32 << 20) < 12 * (4 << 20)
