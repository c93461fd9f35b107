"""One message, not a traceback, for what nerfstudio's entry points raise outside splat-plus's code.

ns-train, ns-eval, ns-export and ns-viewer are nerfstudio's scripts: they read ``--load-config``
with ``yaml.load``, write ``config.yml``, the metrics JSON or the exported files with plain
``open``/``mkdir``, and let ``KeyboardInterrupt`` out of imports and set-up. Each of these ended in a
Python traceback. They import our method entry points (``ns_splat_plus.method``) before they parse
the command line, so :func:`install` (called there) puts :func:`handle` in ``sys.excepthook``:

* a full disk (ENOSPC) anywhere: "disk full", naming the file;
* a file that cannot be written (read-only file system, permission denied): naming the path;
* ``--load-config`` that is missing, not YAML, truncated, or not a trainer config: naming the file;
* Ctrl-C (SIGINT) outside the training loop (which saves a checkpoint itself): one line, and the
  run directory of this process removed if training never wrote into it.

Every other exception keeps Python's traceback: it is a bug to report, not a user's mistake.
Only uncaught exceptions reach the hook, so nothing changes for code that handles its own errors.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, List, Optional, Tuple

INTERRUPTED_STATUS = 130
"""What a shell reports for a process ended by SIGINT."""

_NERFSTUDIO_ENTRY_DIRS = ("nerfstudio/scripts/", "nerfstudio/utils/eval_utils.py")

_cleanups: List[Callable[[], None]] = []


def add_cleanup(cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` (e.g. remove an unused run directory) before the hook's message ends the process."""
    _cleanups.append(cleanup)


def load_config_argument(argv: List[str]) -> Optional[str]:
    """The value of ``--load-config`` (or ``--load_config``) on the command line, if any."""
    for i, arg in enumerate(argv):
        for name in ("--load-config", "--load_config"):
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _in_nerfstudio_entry(tb) -> bool:
    return any(
        d in frame.filename.replace("\\", "/") for frame in traceback.extract_tb(tb) for d in _NERFSTUDIO_ENTRY_DIRS
    )


def describe(exc: BaseException, argv: List[str]) -> Optional[Tuple[str, int]]:
    """(one message, exit status) for an exception a user can act on; None for anything else (a bug)."""
    prog = Path(argv[0]).name if argv else "splat-plus"
    if isinstance(exc, KeyboardInterrupt):
        return f"{prog}: stopped by Ctrl-C (SIGINT) before training or any output was saved", INTERRUPTED_STATUS
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f" {exc.filename}" if exc.filename else ""
        return (
            f"disk full: cannot write{where} (No space left on device)\n"
            "  What to do: free disk space, or write to another disk (--output-dir / --output-path)",
            1,
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and exc.filename:
        return (
            f"cannot write {exc.filename}: {exc.strerror}\n"
            "  What to do: pass a path on a disk this user can write (--output-dir / --output-path)",
            2,
        )
    config = load_config_argument(argv)
    if config is None or not _in_nerfstudio_entry(exc.__traceback__):
        return None
    what_to_do = "\n  What to do: pass --load-config <output-dir>/<experiment>/<method>/<timestamp>/config.yml of a run"
    if isinstance(exc, FileNotFoundError) and exc.filename is not None and Path(exc.filename) == Path(config):
        return f"--load-config {config} does not exist{what_to_do}", 2
    if isinstance(exc, IsADirectoryError):
        return f"--load-config {config} is a directory, not a config.yml{what_to_do}", 2
    import yaml

    if isinstance(exc, (yaml.YAMLError, UnicodeDecodeError)):
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"--load-config {config} cannot be read as a config.yml (truncated or edited? {problem}){what_to_do}", 2
    if isinstance(exc, (AssertionError, AttributeError, TypeError)):
        problem = f"{type(exc).__name__}: {exc}" if str(exc) else "it holds no trainer configuration"
        return f"--load-config {config} is not the config.yml of a training run ({problem}){what_to_do}", 2
    return None


def handle(exc_type, exc, tb) -> None:
    """``sys.excepthook``: one red message and exit for what :func:`describe` knows, else Python's traceback."""
    described = describe(exc, sys.argv) if exc is not None else None
    if described is None:
        _previous(exc_type, exc, tb)
        return
    message, status = described
    for cleanup in _cleanups:
        try:
            cleanup()
        except Exception:  # noqa: BLE001 (a cleanup must never hide the message)
            pass
    try:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, soft_wrap=True).print(f"[bold red]splat-plus: {escape(message)}[/bold red]")
    except Exception:  # noqa: BLE001 (rich missing or broken: plain text)
        print(f"splat-plus: {message}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # an excepthook cannot choose the exit status (Python exits 1 after it): end here, as the message said
    os._exit(status)


_previous = sys.__excepthook__


def install() -> None:
    """Make :func:`handle` the process's excepthook (once; the one it replaces handles everything else)."""
    global _previous
    if sys.excepthook is not handle:
        _previous = sys.excepthook
        sys.excepthook = handle
