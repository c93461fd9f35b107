"""Stopping and pausing a run at a step boundary, at the same step on every rank: :class:`StopRequest`.

Three things ask a run to stop or wait:

* SIGINT (Ctrl-C) and SIGTERM (what schedulers send before killing a job), on any rank: torchrun and
  srun forward them to every worker, a ``kill`` may reach one rank only. A signal the run was started
  with ignored (SIGINT in a shell's background job) stays ignored;
* ``trainer.stop_training`` set on global rank 0 (nerfstudio's ``Trainer.shutdown()``, a plugin, a
  thread of the viewer): training ends after the agreed step with a checkpoint, exit status 0;
* the viewer's Pause button (``trainer.training_state == "paused"``), on global rank 0 only, where the
  viewer runs.

A rank that acted alone would leave the others in a collective it never joins: rank 0 stopping calls
the checkpoint's gather while the others wait in the next gradient all-reduce, and both wait for
``--data-parallel.timeout-minutes``. So the decision is agreed: every :data:`STOP_CHECK_EVERY` steps
(every step in one process) one all-reduce of three flags (a signal on this rank, rank 0's stop,
rank 0's pause) gives every rank the same answer, :meth:`StopRequest.agreed`. A pause is shared too:
every rank waits in :meth:`~StopRequest.agreed`, repeating that small all-reduce every
:data:`PAUSE_POLL_S` seconds, so no collective waits long (a pause of hours never reaches the
collective timeout), and a Resume, a stop or a signal during the pause reaches every rank at once.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Callable, Optional

import torch

from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.upstream import TrainerLike

STOP_CHECK_EVERY = 25
"""On several ranks, a stop or pause is agreed on every this many steps (one small all-reduce)."""

PAUSE_POLL_S = 0.1
"""While paused, how often every rank asks rank 0 whether to go on (one small all-reduce each time)."""

STOP_TRAINING = "trainer.stop_training"
"""The reason :meth:`StopRequest.agreed` gives for a stop asked by ``trainer.stop_training`` on rank 0."""


class TrainingInterrupted(SplatPlusError):
    """SIGINT / SIGTERM: the run saved a checkpoint and stops (exit status 1, one line)."""


class StopRequest:
    """SIGINT / SIGTERM handlers that ask the loop to stop at the next step boundary, and the agreement
    of every rank on a stop or a pause (:meth:`agreed`)."""

    def __init__(self, saved_so_far: Optional[Callable[[], str]] = None) -> None:
        """``saved_so_far``: what a second Ctrl-C leaves on disk, in words (the newest checkpoint and how to
        resume from it): the first Ctrl-C's checkpoint may be written by then."""
        self.signal_name: Optional[str] = None
        self.saved_so_far = saved_so_far
        self._previous: dict = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set in the main thread (tests may train elsewhere)
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is signal.SIG_IGN:
                # ignored by whoever started the run: a shell ignores SIGINT in a job it starts in the
                # background, so that Ctrl-C in the terminal reaches only the foreground. Python keeps such
                # an ignore at start-up (no KeyboardInterrupt); the training loop keeps it too.
                continue
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is not None and signum == signal.SIGINT:
            if not collectives.is_main_process():  # one message per run: rank 0's
                raise SystemExit(1)
            saved = self.saved_so_far() if self.saved_so_far is not None else "no checkpoint saved for this stop"
            raise SystemExit(f"splat-plus: {name} again: exiting at once; {saved}")
        self.signal_name = name
        # said at once: an evaluation of all images can hold the step boundary for minutes; on several
        # ranks by rank 0 only (torchrun and srun signal every rank)
        if collectives.is_main_process():
            # only a second Ctrl-C exits at once (a scheduler's repeated SIGTERM must not lose the checkpoint)
            again = "; press Ctrl-C again to exit at once without saving" if signum == signal.SIGINT else ""
            sys.stderr.write(
                f"\nsplat-plus: {name} received: training stops after the current step (or evaluation) "
                f"and saves a checkpoint{again}\n"
            )
            sys.stderr.flush()

    def agreed(self, trainer: TrainerLike, step: int, device: torch.device) -> Optional[str]:
        """Why every rank stops after ``step``, the same on every rank: the signal's name, or
        :data:`STOP_TRAINING`; None: go on. While rank 0 is paused, every rank waits here.

        Args:
            trainer: the SplatPlusTrainer (``stop_training`` and ``training_state`` are read on rank 0).
            step: the step that just finished.
            device: where this rank's collectives run (its GPU under NCCL, the CPU under gloo).
        """
        if collectives.is_distributed() and step % STOP_CHECK_EVERY != 0:
            return None
        return self._agree(trainer, device)

    def hold_while_paused(self, trainer: TrainerLike, device: torch.device) -> None:
        """Before the first step (``--start-paused``, a Pause during warmup): every rank waits while rank 0
        is paused. A stop or signal asked meanwhile is acted on after the first step (:meth:`agreed`)."""
        self._agree(trainer, device)

    def _agree(self, trainer: TrainerLike, device: torch.device) -> Optional[str]:
        while True:
            signalled, stopped, paused = self._flags(trainer, device)
            if signalled:
                return self.signal_name or "a signal on another rank"
            if stopped:
                return STOP_TRAINING
            if not paused:
                return None
            time.sleep(PAUSE_POLL_S)

    def _flags(self, trainer: TrainerLike, device: torch.device) -> tuple:
        """(a signal on any rank, rank 0's stop_training, rank 0 paused): one all-reduce on several ranks."""
        main = collectives.is_main_process()
        flags = (
            self.signal_name is not None,
            main and bool(getattr(trainer, "stop_training", False)),
            main and getattr(trainer, "training_state", "training") == "paused",
        )
        if not collectives.is_distributed():
            return flags
        reduced = torch.tensor([float(f) for f in flags], device=device)
        collectives.all_reduce(reduced, "MAX")
        return tuple(bool(v > 0) for v in reduced.tolist())  # one host sync for the three
