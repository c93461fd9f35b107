"""One message, not a traceback, for what nerfstudio's entry points raise outside splat-plus's code.

ns-train, ns-eval, ns-export and ns-viewer are nerfstudio's scripts: they read ``--load-config``
with ``yaml.load``, write ``config.yml``, the metrics JSON or the exported files with plain
``open``/``mkdir``, and let ``KeyboardInterrupt`` out of imports and set-up. Each of these ended in a
Python traceback. They import our method entry points (``ns_splat_plus.method``) before they parse
the command line; :func:`install` puts :func:`handle` in ``sys.excepthook`` there only where the command
line runs splat-plus (``upstream.splat_plus_command``: ``ns-train nerfacto`` imports that module too, and keeps
Python's own hook), and again where a splat-plus run is set up (the trainer config's ``set_timestamp``):

* a full disk (ENOSPC) anywhere: "disk full", naming the file;
* a file that cannot be written (read-only file system, permission denied): naming the path, and the
  output option (``--output-dir``, ``--output-path``) it belongs to;
* ``--load-config`` that is missing, not YAML, truncated, not a trainer config, or of a method that is
  not installed: naming the file;
* Ctrl-C (SIGINT) outside the training loop (which saves a checkpoint itself): one line, and the
  run directory of this process removed if training never wrote into it; for ns-viewer, whose only way
  to quit it is, "Viewer closed (Ctrl-C)" and exit status 0. From the trainer's
  construction to its first step, nerfstudio's launch catches ``KeyboardInterrupt`` itself (a traceback
  and exit status 0): :func:`interrupted_before_training` turns it into the same line, exit status 130,
  and :func:`signals_stop_until_trainer` does so between the saved ``config.yml`` and the trainer.
  Before nerfstudio has imported splat-plus (the first seconds of ``ns-train``: torch, rich), no code
  of splat-plus runs yet: Python's own traceback remains there.

Every other exception keeps Python's traceback: it is a bug to report, not a user's mistake. Under
torchrun, either is also written to the worker's error file, so that torchrun's summary names it.
Only uncaught exceptions reach the hook, so nothing changes for code that handles its own errors.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Tuple

from ns_splat_plus.errors import SplatPlusError, exit_on_user_error
from ns_splat_plus.training import outputs
from ns_splat_plus.upstream.command_line import option_value, raised_while_loading_the_config

INTERRUPTED_STATUS = 130
"""What a shell reports for a process ended by SIGINT."""


class StartupInterrupted(SplatPlusError):
    """Ctrl-C (SIGINT) during the trainer's set-up or before its first step, which nerfstudio's launch
    catches itself (printing a traceback and exiting 0): one line, exit status 130, no run directory left."""

    exit_status = INTERRUPTED_STATUS

    @classmethod
    def before_training(cls, run_dir: Path, when: str, by: str = "Ctrl-C (SIGINT)") -> "StartupInterrupted":
        """The error for a stop ``when`` ("during set-up"...) by ``by`` (the signal), after removing ``run_dir``
        if no step wrote in it."""
        from ns_splat_plus.parallel import collectives
        from ns_splat_plus.training import run_dir as run_dirs

        if collectives.is_main_process():  # the ranks share rank 0's run directory
            run_dirs.discard_if_unused(run_dir, also=run_dirs.SETUP_FILES)
        kept = f"; {run_dir} is kept (it holds other files)" if Path(run_dir).exists() else ""
        return cls(f"ns-train: stopped by {by} {when}, before the first training step: nothing to save{kept}")


TERMINATED_STATUS = 128 + signal.SIGTERM
"""What a shell reports for a process ended by SIGTERM."""


class _Terminated(BaseException):
    """SIGTERM inside :func:`interrupted_before_training` (Python's default action ends the process silently)."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM within the block raises :class:`_Terminated` (main thread only; an inherited ignore is kept)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) in (
        signal.SIG_IGN,
        None,
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:  # not the until-trainer handler, which this block replaced for good
        signal.signal(signal.SIGTERM, signal.SIG_DFL if _until_trainer(previous) else previous)


def _stop_on_ctrl_c(run_dir: Path, when: str, rank: int) -> NoReturn:
    """Ctrl-C before the first step: the run directory removed if unused, one line (rank 0), exit status 130."""
    with exit_on_user_error(rank):
        raise StartupInterrupted.before_training(run_dir, when) from None


@contextlib.contextmanager
def interrupted_before_training(run_dir: Path, when: str, rank: int = 0) -> Iterator[None]:
    """Ctrl-C or SIGTERM within the block (the trainer's construction, warmup): one line (rank 0), exit
    status 130 (SIGINT) or 143 (SIGTERM), the run directory removed if no step wrote into it
    (:class:`StartupInterrupted`): nothing trained yet, so there is nothing to save."""
    try:
        with _sigterm_raises():
            yield
    except KeyboardInterrupt:
        _stop_on_ctrl_c(run_dir, when, rank)
    except _Terminated:
        _stop_on_sigterm(run_dir, when, rank)


def _stop_on_sigterm(run_dir: Path, when: str, rank: int) -> NoReturn:
    """SIGTERM before the first step: as Ctrl-C (:func:`_stop_on_ctrl_c`), with exit status 143."""
    with exit_on_user_error(rank):
        err = StartupInterrupted.before_training(run_dir, when, by="SIGTERM")
        err.exit_status = TERMINATED_STATUS
        raise err from None


def signals_stop_until_trainer(run_dir: Path, rank: int = 0) -> None:
    """From the saved ``config.yml`` to the trainer's construction (nerfstudio's ``launch`` and
    ``train_loop``, whose ``except KeyboardInterrupt`` prints a traceback and exits 0), Ctrl-C and SIGTERM
    stop the run as they do during set-up: one line, status 130 or 143, the run directory removed (SIGTERM's
    default action ended the process silently and left the directory with its config.yml). Ended by
    :func:`signals_raise_again`. Only for Python's own handlers in the main thread: an inherited ignore
    (a shell's background job) and another program's handler are left as they are."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:

        def stop(signum, frame) -> None:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: Python's own
            _stop_on_ctrl_c(run_dir, "while starting", rank)

        stop.until_trainer = True  # type: ignore[attr-defined]
        signal.signal(signal.SIGINT, stop)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:

        def terminate(signum, frame) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _stop_on_sigterm(run_dir, "while starting", rank)

        terminate.until_trainer = True  # type: ignore[attr-defined]
        signal.signal(signal.SIGTERM, terminate)


def _until_trainer(handler: Any) -> bool:
    """Whether ``handler`` is one :func:`signals_stop_until_trainer` installed."""
    return bool(getattr(handler, "until_trainer", False))


def signals_raise_again() -> None:
    """Ctrl-C is Python's ``KeyboardInterrupt`` again (the trainer's construction catches it itself), and
    SIGTERM's handler the default one (or the block's that handles it there, :func:`_sigterm_raises`)."""
    if _until_trainer(signal.getsignal(signal.SIGINT)):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if _until_trainer(signal.getsignal(signal.SIGTERM)):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


_cleanups: List[Callable[[], None]] = []


def add_cleanup(cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` (e.g. remove an unused run directory) before the hook's message ends the process."""
    _cleanups.append(cleanup)


def load_config_argument(argv: List[str]) -> Optional[str]:
    """The value of ``--load-config`` (or ``--load_config``) on the command line, if any."""
    return option_value(argv, "--load-config")


OUTPUT_OPTIONS = ("--output-dir", "--output-path", "--render-output-path")
"""Options of ns-train, ns-eval and ns-export that name where they write."""


def output_option_of(filename: str, argv: List[str]) -> Optional[Tuple[str, str]]:
    """(option, value) of the output option on the command line that ``filename`` is, is inside, or is
    a folder on the way to (``mkdir(parents=True)`` fails at the first folder it cannot make)."""
    for option in OUTPUT_OPTIONS:
        value = option_value(argv, option)
        if value is None:
            continue
        file, output = Path(filename).absolute(), Path(value).absolute()
        if file == output or output in file.parents or file in output.parents:
            return option, value
    return None


def describe(exc: BaseException, argv: List[str]) -> Optional[Tuple[str, int]]:
    """(one message, exit status) for an exception a user can act on; None for anything else (a bug)."""
    prog = Path(argv[0]).name if argv else "splat-plus"
    if isinstance(exc, KeyboardInterrupt):
        if prog == "ns-viewer":  # its one way to quit: it writes nothing, so nothing was lost
            return "Viewer closed (Ctrl-C)", 0
        trains = prog not in ("ns-eval", "ns-export")  # they write their output, and train nothing
        before = "training or any output was saved" if trains else "any output was saved"
        return f"{prog}: stopped by Ctrl-C (SIGINT) before {before}", INTERRUPTED_STATUS
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f" {exc.filename}" if exc.filename else ""
        return (
            f"disk full: cannot write{where} (No space left on device)\n"
            "  What to do: free disk space, or write to another disk (--output-dir / --output-path)",
            1,
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and exc.filename:
        output = output_option_of(str(exc.filename), argv)
        if output is not None:  # e.g. ns-export's mkdir of --output-dir, before anything else runs
            option, value = output
            return (
                f"{option} {value} cannot be written: {exc.strerror} ({exc.filename})\n"
                f"  What to do: pass an {option} on a disk this user can write",
                2,
            )
        return (
            f"cannot write {exc.filename}: {exc.strerror}\n"
            "  What to do: pass a path on a disk this user can write (--output-dir / --output-path)",
            2,
        )
    config = load_config_argument(argv)
    if config is None or not raised_while_loading_the_config(exc.__traceback__):
        return None
    what_to_do = "\n  What to do: pass --load-config <output-dir>/<experiment>/<method>/<timestamp>/config.yml of a run"
    if isinstance(exc, FileNotFoundError) and exc.filename is not None and Path(exc.filename) == Path(config):
        return f"--load-config {config} does not exist{what_to_do}", 2
    if isinstance(exc, IsADirectoryError):
        return f"--load-config {config} is a directory, not a config.yml{what_to_do}", 2
    import yaml

    problem = getattr(exc, "problem", None) or ""
    if isinstance(exc, yaml.constructor.ConstructorError) and problem.startswith("cannot find module"):
        # a class of a package this environment lacks (another plugin's): say which
        return (
            f"--load-config {config} names a Python class that cannot be imported here: {problem}. The run was "
            "trained with a package that is not installed in this environment\n"
            "  What to do: install that package (the version the run was trained with), or run where it is installed",
            2,
        )
    if isinstance(exc, (yaml.YAMLError, UnicodeDecodeError)):
        # yaml's problem ("cannot find 'x' in the module 'y'") says more than its first line ("while constructing ...")
        problem = problem or (str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return f"--load-config {config} cannot be read as a config.yml (truncated or edited? {problem}){what_to_do}", 2
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        # eval_setup looks the saved method_name up among the installed methods
        return (
            f"--load-config {config} is the config.yml of a run of the method {exc.args[0]!r}, which is not "
            f"installed here{what_to_do} (or install the plugin that provides {exc.args[0]!r})",
            2,
        )
    if isinstance(exc, (AssertionError, AttributeError, TypeError)):
        problem = f"{type(exc).__name__}: {exc}" if str(exc) else "it holds no trainer configuration"
        return f"--load-config {config} is not the config.yml of a training run ({problem}){what_to_do}", 2
    return None


def handle(exc_type, exc, tb) -> None:
    """``sys.excepthook``: one red message and exit for what :func:`describe` knows, else Python's traceback."""
    described = describe(exc, sys.argv) if exc is not None else None
    if described is None:
        _previous(exc_type, exc, tb)
        _name_in_torchrun_summary(f"{exc_type.__name__}: {exc} (the traceback above)")
        return
    message, status = described
    _name_in_torchrun_summary(message)
    for cleanup in _cleanups:
        try:
            cleanup()
        except Exception:  # noqa: BLE001 (a cleanup must never hide the message)
            pass
    try:
        from rich.console import Console
        from rich.markup import escape

        text = escape(message) if status == 0 else f"[bold red]splat-plus: {escape(message)}[/bold red]"
        Console(stderr=status != 0, soft_wrap=True).print(text)  # status 0: an ordinary end, not an error
    except Exception:  # noqa: BLE001 (rich missing or broken: plain text)
        print(message if status == 0 else f"splat-plus: {message}", file=sys.stdout if status == 0 else sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # an excepthook cannot choose the exit status (Python exits 1 after it): end here, as the message said
    os._exit(status)


_previous = sys.__excepthook__


def _name_in_torchrun_summary(message: str) -> None:
    """The error of a torchrun worker, as its summary's "Root Cause" (not "To enable traceback see ...")."""
    from ns_splat_plus.parallel import roll_call

    roll_call.write_torchelastic_error(f"splat-plus: {message}")


def install() -> None:
    """Make :func:`handle` the process's excepthook (once; the one it replaces handles everything else), and
    :func:`remove_an_unused_export_dir_at_exit`."""
    global _previous
    if sys.excepthook is not handle:
        _previous = sys.excepthook
        sys.excepthook = handle
        remove_an_unused_export_dir_at_exit(sys.argv)


def remove_an_unused_export_dir_at_exit(argv: List[str]) -> None:
    """ns-export makes its ``--output-dir`` before it reads the config: where that folder (or one above it) did not
    exist before the command and nothing was written into it (a bad config, a crop box with no Gaussian, an
    error), remove what was made, at the exit or before :func:`handle`'s message."""
    value = option_value(argv, "--output-dir") if argv and Path(argv[0]).name == "ns-export" else None
    if value is None:
        return
    folder = Path(value).absolute()
    made = outputs.highest_missing(folder)
    if made is None:
        return

    def remove() -> None:
        if folder.is_dir():
            outputs.remove_empty_folders(folder, up_to=made)

    add_cleanup(remove)
    atexit.register(remove)
