"""The SfM points are read once, for the train split: the eval split's dataset is parsed without them
(SplatPlusDataManager.create_eval_dataset), as nothing reads them there."""

from __future__ import annotations

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
