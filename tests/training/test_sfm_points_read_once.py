"""The SfM points (training/sfm_points.py): the train split's read from ``points3D.bin`` as arrays, the same tensors
bit for bit as nerfstudio's parser gives, without its per-point reader; the eval split's not read at all
(SplatPlusDataManager.create_eval_dataset); the preflight steps over the file's records to name a damaged one."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest
import torch
from inprocess import small_scene, trainer_config
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from nerfstudio.data.utils import colmap_parsing_utils

from ns_splat_plus.training import colmap_checks, sfm_points

SPARSE = ("colmap", "sparse", "0")


def _with_tracks(points):
    """The synthetic scene's points, with tracks of 1-3 observations (its own have none)."""
    return {k: p._replace(image_ids=np.arange(1 + k % 3), point2D_idxs=np.arange(1 + k % 3)) for k, p in points.items()}


@pytest.fixture
def binary_scene(tmp_path):
    """The small synthetic scene with its COLMAP model in binary files, the points with tracks."""
    scene = small_scene(tmp_path / "scene")
    sparse = scene.joinpath(*SPARSE)
    cameras, images, points = colmap_parsing_utils.read_model(str(sparse), ".txt")
    colmap_parsing_utils.write_model(cameras, images, _with_tracks(points), str(sparse), ".bin")
    for name in ("cameras.txt", "images.txt", "points3D.txt"):
        (sparse / name).unlink()
    return scene


def _count_reads(monkeypatch):
    reads = []
    for name in ("read_points3D_binary", "read_points3D_text"):
        real = getattr(colmap_parsing_utils, name)
        monkeypatch.setattr(colmap_parsing_utils, name, lambda path, _real=real: reads.append(path) or _real(path))
    return reads


def _datamanager(scene, out):
    config = trainer_config(scene, out, steps=1)
    return config.pipeline.datamanager.setup(device="cpu", test_mode="val", world_size=1, local_rank=0)


POINT_KEYS = ("points3D_xyz", "points3D_rgb", "points3D_error", "points3D_num_points2D")


def test_train_points_are_nerfstudios_tensors_without_its_reader(binary_scene, tmp_path, monkeypatch):
    theirs = ColmapDataParserConfig(data=binary_scene).setup().get_dataparser_outputs("train").metadata
    reads = _count_reads(monkeypatch)
    datamanager = _datamanager(binary_scene, tmp_path / "out")
    assert reads == []  # neither split's points through nerfstudio's per-point reader
    for metadata in (datamanager.train_dataparser_outputs.metadata, datamanager.train_dataset.metadata):
        for key in POINT_KEYS:
            assert metadata[key].dtype == theirs[key].dtype, key
            assert torch.equal(metadata[key], theirs[key]), key
    assert theirs["points3D_num_points2D"].max() == 3 and theirs["points3D_xyz"].shape[0] > 1
    assert "points3D_xyz" not in datamanager.eval_dataset.metadata and len(datamanager.eval_dataset) > 0
    assert datamanager.dataparser.config.load_3D_points  # the option as given, for any later parse


def test_a_text_model_reads_its_train_points_once_with_nerfstudios_reader(tmp_path, monkeypatch):
    scene = small_scene(tmp_path / "scene")
    theirs = ColmapDataParserConfig(data=scene).setup().get_dataparser_outputs("train").metadata
    reads = _count_reads(monkeypatch)
    datamanager = _datamanager(scene, tmp_path / "out")
    assert reads == [scene.joinpath(*SPARSE) / "points3D.txt"]  # the train split's; not the eval split's
    for key in POINT_KEYS:
        assert torch.equal(datamanager.train_dataparser_outputs.metadata[key], theirs[key]), key
    assert "points3D_xyz" not in datamanager.eval_dataset.metadata


def test_records_are_read_where_nerfstudios_reader_reads_them_and_fail_where_it_fails(binary_scene, tmp_path):
    path = binary_scene.joinpath(*SPARSE) / "points3D.bin"
    data = path.read_bytes()
    points = colmap_parsing_utils.read_points3D_binary(path)
    records = sfm_points.read_points3D_binary_records(path)
    assert records["id"].tolist() == list(points)
    np.testing.assert_array_equal(records["xyz"], np.stack([p.xyz for p in points.values()]))
    np.testing.assert_array_equal(records["rgb"], np.stack([p.rgb for p in points.values()]))
    np.testing.assert_array_equal(records["error"], [p.error for p in points.values()])
    np.testing.assert_array_equal(records["track"], [len(p.image_ids) for p in points.values()])
    cut = tmp_path / "cut.bin"
    last = len(data) - sfm_points.POINT_RECORD_BYTES - 8 * len(points[max(points)].image_ids)
    for end in (4, 8 + 20, 8 + sfm_points.POINT_RECORD_BYTES + 4, last + 10, len(data) - 1):
        cut.write_bytes(data[:end])
        with pytest.raises(struct.error):
            colmap_parsing_utils.read_points3D_binary(cut)  # nerfstudio's reader fails here...
        with pytest.raises(ValueError):
            sfm_points.points3D_binary_offsets_of(cut)  # ...and so do the offsets
    cut.write_bytes(data + b"\0" * 5)  # bytes after the last record: ignored by both
    assert len(sfm_points.read_points3D_binary_records(cut)) == len(points)


def test_repeated_point_ids_keep_nerfstudios_reader(binary_scene, tmp_path, monkeypatch):
    sparse = binary_scene.joinpath(*SPARSE)
    points = colmap_parsing_utils.read_points3D_binary(sparse / "points3D.bin")
    first = next(iter(points.values()))
    path = sparse / "points3D.bin"
    data = bytearray(path.read_bytes())
    second = 8 + sfm_points.POINT_RECORD_BYTES + 8 * len(first.image_ids)
    data[second : second + 8] = struct.pack("<Q", first.id)  # the second point takes the first one's id
    path.write_bytes(bytes(data))
    theirs = ColmapDataParserConfig(data=binary_scene).setup().get_dataparser_outputs("train").metadata
    assert theirs["points3D_xyz"].shape[0] == len(points) - 1  # nerfstudio's dict keeps one point per id
    reads = _count_reads(monkeypatch)
    datamanager = _datamanager(binary_scene, tmp_path / "out")
    assert reads == [path]
    assert torch.equal(datamanager.train_dataparser_outputs.metadata["points3D_xyz"], theirs["points3D_xyz"])


def test_the_preflight_steps_over_points3d_bin_without_reading_its_points(binary_scene, monkeypatch):
    reads = _count_reads(monkeypatch)
    cameras, images, none, _, _ = colmap_checks.read_model(binary_scene.joinpath(*SPARSE), read_points=True)
    assert cameras and images and none is None and reads == []


def test_a_parse_that_fails_on_a_damaged_model_file_names_it(binary_scene, tmp_path, monkeypatch, capsys):
    """ns-eval, ns-viewer and ns-export parse without ns-train's preflight: the datamanager names the damaged
    file (the preflight's message, shown and exit status 2, as ns-train shows it) where the parse fails on it,
    and leaves any other failure as it was."""
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParser

    sparse = binary_scene.joinpath(*SPARSE)
    for name in ("points3D.bin", "images.bin"):  # read by splat-plus's reader, by nerfstudio's
        path = sparse / name
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
        capsys.readouterr()
        with pytest.raises(SystemExit) as stopped:
            _datamanager(binary_scene, tmp_path / f"out-{name}")
        assert stopped.value.code == 2
        shown = " ".join(capsys.readouterr().err.split())  # rich may wrap the line
        assert re.search(f"splat-plus: the COLMAP .* file {path} cannot be read .* truncated", shown), shown
        path.write_bytes(whole)

    def fails(*args, **kwargs):
        raise RuntimeError("not a file's fault")

    monkeypatch.setattr(ColmapDataParser, "_generate_dataparser_outputs", fails)
    with pytest.raises(RuntimeError, match="not a file's fault"):
        _datamanager(binary_scene, tmp_path / "out-other")


def test_the_check_and_the_train_read_step_over_points3d_bin_once(binary_scene, tmp_path, monkeypatch):
    """The preflight steps over the records to check the file; the train split's read needs the same offsets."""
    calls = []
    original = sfm_points.points3D_binary_offsets
    monkeypatch.setattr(sfm_points, "points3D_binary_offsets", lambda data: calls.append(len(data)) or original(data))
    colmap_checks.read_model(binary_scene.joinpath(*SPARSE), read_points=True)
    datamanager = _datamanager(binary_scene, tmp_path / "out")
    assert datamanager.train_dataparser_outputs.metadata["points3D_xyz"].shape[0] > 1
    assert len(calls) == 1
    path = binary_scene.joinpath(*SPARSE) / "points3D.bin"
    path.write_bytes(path.read_bytes() + b"\0")  # another file now: stepped over again
    sfm_points.points3D_binary_offsets_of(path)
    assert len(calls) == 2
