"""The viewer's pictures of the training cameras come from the photos in host memory, not from the files
again (training/images/thumbnails.py): the pictures nerfstudio's own ``Viewer.init_scene`` draws from
them are its pictures bit for bit, no photo this rank holds is read, and the training loop hands them to it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.viewer.viewer import Viewer

from ns_splat_plus import upstream
from ns_splat_plus.training.images import thumbnails
from ns_splat_plus.training.images.stores import HostImageStore


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    root = tmp_path_factory.mktemp("thumbnails")
    config = trainer_config(small_scene(root / "scene"), root / "out", steps=2)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    close_writers()
    return trainer


class _Scene:
    """The part of viser's scene that init_scene uses: what it draws at each camera."""

    def __init__(self) -> None:
        self.pictures = {}

    def add_camera_frustum(self, name, image, **kwargs):
        self.pictures[name] = np.array(image)

        class Handle:
            def on_click(self, callback):
                pass

        return Handle()


def _drawn(dataset):
    """nerfstudio 1.1.5's ``Viewer.init_scene`` run on ``dataset``, with a stand-in viser scene: the
    picture it draws at each training camera."""

    class Config:
        max_num_display_images = 512
        camera_frustum_scale = 0.1

    state = type("State", (), {})()
    state.config, state.viser_server = Config(), type("Server", (), {"scene": _Scene()})()
    state._pick_drawn_image_idxs = lambda total: Viewer._pick_drawn_image_idxs(state, total)
    Viewer.init_scene(state, train_dataset=dataset, train_state="training")
    return state.viser_server.scene.pictures


def _name(idx: int) -> str:
    """The viser name init_scene gives camera ``idx``'s picture."""
    return f"/cameras/camera_{idx:05d}"


def _count_reads(dataset, monkeypatch):
    reads = []
    real = dataset.get_data
    monkeypatch.setattr(dataset, "get_data", lambda idx, *a, **k: reads.append(idx) or real(idx, *a, **k))
    return reads


def test_pictures_from_memory_are_nerfstudios_and_read_no_held_photo(trainer, monkeypatch):
    datamanager = trainer.pipeline.datamanager
    store = datamanager.cached_train
    assert isinstance(store, HostImageStore)
    dataset = datamanager.train_dataset
    with thumbnails.one_torch_thread():  # ours are made at one torch thread (see the module's docstring)
        theirs = _drawn(dataset)  # nerfstudio's: each photo decoded again from its file
    reads = _count_reads(dataset, monkeypatch)
    from_memory = thumbnails.viewer_dataset(datamanager, list(range(len(dataset))))
    assert isinstance(from_memory, thumbnails.ThumbnailDataset)
    ours = _drawn(from_memory)
    assert reads == []  # every photo is held: none read again
    assert ours.keys() == theirs.keys() and len(ours) == len(dataset) > 1
    for name in theirs:
        assert ours[name].dtype == theirs[name].dtype == np.uint8
        assert min(ours[name].shape[:2]) == thumbnails.THUMBNAIL_PIXELS
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


@pytest.mark.parametrize("held_here", [(0, 2), None], ids=["a rank's shard", "streamed"])
def test_photos_not_held_here_are_read_on_several_threads_with_nerfstudios_bytes(trainer, monkeypatch, held_here):
    """Photos another rank holds, or a streamed store's, are read by the dataset as nerfstudio reads them, but
    on the picture threads, when the dataset is made, and only those init_scene draws."""
    import threading

    datamanager = trainer.pipeline.datamanager
    dataset = datamanager.train_dataset
    with thumbnails.one_torch_thread():
        theirs = _drawn(dataset)
    theirs[_name(len(dataset) - 1)] = _drawn(dataset)[_name(len(dataset) - 1)]  # not drawn: nerfstudio's, as it is
    held = None if held_here is None else HostImageStore({i: datamanager.cached_train[i] for i in held_here})
    threads = []
    real = dataset.get_data
    monkeypatch.setattr(
        dataset,
        "get_data",
        lambda idx, *a, **k: threads.append((idx, threading.current_thread().name)) or real(idx, *a, **k),
    )
    drawn = list(range(len(dataset)))
    pictures = thumbnails.ThumbnailDataset(dataset, held, drawn[:-1], workers=3)  # the last one not drawn
    ours = _drawn(pictures)  # init_scene asks for every picture, the last one too
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    on_picture_threads = sorted(idx for idx, name in threads if name.startswith("splat-plus-pictures"))
    assert on_picture_threads == [i for i in drawn[:-1] if held_here is None or i not in held_here]
    assert [idx for idx, name in threads if not name.startswith("splat-plus-pictures")] == [drawn[-1]]


def test_pictures_are_made_at_one_torch_thread_on_the_picture_threads(trainer, monkeypatch):
    """Each picture's resize runs with torch at one thread, on the picture threads (torch's own threads wait on
    each other where other processes keep the cores busy: 2.5 s against 0.2 s for fox's 58 photos under a
    2-process load on 2 cores), and the process's thread count is back after."""
    import threading

    datamanager = trainer.pipeline.datamanager
    seen = []
    real = thumbnails.thumbnail_bytes
    monkeypatch.setattr(
        thumbnails,
        "thumbnail_bytes",
        lambda image: seen.append((torch.get_num_threads(), threading.current_thread().name)) or real(image),
    )
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        drawn = list(range(len(datamanager.train_dataset)))
        pictures = thumbnails.viewer_dataset(datamanager, drawn)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(saved)
    assert len(seen) == len(drawn) > 1
    assert all(count == 1 and name.startswith("splat-plus-pictures") for count, name in seen), seen
    # the pictures themselves, not the dataset's photos (the test scene's are smaller than a picture)
    assert all(min(pictures[i]["image"].shape[:2]) == thumbnails.THUMBNAIL_PIXELS for i in drawn)


def test_the_picture_holds_the_shrunk_photos_bytes_whether_held_as_uint8_or_float():
    """Every byte value survives init_scene's ``(x * 255).type(torch.uint8)`` of the picture it is given, and a
    store holding float photos gives the same picture as one holding uint8."""
    import torchvision.transforms.functional as TF

    photo = torch.arange(256, dtype=torch.uint8).repeat(120, 1)[:, :, None].expand(-1, -1, 3).contiguous()
    shrunk = TF.resize(photo.permute(2, 0, 1), thumbnails.THUMBNAIL_PIXELS, antialias=None).permute(1, 2, 0)
    as_nerfstudio_decodes = torch.from_numpy(photo.numpy().astype("float32") / 255.0)
    dataset = type("Dataset", (), {"cameras": None, "__len__": lambda self: 1})()
    for held in (photo, as_nerfstudio_decodes):
        pictures = thumbnails.ThumbnailDataset(dataset, HostImageStore({0: {"image": held}}), [0], workers=1)
        picture = (pictures[0]["image"] * 255).type(torch.uint8)
        assert picture.shape == (100, 213, 3)
        assert torch.equal(picture, shrunk)


def test_the_training_loop_draws_the_pictures_from_memory(tmp_path, monkeypatch):
    """The loop's set-up hands init_scene the pictures from memory for the cameras the viewer draws, and runs it at
    one torch thread (its work on each picture is a few small tensor operations, which torch's threads only slow
    where other processes keep the cores busy); without the viewer, or without splat-plus's store (nerfstudio's
    list of images), nerfstudio's own path."""
    given, threads = [], []
    monkeypatch.setattr(
        upstream,
        "init_viewer_state",
        lambda trainer, dataset=None: given.append(dataset) or threads.append(torch.get_num_threads()),
    )
    # the viewer's choice of cameras (its server is not started here: the test trains with tensorboard)
    monkeypatch.setattr(
        upstream, "drawn_image_indices", lambda t: list(range(len(t.pipeline.datamanager.train_dataset)))
    )
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=1)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trainer.train()
        assert torch.get_num_threads() == 2  # restored after init_scene
    finally:
        torch.set_num_threads(saved)
        close_writers()
    assert len(given) == 1 and isinstance(given[0], thumbnails.ThumbnailDataset), given
    assert threads == [1]
    assert given[0].dataset is trainer.pipeline.datamanager.train_dataset
    datamanager = trainer.pipeline.datamanager
    assert thumbnails.viewer_dataset(datamanager, []) is None  # no viewer: nothing drawn, nothing read
    upstream_list = type("DataManager", (), {"train_dataset": datamanager.train_dataset, "cached_train": [{}]})()
    assert thumbnails.viewer_dataset(upstream_list, [0]) is None  # nerfstudio's own datamanager: its own path
