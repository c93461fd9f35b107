"""The SfM points are read once, for the train split: the eval split's dataset is parsed without them
(SplatPlusDataManager.create_eval_dataset), as nothing reads them there, and the preflight checks a
``points3D.bin`` by stepping over its records (colmap_checks.walk_points3D_binary)."""

from __future__ import annotations

import numpy as np
from inprocess import small_scene, trainer_config
from nerfstudio.data.utils import colmap_parsing_utils


def test_the_eval_split_does_not_read_the_sfm_points_again(tmp_path, monkeypatch):
    reads = []
    for name in ("read_points3D_binary", "read_points3D_text"):
        real = getattr(colmap_parsing_utils, name)
        monkeypatch.setattr(colmap_parsing_utils, name, lambda path, _real=real: reads.append(path) or _real(path))
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=1)
    datamanager = config.pipeline.datamanager.setup(device="cpu", test_mode="val", world_size=1, local_rank=0)
    assert len(reads) == 1, reads  # the train split's
    train_points = datamanager.train_dataparser_outputs.metadata["points3D_xyz"]
    assert train_points.shape[0] > 0
    assert len(datamanager.eval_dataset) > 0 and "points3D_xyz" not in datamanager.eval_dataset.metadata
    assert datamanager.dataparser.config.load_3D_points  # the option as given, for any later parse


def test_the_preflight_checks_points3d_bin_by_its_records_without_reading_the_points(tmp_path, monkeypatch):
    """walk_points3D_binary counts what nerfstudio's reader reads, fails where that reader fails (the file ends
    inside a record or a track; bytes after the last record are ignored, as there), and the preflight uses it
    instead of the reader."""
    import struct

    import pytest

    from ns_splat_plus.training import colmap_checks

    sparse = small_scene(tmp_path / "scene") / "colmap" / "sparse" / "0"
    points = {  # tracks of 1-3 observations (the synthetic scene's points have none)
        k: p._replace(image_ids=np.arange(1 + k % 3), point2D_idxs=np.arange(1 + k % 3))
        for k, p in colmap_parsing_utils.read_points3D_text(sparse / "points3D.txt").items()
    }
    path = tmp_path / "points3D.bin"
    colmap_parsing_utils.write_points3D_binary(points, path)
    data = path.read_bytes()
    assert colmap_checks.walk_points3D_binary(path) == len(colmap_parsing_utils.read_points3D_binary(path)) > 1
    first_track = struct.unpack_from("<Q", data, 8 + colmap_checks.POINT_RECORD_BYTES - 8)[0]
    assert first_track > 0
    last_record_start = len(data) - colmap_checks.POINT_RECORD_BYTES - 8 * points[max(points)].image_ids.size
    for cut in (4, 8 + 20, 8 + colmap_checks.POINT_RECORD_BYTES + 4, last_record_start + 10, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(struct.error):
            colmap_parsing_utils.read_points3D_binary(path)  # nerfstudio's reader fails here...
        with pytest.raises(ValueError):
            colmap_checks.walk_points3D_binary(path)  # ...and so does the walk
    path.write_bytes(data + b"\0" * 5)
    assert colmap_checks.walk_points3D_binary(path) == len(points)
    read = []
    monkeypatch.setattr(colmap_parsing_utils, "read_points3D_binary", lambda p: read.append(p))
    path.write_bytes(data)
    for name in ("cameras", "images"):
        getattr(colmap_parsing_utils, f"write_{name}_binary")(
            getattr(colmap_parsing_utils, f"read_{name}_text")(sparse / f"{name}.txt"), tmp_path / f"{name}.bin"
        )
    cameras, images, none, _, _ = colmap_checks.read_model(tmp_path, read_points=True)
    assert cameras and images and none is None and read == []
