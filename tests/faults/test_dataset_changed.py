"""A photo removed from the dataset folder after training: ns-eval says so, naming the photo, and that the photo
now held out trained the model (nerfstudio re-splits and re-normalises the photos it finds, without a word).

The comparison itself, the resume warning and old checkpoints: tests/training/test_dataset_record.py.
"""

from __future__ import annotations

import json

import pytest
from clirun import SPARSE, TINY_SCENE, assert_ok, ns_eval
from inprocess import run_config, train

from splatbench.scenes import make_scene


@pytest.mark.slow
def test_ns_eval_after_a_photo_was_removed_names_it_and_the_training_photo_it_scores(tmp_path):
    scene = make_scene(tmp_path / "scene", TINY_SCENE)  # 8 photos: frame_0000 held out, 1-7 train
    run = train(run_config(scene, tmp_path / "out", "removed", 2)).base_dir
    (scene / "images" / "frame_0000.png").unlink()  # and its pose, as after re-running COLMAP on the folder
    images_txt = scene / SPARSE / "images.txt"
    lines = [line for line in images_txt.read_text().splitlines() if line.strip() and not line.startswith("#")]
    images_txt.write_text("".join(line + "\n\n" for line in lines if not line.endswith("frame_0000.png")))

    proc = ns_eval(run / "config.yml", tmp_path / "metrics.json")
    assert_ok(proc)
    output = " ".join((proc.stdout + proc.stderr).split())  # rich may wrap the line
    assert "The dataset changed since this run trained" in output, output[-3000:]
    assert "1 photo(s) removed since training: images/frame_0000.png" in output
    assert "1 training photo(s) now in the eval split: images/frame_0001.png" in output
    assert "images/frame_0001.png trained the model, so a score over the eval split is not a held-out score" in output
    assert "on 1 NOT held-out image" in output  # the metrics line does not call it held out
    split = json.loads((tmp_path / "metrics.json").read_text())["results"]["split"]
    assert split["held_out"] is False and split["eval_images_trained_on"] == ["images/frame_0001.png"]
