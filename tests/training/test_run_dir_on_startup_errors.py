"""A start-up error removes the unused run directory only on the rank that claimed it (rank 0): another rank's
error (a damaged photo in its own share) must not delete the directory rank 0 is still writing into (its
TensorBoard event file; in CI, rank 0 then failed with a FileNotFoundError traceback of its own)."""

from __future__ import annotations

import os

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus.parallel import collectives


def _setup_with_a_damaged_photo(tmp_path, monkeypatch, main_process: bool):
    scene = small_scene(tmp_path / "scene")
    photo = sorted((scene / "images").iterdir())[0]
    os.truncate(photo, 300)
    config = trainer_config(scene, tmp_path / "out", steps=10)  # rank 0 claims the run directory here
    run = config.get_base_dir()
    assert run.is_dir()
    monkeypatch.setattr(collectives, "is_main_process", lambda: main_process)
    try:
        with pytest.raises(SystemExit) as stopped:
            build_trainer(config)
    finally:
        close_writers()
    assert stopped.value.code == 2
    return run


def test_another_ranks_startup_error_leaves_rank_0s_run_directory(tmp_path, monkeypatch):
    run = _setup_with_a_damaged_photo(tmp_path, monkeypatch, main_process=False)
    assert run.is_dir()


def test_rank_0s_startup_error_removes_its_unused_run_directory(tmp_path, monkeypatch):
    run = _setup_with_a_damaged_photo(tmp_path, monkeypatch, main_process=True)
    assert not run.exists()
    assert not (tmp_path / "out").exists(), "the --output-dir it made for the run is left, empty"


def test_a_startup_error_keeps_an_output_dir_that_was_there_before(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    run = _setup_with_a_damaged_photo(tmp_path, monkeypatch, main_process=True)
    assert not run.exists() and not run.parent.exists()  # <experiment>/<method>/ made for the run
    assert (tmp_path / "out").is_dir()


def test_a_removed_run_folder_is_said_to_be_removed(tmp_path, capsys):
    """The start-up lines named the run folder (Config: <run>/config.yml, Saving checkpoints to ...): a start-up
    error that then removes it says so (a fresh-eyes trial found the named folder missing), a kept one says nothing."""
    from ns_splat_plus.training import run_dir

    runs = {name: tmp_path / "out" / name / "splat-plus" / "t" for name in ("kept", "removed")}
    for name, files in (("kept", ("config.yml", "step-1.ckpt")), ("removed", ("config.yml",))):
        runs[name].mkdir(parents=True)
        for file in files:
            (runs[name] / file).write_text("x")
        run_dir.discard_if_unused(runs[name])
    err = capsys.readouterr().err
    assert err == f"splat-plus: nothing was trained, so the run folder {runs['removed']} was removed\n"
    assert runs["kept"].is_dir() and not runs["removed"].exists()


def test_the_rank_records_of_a_run_stopped_before_its_first_step_count_as_unused(tmp_path):
    """Several ranks write ranks/*.json at start-up: a run stopped before its first step (SIGTERM in warmup, a
    full disk) kept its directory "(it holds other files)", those files being its own (a fresh-eyes trial)."""
    from ns_splat_plus.training import run_dir

    def made(name: str, *records: str):
        run = tmp_path / name / "splat-plus" / "t"
        (run / run_dir.RANK_RECORDS).mkdir(parents=True)
        (run / "config.yml").write_text("x")
        (run / "densification.jsonl").write_text("{}")
        for record in records:
            (run / run_dir.RANK_RECORDS / record).write_text("{}")
        return run

    stopped = made("stopped", "startup_rank0.json", "rank0.json", "rank1.json")
    run_dir.discard_if_unused(stopped, also=run_dir.SETUP_FILES)
    assert not stopped.exists()
    kept = made("kept", "rank0.json")
    (kept / "nerfstudio_models").mkdir()  # anything else: a folder the run did not make at start-up
    run_dir.discard_if_unused(kept, also=run_dir.SETUP_FILES)
    assert (kept / run_dir.RANK_RECORDS / "rank0.json").is_file()
    bare = made("bare", "rank0.json")
    run_dir.discard_if_unused(bare)  # without also: only config.yml counts as unused
    assert bare.exists()
