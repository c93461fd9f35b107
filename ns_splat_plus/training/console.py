"""What ns-train prints around training: the config line, the progress table in logs, the viewer address.

nerfstudio prints the whole config (about 300 lines) at start-up, and its progress table redraws
itself in place with cursor-up escapes; in a log file, a pipe or a SLURM output those redraws become
a fresh copy of the table and the viewer banner at every logging step. Here:

* the config is always saved as ``config.yml`` in the run directory and one line says where; the
  whole dump is printed only with ``--print-config`` (:func:`save_config`);
* when stdout is not a terminal, the table is printed as plain rows, one per logging step, and the
  viewer address once (:func:`plain_progress_when_piped`, :func:`print_viewer_address`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import sys
from typing import Any, Iterator, List, Optional

import yaml
from nerfstudio.utils.rich_utils import CONSOLE


def save_config(config: Any, announce: bool = True) -> None:
    """Write ``config.yml`` into the run directory (as nerfstudio does) and print one line saying where (not when
    ``announce`` is False: the file written again, after the line was printed)."""
    path = config.get_base_dir() / "config.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump(config), "utf8")
    if not announce:
        return
    hint = "" if getattr(config, "print_config", False) else " (--print-config True also prints it here)"
    CONSOLE.print(f"Config: {path}{hint}", soft_wrap=True)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (ValueError, AttributeError):  # closed or replaced stream
        return False


@contextlib.contextmanager
def plain_progress_when_piped(logging_config: Any) -> Iterator[bool]:
    """Within the block (nerfstudio's ``Trainer.setup``, which builds the local writer), a stdout that
    is not a terminal gets nerfstudio's plain progress rows (``max_log_size=0``: no redraws, so no
    banner either; see :func:`print_viewer_address`). The config is restored afterwards, so that a
    saved config.yml keeps what the user asked for. Yields whether the rows are plain."""
    configured = logging_config.local_writer
    plain = bool(configured.enable) and not stdout_is_terminal()
    if plain:  # a copy: nerfstudio's LocalWriter keeps a reference to the config object it was built from
        logging_config.local_writer = dataclasses.replace(configured, max_log_size=0)
    try:
        yield plain
    finally:
        logging_config.local_writer = configured


def print_viewer_address(banner_messages: Optional[List[str]]) -> None:
    """The viewer's address, once (the redrawing table would otherwise carry it under every update)."""
    for message in banner_messages or []:
        CONSOLE.print(message, soft_wrap=True)


def training_summary(steps: int, seconds: float, since_start: Optional[float], gaussians: int, base_dir: Any) -> str:
    """The end of training in one line: steps, wall time, Gaussians and the command that evaluates the run (its
    paths quoted for a POSIX shell where they need it, so that the command pastes as printed)."""
    process = f" ({since_start:.1f} s since the process started)" if since_start is not None else ""
    config, metrics = (shlex.quote(str(base_dir / name)) for name in ("config.yml", "metrics.json"))
    return (
        f"Trained {steps:,} steps in {seconds:.1f} s{process}: {gaussians:,} Gaussians. "
        f"Next: ns-eval --load-config {config} --output-path {metrics}"
    )


UPSTREAM_WARNINGS = ("`torch.cuda.amp.GradScaler(args...)` is deprecated",)
"""FutureWarnings of nerfstudio code that splat-plus calls (``Trainer.__init__``'s GradScaler)."""


@contextlib.contextmanager
def upstream_warnings_silenced() -> Iterator[None]:
    """Within the block (a call into nerfstudio), its known deprecation FutureWarnings are not printed."""
    import re
    import warnings

    with warnings.catch_warnings():
        for message in UPSTREAM_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message), category=FutureWarning)
        yield


@contextlib.contextmanager
def quiet_unless(speaks: bool) -> Iterator[None]:
    """nerfstudio's console prints nothing within the block unless ``speaks``: what every rank of a
    multi-rank run would print alike (``Trainer.__init__``'s "Saving checkpoints to", ``_after_train``'s
    "Training Finished" box) is printed by rank 0 alone. An error still reaches the user: it is raised,
    and printed after the block."""
    previous = CONSOLE.quiet
    CONSOLE.quiet = previous or not speaks
    try:
        yield
    finally:
        CONSOLE.quiet = previous
