"""Densification records and where they go: ``densification.jsonl``, the writer, the console, callbacks.

A record is a plain JSON-able dict with at least ``step`` and ``event`` (one of :data:`EVENTS`).
Entry points: :class:`DensificationLog` (the sinks of one run; rank 0 writes), :func:`register_callback`
(global callbacks, also as a decorator), :func:`load_callback` (``--pipeline.model.densify-callbacks``),
:func:`recording_paused` (warmup mutes records), :func:`console_line`.
"""

from __future__ import annotations

import importlib
import json
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
from nerfstudio.utils import writer
from nerfstudio.utils.rich_utils import CONSOLE
from torch import Tensor

from ns_splat_plus.parallel import collectives

Record = Dict[str, Any]
EventCallback = Callable[[Record], None]

JSONL_NAME = "densification.jsonl"
EVENTS = ("start", "refine", "opacity_reset", "gradient_summary", "warning", "error")

# --- callbacks ------------------------------------------------------------------------------------

_CALLBACKS: List[Tuple[EventCallback, Optional[frozenset]]] = []


def register_callback(fn: Optional[EventCallback] = None, *, events: Optional[Iterable[str]] = None):
    """Call ``fn(record)`` for every densification record (or only for the ``events`` named).

    ``record`` is a plain JSON-able dict with at least ``step`` and ``event`` (one of
    ``start``, ``refine``, ``opacity_reset``, ``gradient_summary``, ``warning``, ``error``), the
    same object that goes to ``densification.jsonl``. Called on rank 0, in the training process,
    right after the event. Usable as a decorator, with or without ``events``. Returns ``fn``.

    A registration is for the next run this process starts: the run takes the registered callbacks
    when it is set up, so that none of them is called by a later run of the same process (a notebook,
    a test session, the benchmark probe). Register again before each run that needs it.
    """
    selected = None if events is None else frozenset(events)
    if selected is not None and not selected <= set(EVENTS):
        raise ValueError(f"unknown densification events {sorted(selected - set(EVENTS))}; known: {EVENTS}")

    def add(f: EventCallback) -> EventCallback:
        if not callable(f):
            raise TypeError(f"register_callback needs a callable, got {f!r}")
        _CALLBACKS.append((f, selected))
        return f

    return add if fn is None else add(fn)


def unregister_callback(fn: EventCallback) -> None:
    """Drop ``fn``'s registrations that no run has taken yet."""
    _CALLBACKS[:] = [(f, e) for (f, e) in _CALLBACKS if f is not fn]


def take_registered_callbacks() -> List[Tuple[EventCallback, Optional[frozenset]]]:
    """The registered callbacks, removed from the registry (a run takes them when it is set up)."""
    taken = list(_CALLBACKS)
    _CALLBACKS.clear()
    return taken


def load_callback(path: str) -> EventCallback:
    """The function named by ``"pkg.module:function"`` (as given in ``--pipeline.model.densify-callbacks``)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"densify callback {path!r}: expected 'pkg.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"densify callback {path!r} cannot be loaded: {err}") from err
    except Exception as err:  # noqa: BLE001 (the user's module raised while it was imported)
        raise ValueError(
            f"densify callback {path!r} cannot be loaded: importing {module_name} raised {type(err).__name__}: {err}"
        ) from err
    try:
        for part in attr.split("."):
            target = getattr(target, part)
    except AttributeError as err:
        raise ValueError(f"densify callback {path!r} cannot be loaded: {err}") from err
    if not callable(target):
        raise ValueError(f"densify callback {path!r} is not callable")
    return target


_PAUSED = 0


@contextmanager
def recording_paused() -> Iterator[None]:
    """No densification record leaves the process inside this block (warmup uses it)."""
    global _PAUSED
    _PAUSED += 1
    try:
        yield
    finally:
        _PAUSED -= 1


# --- sinks --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """JSON-able copy: tensors and numpy numbers to Python numbers, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Tensor):
        value = value.item() if value.numel() == 1 else value.tolist()
        return _plain(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fmt_number(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.2e}"


class DensificationLog:
    """Where densification records go: JSONL file, writer scalars, console, callbacks (rank 0 only)."""

    def __init__(self, callback_paths: Sequence[str] = (), console: bool = True) -> None:
        self.run_dir: Optional[Path] = None
        self.callback_paths = list(callback_paths)  # 'pkg.module:function', imported when a run attaches
        self.callbacks: List[Tuple[EventCallback, Optional[frozenset]]] = []
        self.console = console
        self.num_written = 0
        self._failed_callbacks: set = set()

    @property
    def path(self) -> Optional[Path]:
        return None if self.run_dir is None else self.run_dir / JSONL_NAME

    def set_run_dir(self, run_dir: Union[str, Path, None]) -> None:
        self.run_dir = None if run_dir is None else Path(run_dir)

    def load_configured_callbacks(self) -> None:
        """Import the callbacks named in the config (a training run only: ns-eval never needs them)."""
        for path in self.callback_paths:
            self.callbacks.append((load_callback(path), None))
        self.callback_paths = []

    def take_registered_callbacks(self) -> None:
        """Adopt the callbacks registered with :func:`register_callback` (for this run only)."""
        self.callbacks.extend(take_registered_callbacks())

    def add_callback(self, fn: EventCallback, events: Optional[Iterable[str]] = None) -> None:
        """A callback for this run only (the global registry is :func:`register_callback`)."""
        self.callbacks.append((fn, None if events is None else frozenset(events)))

    def emit(self, record: Record) -> None:
        if _PAUSED or collectives.get_rank() != 0:
            return
        record = _plain(record)
        path = self.path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:  # open per record: records are rare, files stay whole
                f.write(json.dumps(record) + "\n")
        self.num_written += 1
        self._to_writer(record)
        if self.console:
            line = console_line(record)
            if line:
                CONSOLE.log(line)
        for fn, events in list(self.callbacks):
            if events is not None and record["event"] not in events:
                continue
            try:
                fn(dict(record))
            except Exception as err:  # a user's plotting bug must not end a training run
                if id(fn) not in self._failed_callbacks:
                    self._failed_callbacks.add(id(fn))
                    CONSOLE.print(
                        f"[yellow]Densification callback {getattr(fn, '__name__', fn)} failed: {err!r}[/yellow]"
                    )

    @staticmethod
    def _to_writer(record: Record) -> None:
        step, event = record["step"], record["event"]
        scalars: Dict[str, Any] = {}
        if event == "refine":
            for key in ("duplicated", "split", "pruned", "relocated", "added", "num_gaussians", "budget"):
                if key in record:
                    scalars[f"Densify/{key}"] = record[key]
            for key, value in (record.get("grad2d") or {}).items():
                scalars[f"Densify/grad2d_{key}"] = value
            for key, value in (record.get("coverage") or {}).items():  # the efficient strategy's multi-view scores
                scalars[f"Densify/coverage_{key}"] = value
        elif event == "gradient_summary":
            for key in ("norm_mean", "norm_max", "norm_max_median", "zero_steps", "visible_mean"):
                scalars[f"Gradients/means2d_{key}"] = record.get(key)
        for name, value in scalars.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.put_scalar(name=name, scalar=value, step=step)


def console_line(record: Record) -> Optional[str]:
    """The one console line of a record (None: the record is not shown on the console)."""
    event, step = record["event"], record["step"]
    if event == "refine":
        if "relocated" in record:
            counts = f"{record['relocated']} relocated, +{record['added']} added"
        elif record.get("late_prune"):  # the efficient strategy's, after densification: it only prunes
            pruned, by_score, left = record["pruned"], record.get("pruned_by_score", 0), record["num_gaussians"]
            return f"Late prune step {step}: -{pruned} pruned ({by_score} by score) -> {left} Gaussians"
        else:
            counts = f"+{record['duplicated']} duplicated, +{record['split']} split, -{record['pruned']} pruned"
        text = f"Densify step {step}: {counts} -> {record['num_gaussians']} Gaussians"
        if record.get("budget") is not None:
            text += f" (budget {record['budget']})"
        g = record.get("grad2d")
        if g:
            text += (
                f" | grad2d median {fmt_number(g['median'])} p99 {fmt_number(g['p99'])} max {fmt_number(g['max'])}"
                f" over {g['num_visible']} visible"
            )
            if g.get("threshold") is not None:
                text += f", {g['num_over_threshold']} over threshold {fmt_number(g['threshold'])}"
        return text
    if event in ("warning", "error"):
        return f"[{'yellow' if event == 'warning' else 'red'}]{record['message']}[/]"
    return None
