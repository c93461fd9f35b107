"""The error types for stops a user can act on: :class:`SplatPlusError` and its kinds.

Every error a user can cause (bad data, a bad checkpoint, more GPUs than exist, gradients that
cannot train) is a ``SplatPlusError`` whose message says what is wrong and what to do. It is a
``SystemExit`` on purpose: ns-train, ns-eval and ns-viewer have no error handler of their own,
and a ``SystemExit`` carrying a message prints that one message and exits non-zero, without a
traceback. Its kinds: :class:`UserInputError` (the command line or the dataset) and
:class:`TrainingHealthError` (gradients that cannot train). :func:`exit_on_user_error` is the one
handler for the places where splat-plus wants its own formatting (a red console line) and exit status.
With several ranks, who prints it is decided among the ranks (:func:`set_announcer`, which ``parallel/``
calls once the ranks are known): the first rank that found an error prints it, naming itself; the others
exit silently with their status.

Lives at the top of the package (not in ``training/`` or ``strategy/``) because every layer raises
these and the module imports nothing of the package: the lowest layer (docs/development.md, "Layers").
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional


class SplatPlusError(SystemExit):
    """A stop the user can act on; ``str(err)`` is the whole message."""

    exit_status = 1
    same_on_every_rank = False
    """True for an error that every rank raises with the same message (ranks that disagree): shown without
    naming the rank that printed it."""

    def __init__(self, message: str, what_to_do: Optional[str] = None) -> None:
        text = message if what_to_do is None else f"{message}\n  What to do: {what_to_do}"
        super().__init__(text)

    @property
    def message(self) -> str:
        return str(self.code)

    def __str__(self) -> str:
        return str(self.code)


class UserInputError(SplatPlusError):
    """Something in the command line or the dataset that the user can fix (exit status 2)."""

    exit_status = 2


class TrainingHealthError(SplatPlusError):
    """Training cannot lead anywhere useful (zero or non-finite gradients); the message says why.

    Raised by the strategy's gradient monitor, the optimizer's finiteness gate and warmup."""

    @classmethod
    def shown(cls, message: str, rank: int) -> "TrainingHealthError":
        """The error, after printing its message in red on rank 0's console (the run's log)."""
        if rank == 0:
            from nerfstudio.utils.rich_utils import CONSOLE

            CONSOLE.print(f"[red]{message}[/red]")
        return cls(message)


Announcer = Callable[[SplatPlusError], Optional[str]]
"""With several ranks: the text this rank prints for an error (naming the rank), or None (another rank has)."""

_announcer: Optional[Announcer] = None


def set_announcer(announcer: Optional[Announcer]) -> None:
    """Decide with ``announcer`` who prints an error and how (``parallel/`` sets it once the ranks are known)."""
    global _announcer
    _announcer = announcer


def show(err: SplatPlusError, rank: int = 0) -> None:
    """Print ``err`` as one red message on stderr: once per run with several ranks (the announcer decides,
    whichever rank found it); without one, in a process of rank 0."""
    if _announcer is not None:
        text = _announcer(err)
    else:
        text = err.message if rank == 0 else None
    if text is None:
        return
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[bold red]splat-plus: {escape(text)}[/bold red]")


_exit_status: Optional[int] = None


def exit_with(status: int) -> SystemExit:
    """``SystemExit(status)`` for a stop whose message has been shown, recorded as the process's exit
    status (:func:`recorded_exit_status`): ``raise errors.exit_with(2)``."""
    global _exit_status
    _exit_status = status
    return SystemExit(status)


def recorded_exit_status() -> Optional[int]:
    """The status of the stop this process is exiting with (:func:`exit_with`); None when there is none."""
    return _exit_status


@contextlib.contextmanager
def exit_on_user_error(rank: int = 0) -> Iterator[None]:
    """Print a SplatPlusError as one red message on stderr (:func:`show`) and exit with its status."""
    try:
        yield
    except SplatPlusError as err:
        show(err, rank)
        raise exit_with(err.exit_status) from None
