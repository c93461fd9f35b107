"""ns-eval, ns-viewer, ns-export of a run whose dataset is gone: the message says where it was looked for."""

from __future__ import annotations

from pathlib import Path

from ns_splat_plus.training.saved_config import dataset_missing


def test_a_missing_relative_dataset_is_named_with_the_folder_it_was_looked_for_in(tmp_path, monkeypatch):
    """A fresh-eyes trial: "put the dataset back at my scene" did not say relative to what."""
    monkeypatch.chdir(tmp_path)
    relative = str(dataset_missing(Path("my scene")))
    assert f"looked for from this folder, {tmp_path}" in relative and str(tmp_path / "my scene") in relative
    assert "run the command from the folder ns-train ran in" in relative
    absolute = str(dataset_missing(tmp_path / "gone"))
    assert f"put the dataset back at {tmp_path / 'gone'}," in absolute and "this folder" not in absolute
