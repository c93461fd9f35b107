"""What the loop's stop messages tell a run of several ranks (a fresh-eyes trial on 2 CPU ranks): the resume
command as it must be launched, and, when a streamed photo cannot be read, the checkpoint that exists (or none)."""

from __future__ import annotations

import contextlib
import shlex
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


def test_the_resume_hint_is_the_run_s_own_command_with_load_dir(tmp_path, monkeypatch):
    """The options as typed (a value with a space quoted), the run's --timestamp and any earlier --load-* dropped
    (the first would name the run's own folder, the others another checkpoint than this run's newest), --load-dir
    after the method, the dataparser subcommand and its options last; without `ns-train <method>`, in words."""
    trainer = _trainer(tmp_path)
    _ranks(monkeypatch, 1)
    typed = ["/venv/bin/ns-train", "splat-plus", "--data", "my scene", "--timestamp", "t1", "--load-dir", "old/m"]
    typed += ["--load_step=40", "--load-checkpoint", "old/m/step-000000040.ckpt", "--max-num-iterations", "900"]
    typed += ["--timestamp=t2", "colmap", "--downscale-factor", "2"]
    monkeypatch.setattr(loop.sys, "argv", typed)
    load_dir = shlex.quote(str(trainer.checkpoint_dir))
    assert loop._resume_hint(trainer) == (
        f"resume with: ns-train splat-plus --load-dir {load_dir} --data 'my scene' --max-num-iterations 900 colmap "
        "--downscale-factor 2"
    )
    in_words = f"resume with: ns-train splat-plus --load-dir {load_dir} [the same options]"
    for argv in (["ns-train", "splat-plus-lite", "--data", "s"], ["ns-train", "splat-plus", "--load-config", "c.yml"]):
        monkeypatch.setattr(loop.sys, "argv", argv)
        assert loop._resume_hint(trainer) == in_words


def test_the_resume_hint_of_several_ranks_says_to_launch_them_as_the_run_was(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    _ranks(monkeypatch, 1)
    monkeypatch.setattr(loop.sys, "argv", ["ns-train", "splat-plus", "--data", "s", "colmap"])
    one = loop._resume_hint(trainer)
    assert (
        one == f"resume with: ns-train splat-plus --load-dir {shlex.quote(str(trainer.checkpoint_dir))} --data s colmap"
    )
    _ranks(monkeypatch, 2)
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("TORCHELASTIC_RUN_ID", "none"), ("LOCAL_WORLD_SIZE", "2")):
        monkeypatch.setenv(name, value)  # torchrun on one node: the command is its line
    torchrun = loop._resume_hint(trainer)
    assert torchrun == one.replace(
        "resume with: ns-train", "resume with: torchrun --nproc-per-node 2 $(which ns-train)"
    )
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # on two nodes: launched as the run was
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


def test_a_resume_on_other_ranks_names_a_launcher_that_can_start_them():
    """ns-train's own launcher spawns several ranks on CUDA GPUs only (the CPU's message named it too)."""
    from ns_splat_plus.training.resume import _launch_on

    assert _launch_on(2, "cpu") == "torchrun --nproc-per-node 2 $(which ns-train) ..."
    assert (
        _launch_on(2, "cuda")
        == "ns-train --machine.num-devices 2, or torchrun --nproc-per-node 2 $(which ns-train) ..."
    )
    assert _launch_on(1, "cpu") == "ns-train, without torchrun"
    assert _launch_on(1, "cuda") == "ns-train --machine.num-devices 1"


def test_a_second_ctrl_c_names_the_checkpoint_on_disk_and_how_to_resume(tmp_path, monkeypatch):
    """The first Ctrl-C's checkpoint may be written when the second comes (a fresh-eyes trial: 'exiting without
    saving a checkpoint', and step-61.ckpt was there): the exit names the newest checkpoint, or that there is none."""
    import signal

    from ns_splat_plus.training.stopping import StopRequest

    trainer = _trainer(tmp_path)
    _ranks(monkeypatch, 1, rank=0)
    monkeypatch.setattr(loop.sys, "argv", ["ns-train", "splat-plus", "--data", "s", "colmap"])
    stop = StopRequest(saved_so_far=lambda: loop._saved_so_far(trainer))
    stop._handle(signal.SIGINT, None)  # the first: stop after this step
    with pytest.raises(SystemExit) as none_yet:
        stop._handle(signal.SIGINT, None)
    assert str(none_yet.value.code) == "splat-plus: SIGINT again: exiting at once; this run saved no checkpoint"
    trainer.checkpoint_dir.mkdir()
    for step in (40, 61):
        (trainer.checkpoint_dir / f"step-{step:09d}.ckpt").write_bytes(b"")
    with pytest.raises(SystemExit) as saved:
        stop._handle(signal.SIGINT, None)
    newest = trainer.checkpoint_dir / "step-000000061.ckpt"
    assert str(saved.value.code) == (
        f"splat-plus: SIGINT again: exiting at once; its newest checkpoint: {newest}; {loop._resume_hint(trainer)}"
    )
    monkeypatch.setattr(collectives, "is_main_process", lambda: False)  # rank 1 of 2: rank 0 says it
    with pytest.raises(SystemExit) as other_rank:
        stop._handle(signal.SIGINT, None)
    assert other_rank.value.code == 1


def test_a_checkpoint_interrupted_while_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    from ns_splat_plus.training import checkpoint

    def interrupted(state, f):
        f.write(b"half")
        raise SystemExit("splat-plus: SIGINT again")

    monkeypatch.setattr(checkpoint.torch, "save", interrupted)
    with pytest.raises(SystemExit):
        checkpoint.write_checkpoint({"step": 7}, tmp_path / "nerfstudio_models", 7)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
