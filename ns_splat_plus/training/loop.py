"""The training loop of splat-plus: :func:`train_loop`, nerfstudio 1.1.5's ``Trainer.train`` with
the step of :mod:`ns_splat_plus.training.step`, and what a batch job needs.

Differences from nerfstudio's loop, and why:

* ``--max-num-iterations`` always counts from step 0, also when resuming: nerfstudio 1.1.5 runs
  ``max_num_iterations`` more steps after a resume and its main branch subtracts the start step
  itself; owning the loop makes resume independent of which nerfstudio is installed, and the
  progress line and ETA stay right (no "110 %" after a resume);
* SIGINT (Ctrl-C) and SIGTERM (what schedulers send before killing a job) end the run at a step
  boundary, save a checkpoint and exit non-zero with one line (nerfstudio prints a traceback and
  exits 0 on Ctrl-C, and dies at once on SIGTERM, losing up to ``--steps-per-save`` steps). A second
  Ctrl-C exits at once without saving;
* a signal on any rank, ``trainer.stop_training`` and the viewer's pause on rank 0 are agreed by every
  rank after a step (:mod:`.stopping`): all ranks stop, or wait, at the same step. nerfstudio checks
  them before a step, on the rank that has them only, which leaves the others in a collective;
* the iteration time and rays per second reach TensorBoard / W&B only on logging steps (the same
  running averages; the console and viewer still see every step): two points per step cost about
  0.1 ms of host time each with TensorBoard, in a step whose host part is a few ms (:func:`put_step_times`);
* a training photo that cannot be read while streaming (``--pipeline.datamanager.image-memory stream``:
  deleted, moved or truncated after start-up; FileNotFoundError / ``OSError: image file is truncated``)
  ends the run, it is not skipped: the last finished step is saved as a checkpoint (as on SIGTERM; the
  step that could not read its photo changed nothing yet) and one message names the photo, exit status
  2 (:func:`_stop_on_unreadable_photo`). Skipping it would train on another set of photos than the
  user gave, silently; after restoring the photo, ``--load-dir`` resumes where the run stopped. On
  several ranks the other ranks wait in a collective: no checkpoint is written, the message names the
  photo and the rank, and the launcher ends the others when that rank exits;
* on several ranks, a collective that fails because a rank hung or was stopped (the others wait
  ``--data-parallel.timeout-minutes``) ends in one message naming the rank that did not answer
  (:mod:`ns_splat_plus.parallel.roll_call`), not in a gloo / NCCL traceback of rank 0; one that fails
  because a rank ended (an error there, printed by it; the launcher stops the others) ends the others
  without a second message.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Optional, cast

import torch
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager
from nerfstudio.utils import writer
from nerfstudio.utils.misc import step_check
from nerfstudio.utils.rich_utils import CONSOLE
from nerfstudio.utils.writer import EventName, TimeWriter

from ns_splat_plus import upstream
from ns_splat_plus.errors import UserInputError, exit_on_user_error, exit_with
from ns_splat_plus.parallel import collectives, roll_call
from ns_splat_plus.parallel.config import data_parallel_of
from ns_splat_plus.parallel.devices import rank_environment
from ns_splat_plus.training import console, outputs, rank_record, run_plots
from ns_splat_plus.training.checkpoint import checkpoint_steps
from ns_splat_plus.training.heap_at_exit import freeze_heap_at_exit
from ns_splat_plus.training.images import thumbnails
from ns_splat_plus.training.images.decode import PhotoReadError
from ns_splat_plus.training.step import detached, run_training_step
from ns_splat_plus.training.stopping import STOP_TRAINING, StopRequest, TrainingInterrupted
from ns_splat_plus.upstream import TrainerLike, command_line, note_running_time


def steps_to_run(start_step: int, max_num_iterations: int) -> range:
    """The steps of this run: from ``start_step`` (0, or one past a resumed checkpoint) to
    ``max_num_iterations`` (exclusive), which counts from step 0 in every run."""
    return range(start_step, max(start_step, max_num_iterations))


def train_loop(trainer: TrainerLike) -> None:
    """Train ``trainer`` (a set-up SplatPlusTrainer) from its start step; every rank runs it
    (nerfstudio's ``check_main_thread`` must not wrap it: ranks > 0 would skip their steps)."""
    assert trainer.pipeline.datamanager.train_dataset is not None, "Missing DatsetInputs"
    datamanager = trainer.pipeline.datamanager
    if hasattr(datamanager, "train_dataparser_outputs"):  # a FullImageDatamanager's (SplatPlusDataManager)
        cast(FullImageDatamanager, datamanager).train_dataparser_outputs.save_dataparser_transform(
            trainer.base_dir / "dataparser_transforms.json"
        )
    rank_record.mark_startup(trainer, "viewer_scene_start")
    pictures = thumbnails.viewer_dataset(datamanager, upstream.drawn_image_indices(trainer))  # made on several threads
    # small pictures: more torch threads only wait on each other
    with thumbnails.one_torch_thread() if pictures is not None else contextlib.nullcontext():
        upstream.init_viewer_state(trainer, pictures)
    rank_record.mark_startup(trainer, "loop_ready")
    freeze_heap_at_exit()  # the process's exit after the run: about 1.5 s less of finalization
    stop = StopRequest(saved_so_far=lambda: _saved_so_far(trainer))
    stop.install()
    device = torch.device(trainer.device)
    # the objects of the set-up (torch's, nerfstudio's, the dataset's: millions) out of the collector's reach while
    # the steps run: its collections walked them all (0.17 ms per step of splat-plus on plush-dog; 0.06 frozen);
    # handed back after the loop, so that a process that trains again (tests, notebooks) collects them as before
    freezing = gc.get_freeze_count() == 0  # a process that froze objects itself keeps them frozen: left alone
    if freezing:
        gc.freeze()
    try:
        _train_steps(trainer, stop, device)
        # the run's end with the handlers still on: a signal from here on waits for the final checkpoint (nerfstudio's
        # after_train writes it, about a second after the last step: a signal then killed the run before it)
        if collectives.is_main_process():  # training.png; before after_train, where the viewer may stay open
            run_plots.write_run_plot(trainer.base_dir, writer.EVENT_WRITERS)
        trainer.save_checkpoint(trainer.step)  # after_train's own save finds it written
    finally:
        stop.uninstall()
        if freezing:
            gc.unfreeze()
    if stop.signal_name is not None:
        _finished_before_signal(trainer, stop.signal_name)
    with console.quiet_unless(collectives.is_main_process()):  # one "Training Finished" box per run
        upstream.after_train(trainer)


def _train_steps(trainer: TrainerLike, stop: StopRequest, device: torch.device) -> None:
    """The steps from the start step to the last one; a signal, a stop or a failed rank ends them early."""
    try:
        with TimeWriter(writer, EventName.TOTAL_TRAIN_TIME):
            trainer.stop_training = False
            stop.hold_while_paused(trainer, device)  # nerfstudio's --start-paused: before step 0
            for step in steps_to_run(upstream.start_step(trainer), trainer.config.max_num_iterations):
                trainer.step = step  # stop_training and the viewer's pause are agreed after a step (stop.agreed)
                log_step = step_check(step, trainer.config.logging.steps_per_log, run_at_zero=True)
                with trainer.train_lock:
                    started = time.time()
                    try:
                        loss, loss_dict, metrics_dict = run_training_step(trainer, step)
                    except PhotoReadError as err:
                        _stop_on_unreadable_photo(trainer, step, err)
                    duration = time.time() - started
                put_step_times(trainer, step, duration, log_step)
                save_due = step_check(step, trainer.config.steps_per_save)
                low_disk = outputs.low_disk_reason(trainer) if log_step or save_due else None  # a statvfs
                if low_disk is not None and stop.signal_name is None:  # stop while a checkpoint still fits
                    stop.signal_name = low_disk  # only then: a None here lost a SIGTERM handled during the statvfs
                upstream.update_viewer_state(trainer, step)
                if log_step:
                    # detached: the same values, without torch's warning about reading a tensor that requires grad
                    writer.put_scalar(name="Train Loss", scalar=loss.detach(), step=step)
                    writer.put_dict(name="Train Loss Dict", scalar_dict=detached(loss_dict), step=step)
                    writer.put_dict(name="Train Metrics Dict", scalar_dict=detached(metrics_dict), step=step)
                    if device.type == "cuda":
                        writer.put_scalar(
                            name="GPU Memory (MB)",
                            scalar=torch.cuda.max_memory_allocated(device) / (1024**2),
                            step=step,
                        )
                if trainer.pipeline.datamanager.eval_dataset and eval_due(trainer, step):
                    with trainer.train_lock:
                        trainer.eval_iteration(step)
                if save_due:
                    trainer.save_checkpoint(step)
                writer.write_out_storage()
                reason = stop.agreed(trainer, step, device)  # waits here, on every rank, while paused
                if reason == STOP_TRAINING:
                    _announce_stop(trainer, step)
                    break  # train_loop then saves the checkpoint of this step, as nerfstudio does
                if reason is not None:
                    _stop_on_signal(trainer, step, reason)
    except RuntimeError as err:
        if not (collectives.is_distributed() and roll_call.is_collective_failure(err)):
            raise
        if roll_call.peer_ended(err) or stop.signal_name is not None:
            # a rank ended (an error: it printed why) and the launcher stops the others: no second message
            roll_call.stop_after_another_rank_ended(err, trainer.step)
        # a rank stopped answering (hung, stopped, died): name it, not just this rank's timeout
        timeout = data_parallel_of(trainer.config).timeout_minutes
        roll_call.stop_for_unanswered_ranks(err, trainer.step, timeout, trainer.checkpoint_dir)


def eval_due(trainer: TrainerLike, step: int) -> bool:
    """Whether nerfstudio's ``eval_iteration`` has anything to do at ``step`` (one of its three
    intervals is due): the call, its lock and decorators are otherwise host time for nothing."""
    c = trainer.config
    return any(
        step_check(step, n) for n in (c.steps_per_eval_batch, c.steps_per_eval_image, c.steps_per_eval_all_images)
    )


def put_step_times(trainer: TrainerLike, step: int, duration: float, log_step: bool) -> None:
    """The iteration time (with the ETA) and rays per second, as nerfstudio's loop records them
    (running averages; rays per second from step 2), but written to the event writers only on
    logging steps: on the others only the averages the console and viewer read are updated
    (:func:`~ns_splat_plus.upstream.note_running_time`)."""
    if not writer.is_initialized():  # as nerfstudio's TimeWriter: nothing before setup_local_writer
        return
    record = writer.put_time if log_step else note_running_time
    record(EventName.ITER_TRAIN_TIME, duration, step, update_eta=True)
    if step > 1:  # nerfstudio skips the first two steps for the viewer's speed estimate
        rays = trainer.world_size * trainer.pipeline.datamanager.get_train_rays_per_batch() / max(0.001, duration)
        record(EventName.TRAIN_RAYS_PER_SEC, rays, step)


def _announce_stop(trainer: TrainerLike, step: int) -> None:
    """One line (global rank 0) for a stop asked by ``trainer.stop_training``: every rank ends after
    ``step``; nerfstudio's end of training follows (the checkpoint of ``step``, exit status 0)."""
    if collectives.is_main_process():
        path = trainer.checkpoint_dir / f"step-{step:09d}.ckpt"
        ranks = f" on all {collectives.get_world_size()} ranks" if collectives.is_distributed() else ""
        CONSOLE.print(
            f"splat-plus: training stopped by trainer.stop_training (the viewer, Trainer.shutdown() or a plugin) "
            f"after step {step}{ranks}; checkpoint: {path}",
            soft_wrap=True,
        )


def _newest_checkpoint(trainer: TrainerLike) -> Optional[Path]:
    """This run's newest checkpoint file on disk, None before its first save."""
    steps = checkpoint_steps(trainer.checkpoint_dir) if trainer.checkpoint_dir.is_dir() else []
    return trainer.checkpoint_dir / f"step-{steps[-1]:09d}.ckpt" if steps else None


def _saved_so_far(trainer: TrainerLike) -> str:
    """What a run that exits at once leaves: its newest checkpoint and how to resume from it, or that it has none
    (a checkpoint being written then is not one: its temporary file is removed)."""
    newest = _newest_checkpoint(trainer)
    return (
        "this run saved no checkpoint"
        if newest is None
        else f"its newest checkpoint: {newest}; {_resume_hint(trainer)}"
    )


def _finished_before_signal(trainer: TrainerLike, reason: str) -> None:
    """A signal that came after the last step: the run had finished, its final checkpoint is written; one line,
    the run ends as a finished one (exit status 0: a SLURM template does not requeue it), its viewer closed."""
    trainer.quit_on_train_completion = True
    if collectives.is_main_process() and "disk full" not in reason:  # a disk check at the last step: nothing to say
        path = trainer.checkpoint_dir / f"step-{trainer.step:09d}.ckpt"
        CONSOLE.print(
            f"splat-plus: {reason} after the last step: training had finished; final checkpoint saved: {path}",
            soft_wrap=True,
        )


def _stop_on_signal(trainer: TrainerLike, step: int, reason: str) -> None:
    trainer.save_checkpoint(step)  # nothing written where the loop saved this step a moment ago
    writer.write_out_storage()
    if collectives.is_main_process():  # training.png of the steps so far
        run_plots.write_run_plot(trainer.base_dir, writer.EVENT_WRITERS)
    path = trainer.checkpoint_dir / f"step-{step:09d}.ckpt"
    resume = _resume_hint(trainer)
    if "disk full" in reason:  # outputs.low_disk_reason
        resume = f"free disk space on that disk (or move the run to another disk), then {resume}"
    stopped = f"training stopped by {reason} after step {step}; checkpoint saved: {path}"
    roll_call.write_torchelastic_error(f"splat-plus: rank {collectives.get_rank()}: {stopped}")  # torchrun's summary
    if not collectives.is_main_process():  # one message per run: rank 0's
        raise exit_with(TrainingInterrupted.exit_status)
    raise TrainingInterrupted(stopped, resume)


def _resume_hint(trainer: TrainerLike) -> str:
    """The command that resumes this run from its checkpoints: the run's own command line with ``--load-dir``,
    quoted for a POSIX shell; with several ranks, launched as this run was: a plain ns-train on one process is
    refused (2-rank schedule)."""
    method, load_dir = trainer.config.method_name, trainer.checkpoint_dir
    command = command_line.resume_command(sys.argv, method, load_dir)
    if command is None:  # not started as `ns-train <method> ...`: the options in words
        command = f"ns-train {method} --load-dir {shlex.quote(str(load_dir))} [the same options]"
    hint = f"resume with: {command}"
    world_size = collectives.get_world_size() if collectives.is_distributed() else 1
    ranks = rank_environment(os.environ)
    if world_size > 1 and ranks is not None and ranks.launcher == "torchrun" and ranks.num_nodes == 1:  # its line
        hint = (
            f"resume with: torchrun --nproc-per-node {world_size} $(which ns-train) {command.removeprefix('ns-train ')}"
        )
    elif world_size > 1:
        hint += (
            f", launched on {world_size} ranks as this run was (the same torchrun line; the SLURM templates resume "
            "by themselves when the same sbatch is submitted again with the same RUN_NAME)"
        )
    return hint


def _stop_on_unreadable_photo(trainer: TrainerLike, step: int, err: PhotoReadError) -> None:
    """End the run at ``step``, whose photo could not be read (streaming): the checkpoint of step - 1
    (the failed step read its camera's photo before changing anything), then one message naming the
    photo (exit status 2). Nothing is saved when no step of this run finished, or on several ranks."""
    again = _resume_hint(trainer)
    if collectives.is_distributed():
        saved = f"on rank {collectives.get_rank()}: no checkpoint was written (the other ranks wait for this one)"
        newest = _newest_checkpoint(trainer)
        if newest is not None:
            saved += f"; the newest is {newest}"
        else:  # it named a folder that no save had made yet, and a --load-dir of it
            saved, again = saved + "; this run has none yet", "run the same command again"
    elif step > upstream.start_step(trainer):
        trainer.save_checkpoint(step - 1)
        writer.write_out_storage()
        saved = f"checkpoint saved: {trainer.checkpoint_dir / f'step-{step - 1:09d}.ckpt'}"
    else:
        saved, again = "no step of this run had finished, so it wrote no checkpoint", "run the same command again"
    with exit_on_user_error(rank=0):  # printed by the rank that could not read it
        raise UserInputError(
            f"training stopped at step {step}: photo {err.path} cannot be read ({err.cause}); it was deleted, "
            f"moved or damaged after training started; {saved}",
            f"restore the photo (or remove it from the dataset and start a new run), then {again}",
        )
