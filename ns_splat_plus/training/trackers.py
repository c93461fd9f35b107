"""``--vis comet`` / ``--vis wandb``: an experiment tracker that cannot start named in one message,
:func:`tracker_errors_named`.

nerfstudio starts the trackers in its trainer's set-up (``writer.setup_event_writer``). Comet without an API key
raised a ``ValueError`` traceback; Weights & Biases without one a ``UsageError`` traceback, and without a network it
retried for 90 s and raised a ``CommError`` traceback, twice. Each left the run directory behind. Here the error
becomes a :class:`~ns_splat_plus.errors.UserInputError` (exit status 2), whose start-up handling removes the unused
run directory.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ns_splat_plus import upstream
from ns_splat_plus.errors import UserInputError

TRACKERS = {
    "CometWriter": ("Comet", "set COMET_API_KEY (or log in with comet_ml)"),
    "WandbWriter": (
        "Weights & Biases",
        "run `wandb login` (or set WANDB_API_KEY); WANDB_MODE=offline logs without a network",
    ),
}
"""nerfstudio's writer class -> (the tracker's name, what makes it start)."""


@contextlib.contextmanager
def tracker_errors_named(vis: str) -> Iterator[None]:
    """Around nerfstudio's trainer set-up: an error raised while a tracker of ``vis`` (``--vis``) starts ends the
    command with one message naming the tracker, its error and what to do; every other error passes unchanged."""
    try:
        yield
    except Exception as err:
        tracker = upstream.experiment_tracker_that_raised(err.__traceback__)
        if tracker not in TRACKERS:
            raise
        name, fix = TRACKERS[tracker]
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise UserInputError(
            f"--vis {vis}: {name} could not start ({type(err).__name__}{': ' + text if text else ''})",
            f"{fix}, or train with --vis tensorboard (or viewer)",
        ) from None
