"""Which rank did not answer: a roll call after a collective fails (:func:`stop_for_unanswered_ranks`).

A rank that hangs (stopped with SIGSTOP, swapping, stuck in a driver call) or vanishes without exiting
makes every other rank's next collective fail after ``--data-parallel.timeout-minutes``. Each of them
then saw only "Timed out waiting ... for recv operation", and torchrun's summary named rank 0, the first
rank that failed, as the root cause: nothing named the rank that had stopped answering.

Here, each rank writes its pid and host into the process group's key-value store when it starts
(:func:`register_rank`, one key). When a collective fails, every rank that is still running writes
"answered" into the store and waits a few seconds for the others (:func:`roll_call`): the ranks that do
not answer are the hung (or dead) ones. The lowest rank that answered prints one message naming them,
and every answering rank puts it into torchrun's error file (``TORCHELASTIC_ERROR_FILE``), so that
torchrun's summary shows it instead of "To enable traceback see ...". Nothing runs during normal
training: the roll call costs nothing until a collective has failed.

No checkpoint is written: the failed collective may have been a step's gradient average (parameters of
step N - 1, strategy statistics of step N), and the other ranks' RNG states cannot be gathered; the
message points to the last periodic checkpoint.

A user error on one rank (a damaged photo in its shard): that rank prints it, naming itself, whichever
rank it is, and only the first rank to find one prints (:func:`announce_once`, the announcer of
:mod:`ns_splat_plus.errors`, claimed through the store); the ranks that then lose it in a collective
during start-up end without a word (:func:`quiet_when_another_rank_ends`), as they do in the loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

import torch.distributed as dist

from ns_splat_plus import errors, upstream
from ns_splat_plus.parallel import collectives

KEY_PREFIX = "splat-plus/"
ROLL_CALL_MAX_S = 10.0
"""The longest a rank waits for the others to answer (half the collective timeout when that is shorter)."""


def _store():
    return upstream.default_store() if collectives.is_initialized() else None


def register_rank() -> None:
    """Write this rank's pid and host into the store (once per process, when its trainer is built)."""
    store = _store()
    if store is None or not collectives.is_distributed():
        return
    try:
        store.set(f"{KEY_PREFIX}rank/{collectives.get_rank()}", f"pid {os.getpid()} on {socket.gethostname()}")
    except Exception:  # noqa: BLE001 (a store that refuses only costs the pid in a later message)
        pass


_BACKEND_ERROR = re.compile(
    r"gloo|NCCL|ProcessGroup|Connection (closed|reset) by peer|Timed out waiting|timeout caused pair closure"
)
"""What gloo's and NCCL's errors say: ``work.wait()`` of an asynchronous all-reduce (the gradients')
raises a plain RuntimeError from C++, with no frame of torch/distributed/ in its traceback. When one of
gloo's operations times out ("Timed out waiting ... for recv"), gloo closes every pair of its context and
the rank's other pending operations fail with a bare "Application timeout caused pair closure": which of
the two a rank sees depends on which of its operations timed out first (gloo's tcp/unbound_buffer.cc)."""

_PEER_ENDED = re.compile(r"Connection (closed|reset) by peer|remote process exited")
"""gloo / NCCL: the other end of a collective is gone (its process ended), which is not a hang."""


def is_collective_failure(err: BaseException) -> bool:
    """Whether ``err`` came out of a torch.distributed collective (a timeout, a peer that closed)."""
    if isinstance(err, getattr(dist, "DistError", ())):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    if any("torch/distributed/" in frame.filename.replace("\\", "/") for frame in frames[-3:]):
        return True
    return bool(_BACKEND_ERROR.search(str(err)))


def peer_ended(err: BaseException) -> bool:
    """Whether a collective failed because another rank's process ended (not a timeout)."""
    return bool(_PEER_ENDED.search(str(err)))


def roll_call(wait_s: float) -> Tuple[List[int], List[int], Dict[int, str]]:
    """(answered, unanswered, who) after at most ``wait_s`` seconds: every rank still running answers;
    ``who`` maps a rank to "pid P on HOST" where it registered. Unanswered: every other rank when the
    store itself does not answer (it lives in rank 0's process under ns-train's own spawn)."""
    rank, world = collectives.get_rank(), collectives.get_world_size()
    store = _store()
    everyone = list(range(world))
    if store is None:
        return [rank], [r for r in everyone if r != rank], {}
    try:
        store.set(f"{KEY_PREFIX}answered/{rank}", "1")
        deadline = time.monotonic() + wait_s
        answered = {rank}
        while True:
            answered |= {r for r in everyone if r not in answered and store.check([f"{KEY_PREFIX}answered/{r}"])}
            if len(answered) == world or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        who = {}
        for r in everyone:
            if store.check([f"{KEY_PREFIX}rank/{r}"]):
                who[r] = store.get(f"{KEY_PREFIX}rank/{r}").decode()
    except Exception:  # noqa: BLE001 (the store is gone too)
        return [rank], [r for r in everyone if r != rank], {}
    return sorted(answered), [r for r in everyone if r not in answered], who


def describe(
    unanswered: List[int], who: Dict[int, str], timeout_minutes: float, step: int, err: BaseException, checkpoint_dir
) -> str:
    """The one message: the ranks that did not answer, for how long, and what to do."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", first)  # gloo's "[.../unbound_buffer.cc:78] " source location
    if unanswered:
        names = ", ".join(f"rank {r}" + (f" ({who[r]})" if r in who else "") for r in unanswered)
        head = (
            f"{names} {'does' if len(unanswered) == 1 else 'do'} not answer: a collective at step {step} waited "
            f"--data-parallel.timeout-minutes {timeout_minutes:g} ({timeout_minutes * 60:.0f} s) for it; "
            "it hung, was stopped (SIGSTOP) or died"
        )
    else:
        head = f"a collective at step {step} failed on every rank while all of them still answer ({first})"
    saved = sorted(Path(checkpoint_dir).glob("step-*.ckpt")) if Path(checkpoint_dir).is_dir() else []
    last = f"the last checkpoint is {saved[-1]}" if saved else "this run has no checkpoint yet"
    return (
        f"{head}. Training stopped on every other rank (their error: {first}). No checkpoint was written now; "
        f"{last}\n  What to do: look at that rank's process, log and machine (stopped with SIGSTOP / Ctrl-Z, "
        "out of memory, a stuck GPU, a lost node), then resume with --load-dir on the same number of ranks "
        "(or train again)"
    )


def write_torchelastic_error(message: str, consequence: bool = False) -> None:
    """torchrun's summary shows the error file of the first failed rank as its "traceback" (the smallest
    timestamp, in whole seconds). ``consequence``: this rank stops because another one ended, whose error
    file was written earlier: one second later, so that a tie never makes this rank the "Root Cause"."""
    path: Optional[str] = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    try:
        with open(path, "w") as f:
            json.dump({"message": message, "timestamp": int(time.time()) + int(consequence)}, f)
    except OSError:
        pass


def stop_after_another_rank_ended(err: BaseException, step: Union[int, str]) -> None:
    """A collective failed because another rank ended (its own message says why; the launcher names
    it and is stopping this rank): exit status 1, no second message on the console, only a line in
    torchrun's error file so that its summary does not ask for a traceback of this rank. ``step``:
    the step, or when it happened ("during start-up")."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # gloo adds advice, and "GLHF!"
    when = f"at step {step}" if isinstance(step, int) else step
    write_torchelastic_error(
        f"splat-plus: rank {collectives.get_rank()} stopped {when} because another rank ended ({first})",
        consequence=True,
    )
    sys.stderr.flush()
    raise errors.exit_with(1)


@contextlib.contextmanager
def quiet_when_another_rank_ends(when: str) -> Iterator[None]:
    """Around start-up's collectives (set-up, warmup): a collective that fails because another rank's
    process ended (a user error it printed, a bug's traceback) ends this rank with exit status 1 and no
    message (:func:`stop_after_another_rank_ended`), instead of gloo's "Connection closed by peer"
    traceback. Anything else passes through."""
    try:
        yield
    except RuntimeError as err:
        if collectives.is_distributed() and is_collective_failure(err) and peer_ended(err):
            stop_after_another_rank_ended(err, when)
        raise


def _first_to_speak() -> bool:
    """Whether this rank is the first of the run to report an error (one atomic counter in the store)."""
    store = _store()
    if store is None:
        return True
    try:
        return int(store.add(f"{KEY_PREFIX}errors-shown", 1)) == 1
    except Exception:  # noqa: BLE001 (the store is gone, e.g. with rank 0's process: better twice than never)
        return True


def announce_once(err: errors.SplatPlusError) -> Optional[str]:
    """The announcer of :mod:`ns_splat_plus.errors` with several ranks: ``rank R: <message>`` (the message
    alone for an error every rank raises alike) on the first rank that reports an error, None on the
    others; every rank puts it into torchrun's error file, so that its summary names the error."""
    if not collectives.is_distributed():
        return err.message
    text = err.message if err.same_on_every_rank else f"rank {collectives.get_rank()}: {err.message}"
    write_torchelastic_error(f"splat-plus: {text}")
    return text if _first_to_speak() else None


def install_announcer() -> None:
    """From now on, user errors are printed once per run, by the rank that found one (:func:`announce_once`)."""
    errors.set_announcer(announce_once)


def stop_for_unanswered_ranks(err: BaseException, step: int, timeout_minutes: float, checkpoint_dir) -> None:
    """After a failed collective: the roll call, one message (lowest answering rank), exit status 1."""
    wait_s = min(ROLL_CALL_MAX_S, max(1.0, timeout_minutes * 60 / 2))
    answered, unanswered, who = roll_call(wait_s)
    message = describe(unanswered, who, timeout_minutes, step, err, checkpoint_dir)
    write_torchelastic_error(f"splat-plus: {message}")
    if collectives.get_rank() == min(answered):
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, soft_wrap=True).print(f"[bold red]splat-plus: {escape(message)}[/bold red]")
    sys.stderr.flush()
    raise errors.exit_with(1)
