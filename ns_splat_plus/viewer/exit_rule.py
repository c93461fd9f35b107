"""The viewer's options and when a run exits after its last step: :func:`resolve_quit_on_train_completion`.

nerfstudio's ``ViewerConfig.quit_on_train_completion`` is False, so a batch job with the viewer
never ends. Here it defaults to None (auto): batch jobs exit, terminal runs keep the viewer open.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Mapping, Optional, TextIO, Tuple

from nerfstudio.configs.base_config import ViewerConfig


@dataclass
class SplatPlusViewerConfig(ViewerConfig):
    """nerfstudio's viewer options; splat-plus changes the exit rule and adds the health panel."""

    quit_on_train_completion: Optional[bool] = None
    """Exit when training ends. None (auto): batch jobs exit (no TTY on stdin and stdout, SLURM_JOB_ID or CI set), runs started from a terminal keep the viewer open."""
    health_panel: bool = True
    """Show the "Training health" panel (Gaussian count, refine events, gradients, warmup, ranks)."""
    health_panel_interval_s: float = 0.5
    """Send the panel to connected browsers at most this often (seconds)."""


# --- the exit rule --------------------------------------------------------------------------------


def _is_tty(stream: Optional[TextIO]) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed or detached stream
        return False


def _truthy(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def resolve_quit_on_train_completion(
    configured: Optional[bool],
    environ: Optional[Mapping[str, str]] = None,
    stdin: Optional[TextIO] = None,
    stdout: Optional[TextIO] = None,
) -> Tuple[bool, str]:
    """Whether the process should exit after its last step, and why (for the log line).

    An explicit True/False wins. Otherwise (None, auto) a batch job exits: SLURM_JOB_ID set, CI set,
    or neither stdin nor stdout attached to a terminal (nohup, cron, a subprocess, a container
    without -t). A run started from a terminal keeps the viewer open until Ctrl+C.
    """
    if configured is not None:
        return bool(configured), "--viewer.quit-on-train-completion " + str(bool(configured))
    environ = os.environ if environ is None else environ
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if environ.get("SLURM_JOB_ID"):
        return True, f"SLURM job {environ['SLURM_JOB_ID']}"
    if _truthy(environ.get("CI")):
        return True, "CI is set"
    if not _is_tty(stdin) and not _is_tty(stdout):
        return True, "stdin and stdout are not terminals"
    return False, "interactive terminal"

