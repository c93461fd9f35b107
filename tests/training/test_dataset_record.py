"""The photo record of a run (train and eval photo names, the dataparser's transform and scale), kept in its
checkpoints, and what differs later: photos removed, added or re-split since training, poses re-normalised.
A resume and a loaded run (ns-eval) warn; a checkpoint without a record (older) loads without a word."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from clirun import SPARSE, TINY_SCENE
from inprocess import build_trainer, close_writers, run_config, train

from ns_splat_plus.training import checkpoint, dataset_record, resume
from ns_splat_plus.training.dataset_record import DatasetChanges, compare, dataset_changes, photo_record
from splatbench.scenes import make_scene

IDENTITY = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]


def _record(train, eval_, transform=None, scale=1.0, split="val/test"):
    transform = transform or IDENTITY
    return {"train": sorted(train), "eval": sorted(eval_), "eval_split": split, "transform": transform, "scale": scale}


def _frames(*numbers):
    return [f"images/frame_{n:04d}.png" for n in numbers]


# --- the record ------------------------------------------------------------------------------------------


def test_names_are_relative_to_the_dataset_folder_and_sorted(tmp_path, monkeypatch):
    data = tmp_path / "scene"
    paths = [data / "images" / "b.png", data / "images" / "a.png", data / "images_2" / "c.png"]
    expected = ["images/a.png", "images/b.png", "images_2/c.png"]
    assert dataset_record.relative_names(paths, data) == expected
    # a relative --data (read from the folder ns-train ran in) records the same names as an absolute one
    monkeypatch.chdir(tmp_path)
    assert dataset_record.relative_names([p.relative_to(tmp_path) for p in paths], Path("scene")) == expected
    # a file (transforms.json) as --data: its folder; photos outside it: their common folder
    data.mkdir()
    (data / "transforms.json").write_text("{}")
    assert dataset_record.relative_names(paths[:2], data / "transforms.json") == expected[:2]
    outside = [tmp_path / "photos" / "x" / "p.png", tmp_path / "photos" / "y" / "q.png"]
    assert dataset_record.relative_names(outside, data) == ["x/p.png", "y/q.png"]
    assert dataset_record.relative_names(outside[:1], None) == ["p.png"]


def test_record_of_dataparser_outputs(tmp_path):
    transform = torch.tensor([[0.0, 1.0, 0.0, 0.5], [1.0, 0.0, 0.0, -0.25], [0.0, 0.0, -1.0, 2.0]])
    train_outputs = SimpleNamespace(
        image_filenames=[tmp_path / "images" / "2.png", tmp_path / "images" / "1.png"],
        dataparser_transform=transform,
        dataparser_scale=0.125,
    )
    eval_outputs = SimpleNamespace(image_filenames=[tmp_path / "images" / "0.png"])
    assert photo_record(train_outputs, eval_outputs, tmp_path, "val") == {
        "train": ["images/1.png", "images/2.png"],
        "eval": ["images/0.png"],
        "eval_split": "val",
        "transform": [[0.0, 1.0, 0.0, 0.5], [1.0, 0.0, 0.0, -0.25], [0.0, 0.0, -1.0, 2.0]],
        "scale": 0.125,
    }


# --- the comparison --------------------------------------------------------------------------------------


def test_the_same_photos_and_frame_are_no_change():
    saved = _record(_frames(1, 2, 3), _frames(0))
    assert dataset_changes(saved, _record(_frames(3, 2, 1), _frames(0))) == []
    assert not compare(saved, saved)


def test_a_checkpoint_without_a_record_compares_as_unchanged():
    now = _record(_frames(1, 2), _frames(0))
    assert dataset_changes(None, now) == [] and dataset_changes({}, now) == []
    assert dataset_changes(now, None) == []  # a datamanager without datasets (inference)


def test_removed_added_and_re_split_photos_are_named():
    saved = _record(_frames(1, 2, 3, 5, 6, 7), _frames(0, 4))
    now = _record(_frames(0, 2, 3, 6, 7, 8), _frames(1, 5))  # 4 removed, 8 added; 1, 5 held out now; 0 trains
    changes = compare(saved, now)
    assert changes.removed == ["images/frame_0004.png"]
    assert changes.added == ["images/frame_0008.png"]
    assert changes.trained_now_eval == ["images/frame_0001.png", "images/frame_0005.png"]
    assert changes.eval_now_trained == ["images/frame_0000.png"]
    assert changes.frame is None
    assert dataset_changes(saved, now) == [
        "1 photo(s) removed since training: images/frame_0004.png",
        "1 photo(s) added since training: images/frame_0008.png",
        "2 training photo(s) now in the eval split: images/frame_0001.png, images/frame_0005.png",
        "1 held-out photo(s) now in the training split: images/frame_0000.png",
    ]


def test_a_long_list_names_five_and_counts_the_rest():
    saved = _record(_frames(*range(1, 10)), _frames(0))
    now = _record(_frames(1, 2), _frames(0))
    assert dataset_changes(saved, now) == [
        "7 photo(s) removed since training: images/frame_0003.png, images/frame_0004.png, images/frame_0005.png, "
        "images/frame_0006.png, images/frame_0007.png and 2 more"
    ]


def test_the_frame_changes_beyond_the_tolerance_only():
    saved = _record(_frames(1), _frames(0), scale=0.5)
    nudged = [row[:] for row in IDENTITY]
    nudged[0][3] = 0.5e-4  # below TRANSFORM_TOL
    assert dataset_changes(saved, _record(_frames(1), _frames(0), nudged, scale=0.5 * (1 + 0.5e-4))) == []
    moved = [row[:] for row in IDENTITY]
    moved[2][3] = 0.25
    assert dataset_changes(saved, _record(_frames(1), _frames(0), moved, scale=0.5)) == [
        "the dataparser's pose normalisation changed (its transform differs by up to 0.25)"
    ]
    assert dataset_changes(saved, _record(_frames(1), _frames(0), scale=0.4)) == [
        "the dataparser's pose normalisation changed (its scale is 0.4, was 0.5)"
    ]


def test_eval_photos_of_another_split_are_not_changes():
    """A dataparser with separate val and test files (blender-data): training held out val, ns-eval scores test."""
    saved = _record(["train/r_0.png", "train/r_1.png"], ["val/r_0.png"], split="val")
    now = _record(["train/r_0.png", "train/r_1.png"], ["test/r_0.png"], split="test")
    assert dataset_changes(saved, now) == []
    # a training photo among the test photos still is one
    now = _record(["train/r_0.png"], ["test/r_0.png", "train/r_1.png"], split="test")
    assert dataset_changes(saved, now) == ["1 training photo(s) now in the eval split: train/r_1.png"]


def test_eval_mode_all_trains_on_the_eval_photos_without_a_change():
    saved = _record(_frames(0, 1, 2), _frames(0, 1, 2))
    assert dataset_changes(saved, _record(_frames(0, 1), _frames(0, 1))) == [
        "1 photo(s) removed since training: images/frame_0002.png"
    ]


def test_warnings_say_what_the_changes_mean():
    assert dataset_record.resume_warning(DatasetChanges(), "ckpt") is None
    assert dataset_record.evaluation_warning(DatasetChanges()) is None
    changes = DatasetChanges(removed=["images/a.png"], trained_now_eval=["images/b.png"], frame="the frame moved")
    text = dataset_record.resume_warning(changes, "run/step-9.ckpt")
    assert text is not None and text.startswith("Resuming run/step-9.ckpt on a dataset that changed since that run")
    for needle in ("images/a.png", "another coordinate frame", "split is not the one", "start a new run"):
        assert needle in text, needle
    text = dataset_record.evaluation_warning(changes)
    assert text is not None
    for needle in ("images/a.png", "images/b.png trained the model", "not a held-out score", "Put the photos back"):
        assert needle in text, needle
    assert "held-out score" not in (dataset_record.evaluation_warning(DatasetChanges(removed=["a"])) or "")


# --- in a run: recorded in checkpoints, compared on resume and on loading -------------------------------


def _remove_photo(scene: Path, dest: Path, name: str) -> Path:
    """A copy of the COLMAP ``scene`` without the photo ``name`` (its file and its pose): as after re-running COLMAP."""
    data = Path(shutil.copytree(scene, dest))
    (data / "images" / name).unlink()
    images_txt = data / SPARSE / "images.txt"
    lines = images_txt.read_text().splitlines()
    images_txt.write_text("".join(line + "\n\n" for line in lines if line.strip() and not line.endswith(name)))
    return data


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-step run on the tiny scene (frame_0000 held out), its last checkpoint, and a trainer set up on the
    scene without frame_0000 (frame_0001 is held out there)."""
    root = tmp_path_factory.mktemp("record")
    scene = make_scene(root / "scene", TINY_SCENE)
    run = train(run_config(scene, root / "out", "record", 2))
    path = checkpoint.resolve_checkpoint_path(run.checkpoint_dir, None, None)
    changed = build_trainer(run_config(_remove_photo(scene, root / "changed", "frame_0000.png"), root / "out", "c", 2))
    close_writers()
    return run, path, changed


def test_the_checkpoint_records_the_photos_and_frame(trained):
    run, path, _ = trained
    record = checkpoint.read_checkpoint(path)["pipeline"][checkpoint.RUN_INFO_KEY][dataset_record.RECORD_KEY]
    assert record["train"] == _frames(1, 2, 3, 4, 5, 6, 7) and record["eval"] == _frames(0)
    assert record["eval_split"] == "val/test"
    outputs = run.pipeline.datamanager.train_dataparser_outputs
    assert record["transform"] == outputs.dataparser_transform.tolist()
    assert record["scale"] == pytest.approx(float(outputs.dataparser_scale)) and record["scale"] != 1.0


def test_resume_on_the_same_photos_says_nothing(trained, capsys):
    run, path, _ = trained
    resume.check_training_facts(checkpoint.read_checkpoint(path), run, path)
    assert "changed" not in capsys.readouterr().out


def test_resume_on_changed_photos_warns_naming_them(trained, capsys):
    _, path, changed = trained
    resume.check_training_facts(checkpoint.read_checkpoint(path), changed, path)
    out = " ".join(capsys.readouterr().out.split())
    assert f"Resuming {path} on a dataset that changed since that run trained" in out
    assert "1 photo(s) removed since training: images/frame_0000.png" in out
    assert "1 training photo(s) now in the eval split: images/frame_0001.png" in out
    assert "pose normalisation changed" in out and "another coordinate frame" in out


def test_a_checkpoint_without_a_record_resumes_and_loads_without_a_warning(trained, capsys):
    _, path, changed = trained
    state = checkpoint.read_checkpoint(path)
    del state["pipeline"][checkpoint.RUN_INFO_KEY][dataset_record.RECORD_KEY]
    resume.check_training_facts(state, changed, path)
    changed.pipeline.load_pipeline(state["pipeline"], int(state["step"]))
    assert "changed since" not in capsys.readouterr().out
    assert not changed.pipeline.dataset_changes


def test_loading_the_run_on_changed_photos_warns_that_the_score_is_not_held_out(trained, capsys):
    _, path, changed = trained
    state = checkpoint.read_checkpoint(path)
    changed.pipeline.load_pipeline(state["pipeline"], int(state["step"]))
    out = " ".join(capsys.readouterr().out.split())
    assert "The dataset changed since this run trained" in out
    assert "images/frame_0001.png trained the model, so a score over the eval split is not a held-out score" in out
    assert changed.pipeline.dataset_changes.trained_now_eval == ["images/frame_0001.png"]
