"""What the loop's stop messages tell a run of several ranks (a fresh-eyes trial on 2 CPU ranks): the resume
command as it must be launched, and, when a streamed photo cannot be read, the checkpoint that exists (or none)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.training import loop
from ns_splat_plus.training.images.decode import PhotoReadError


def _ranks(monkeypatch, world_size: int, rank: int = 1) -> None:
    monkeypatch.setattr(collectives, "is_distributed", lambda: world_size > 1)
    monkeypatch.setattr(collectives, "get_world_size", lambda: world_size)
    monkeypatch.setattr(collectives, "get_rank", lambda: rank)


def _trainer(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(method_name="splat-plus"), checkpoint_dir=tmp_path / "run models")


def test_the_resume_hint_of_several_ranks_says_to_launch_them_as_the_run_was(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    _ranks(monkeypatch, 1)
    one = loop._resume_hint(trainer)
    assert one == f"resume with: ns-train splat-plus --load-dir '{trainer.checkpoint_dir}' [the same options]"
    _ranks(monkeypatch, 2)
    two = loop._resume_hint(trainer)
    assert two.startswith(one) and "launched on 2 ranks as this run was" in two and "RUN_NAME" in two


def _unreadable_photo_message(trainer, step: int, monkeypatch) -> str:
    monkeypatch.setattr(loop, "exit_on_user_error", lambda rank=0: contextlib.nullcontext())
    with pytest.raises(UserInputError) as raised:
        loop._stop_on_unreadable_photo(trainer, step, PhotoReadError(Path("images/a.png"), FileNotFoundError("gone")))
    return str(raised.value)


def test_a_photo_unreadable_on_several_ranks_names_the_newest_checkpoint_or_none(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    _ranks(monkeypatch, 2, rank=1)
    message = _unreadable_photo_message(trainer, 591, monkeypatch)
    # no save yet: no folder to name, and nothing to --load-dir
    assert "on rank 1: no checkpoint was written" in message and "this run has none yet" in message
    assert str(trainer.checkpoint_dir) not in message and "run the same command again" in message

    trainer.checkpoint_dir.mkdir()
    for step in (100, 500):
        (trainer.checkpoint_dir / f"step-{step:09d}.ckpt").write_bytes(b"")
    message = _unreadable_photo_message(trainer, 591, monkeypatch)
    assert f"the newest is {trainer.checkpoint_dir / 'step-000000500.ckpt'}" in message
    assert "--load-dir" in message and "launched on 2 ranks" in message
