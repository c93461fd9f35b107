"""The live "Training health" panel in nerfstudio's viser viewer: :class:`TrainingHealthPanel`.

* :class:`TrainingHealthPanel`: a folder in nerfstudio's viser viewer (rank 0) that shows the
  Gaussian count, the last refine event, the latest gradient summary, the warmup result and the
  ranks / GPUs in use. Producers push plain dicts into it (``on_refine``, ``on_gradient_summary``,
  ``on_warmup``) and the trainer calls ``update(step, num_gaussians)`` every step. Nothing is sent
  to the browser unless one is connected, and then at most every ``interval_s`` seconds, so a run
  nobody watches pays one clock read per step. Listeners follow it: ``push_listeners`` run with each
  push (:mod:`.page` keeps nerfstudio's "Step" line current with them), ``state_listeners`` when the
  state changes (to "completed" at the end of training).

A set-up trainer gets its panel from its viewer config
(:meth:`ns_splat_plus.viewer.config.SplatPlusViewerConfig.attach_to_trainer`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

PANEL_TITLE = "Training health"


# --- the panel ------------------------------------------------------------------------------------

# Count keys of a refine event (the strategies' refine records: strategy/default.py, mcmc.py, efficient.py), in display order, with their sign.
_REFINE_COUNT_KEYS: Sequence[Tuple[str, str]] = (
    ("duplicated", "+"),
    ("split", "+"),
    ("pruned", "-"),
    ("relocated", ""),
    ("added", "+"),
)
_STAT_KEYS = ("mean", "median", "p90", "p99", "max")


def _number(value: Any) -> Any:
    """A plain Python number (tensors only reach here while a browser is connected)."""
    if hasattr(value, "item") and getattr(value, "numel", lambda: 1)() == 1:
        value = value.item()
    return value


def format_value(value: Any) -> str:
    value = _number(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.3g}"
    return str(value)


def format_refine(event: Mapping[str, Any]) -> str:
    """``step 60: +12 duplicated, +30 split, -5 pruned → 437 Gaussians`` (the console line's counts)."""
    parts = [f"{sign}{format_value(event[key])} {key}" for key, sign in _REFINE_COUNT_KEYS if key in event]
    text = f"step {format_value(event.get('step', '?'))}: " + (", ".join(parts) if parts else "no counts")
    if event.get("num_gaussians") is not None:
        text += f" → {format_value(event['num_gaussians'])} Gaussians"
    return text


def format_grad2d(stats: Mapping[str, Any]) -> str:
    """The statistics behind a refine decision (densify.grad2d_statistics)."""
    parts = [f"{k} {format_value(stats[k])}" for k in _STAT_KEYS if stats.get(k) is not None]
    if stats.get("threshold") is not None:
        over = stats.get("num_over_threshold")
        parts.append(f"threshold {format_value(stats['threshold'])}" + ("" if over is None else f" ({over} over)"))
    if stats.get("num_visible") is not None:
        parts.append(f"{stats['num_visible']} visible")
    return " · ".join(parts)


def format_gradient_summary(summary: Mapping[str, Any]) -> str:
    """The ``gradient_summary`` record (strategy/monitor.py): per-step norms of the means2d gradients."""
    if "norm_mean" not in summary:  # another producer: show what it sent
        return ", ".join(f"{k} {format_value(v)}" for k, v in summary.items() if k not in ("event",))
    first, last = summary.get("first_step"), summary.get("step")
    text = f"steps {first}–{last}: " if first is not None else f"step {last}: "
    text += f"mean norm {format_value(summary['norm_mean'])} · max {format_value(summary.get('norm_max'))}"
    num_steps, zero = summary.get("num_steps"), summary.get("zero_steps")
    sampled = summary.get("sampled_steps")
    if zero is not None and sampled is not None and sampled != num_steps:  # after refinement: a sample every few steps
        text += f" · all-zero on {zero} of {sampled} sampled steps"
    elif zero is not None:
        text += f" · all-zero on {zero}" + (f" of {num_steps} steps" if num_steps is not None else " steps")
    if summary.get("missing_steps"):
        text += f" · missing on {summary['missing_steps']} steps"
    if summary.get("visible_mean") is not None:
        text += f" · {summary['visible_mean']:.0f} visible"
    return text


def format_warmup(result: Mapping[str, Any]) -> str:
    """warmup.py's WarmupResult as a dict."""
    if "steps" not in result or "seconds" not in result:
        return " · ".join(f"{k} {format_value(v)}" for k, v in result.items())
    text = f"{result['steps']} steps in {result['seconds']:.2f} s"
    if result.get("first_step_seconds") is not None:
        text += f" (first {result['first_step_seconds']:.2f} s)"
    if result.get("later_sizes"):
        text += " · then rendered at " + ", ".join(f"{w}x{h}" for h, w in result["later_sizes"])
    if result.get("nonzero_gradient_steps") is not None:
        text += f" · non-zero gradients on {result['nonzero_gradient_steps']} of {result['steps']}"
    if result.get("means2d_grad_max") is not None:
        text += f" · max {format_value(result['means2d_grad_max'])}"
    if result.get("restored"):
        text += " · state restored"
    return text


def describe_devices(
    device: Any, world_size: int, local_rank: int = 0, environ: Optional[Mapping[str, str]] = None
) -> str:
    """One line on the ranks and accelerators of this run (computed once at set-up)."""
    import torch

    from ns_splat_plus.parallel.devices import rank_environment

    ranks = rank_environment(os.environ if environ is None else environ)  # torchrun / srun, as devices.py reads them
    launcher: str
    if ranks is not None:
        launcher = ranks.launcher
    else:
        launcher = "ns-train spawn" if world_size > 1 else "single process"
    text = f"{world_size} rank{'s' if world_size != 1 else ''} ({launcher})"
    if ranks is not None and ranks.num_nodes > 1:
        text += f" on {ranks.num_nodes} nodes"
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        index = local_rank if device.index is None else device.index
        gpus = torch.cuda.device_count()
        text += f" · rank 0 on cuda:{index} ({torch.cuda.get_device_name(index)}) · {gpus} GPU{'s' if gpus != 1 else ''} visible"
    else:
        text += f" · device {device.type}"
    return text


class TrainingHealthPanel:
    """A "Training health" folder in a viser server, fed by the trainer and densification hooks.

    ``server`` may be None (no viewer): every method then only records the latest values, so
    producers never need to check whether a viewer exists. ``show=False`` (``--viewer.health-panel
    False``): no folder on the page, but pushes still happen (for the ``push_listeners``).
    """

    def __init__(
        self,
        server: Any = None,
        *,
        devices: str = "",
        max_steps: Optional[int] = None,
        interval_s: float = 0.5,
        order: Optional[float] = None,
        show: bool = True,
    ) -> None:
        self.server = server
        self.devices = devices
        self.max_steps = max_steps
        self.interval_s = interval_s
        self.step: Optional[int] = None
        self.num_gaussians: Optional[int] = None
        self.state = "starting"
        self.last_refine: Optional[Dict[str, Any]] = None
        self.num_refines = 0
        self.last_gradient_summary: Optional[Dict[str, Any]] = None
        self.warmup: Optional[Dict[str, Any]] = None
        self.warmup_pending = "not run"  # shown until on_warmup
        self.pushes = 0  # how many times the panel was sent to browsers (tests read it)
        self.push_listeners: List[Callable[["TrainingHealthPanel"], None]] = []  # run with each push, under its lock
        self.state_listeners: List[Callable[[str], None]] = []  # run when the state changes, with the new state
        self._next_push = 0.0
        self._lock = threading.Lock()
        self._markdown = None
        if server is not None and show:
            self._folder = server.gui.add_folder(PANEL_TITLE, order=order)
            with self._folder:
                self._markdown = server.gui.add_markdown(self.markdown())
        if server is not None:
            # A newly connected browser gets the current values at once, even while training is paused.
            # (viser runs this callback holding its client lock: no get_clients() in there.)
            server.on_client_connect(lambda _client: self.push(connected=True))

    # --- producers ----------------------------------------------------------------------------

    def on_refine(self, event: Mapping[str, Any]) -> None:
        self.last_refine = dict(event)
        self.num_refines += 1
        if isinstance(event.get("num_gaussians"), int):
            self.num_gaussians = event["num_gaussians"]

    def on_gradient_summary(self, summary: Mapping[str, Any]) -> None:
        self.last_gradient_summary = dict(summary)

    def on_warmup(self, result: Mapping[str, Any]) -> None:
        self.warmup = dict(result)
        self.push()  # once, before step 0: a browser may be watching a paused run

    def update(
        self,
        step: Optional[int],
        num_gaussians: Optional[int] = None,
        state: Optional[str] = None,
        force: bool = False,
    ) -> bool:
        """Record the step (None: keep it); send the panel if a browser is connected and ``interval_s`` has passed.

        ``num_gaussians`` must be a Python int (``means.shape[0]``), never a device value, so that
        this costs no host synchronisation. Returns whether the panel was sent.
        """
        with self._lock:  # a push in another thread (a browser connecting) sees one step in both lines
            if step is not None:
                self.step = step
            if num_gaussians is not None:
                self.num_gaussians = num_gaussians
        if state is not None and state != self.state:
            self.state = state
            for listener in self.state_listeners:
                listener(state)
        if self.server is None:
            return False
        now = time.monotonic()
        if not force and now < self._next_push:
            return False
        self._next_push = now + self.interval_s
        return self.push()

    # --- rendering ------------------------------------------------------------------------------

    def markdown(self) -> str:
        step = "–" if self.step is None else str(self.step)
        if self.max_steps is not None and self.step is not None:
            step += f" of {self.max_steps}"
        lines = [
            f"**Step:** {step} ({self.state})",
            f"**Gaussians:** {'–' if self.num_gaussians is None else self.num_gaussians}",
            "**Last refine:** "
            + (format_refine(self.last_refine) + f" (refine #{self.num_refines})" if self.last_refine else "none yet"),
        ]
        if self.last_refine and isinstance(self.last_refine.get("grad2d"), Mapping):
            lines.append(f"**Refine grad2d:** {format_grad2d(self.last_refine['grad2d'])}")
        lines.append(
            "**Gradient summary:** "
            + (format_gradient_summary(self.last_gradient_summary) if self.last_gradient_summary else "none yet")
        )
        lines.append("**Warmup:** " + (format_warmup(self.warmup) if self.warmup else self.warmup_pending))
        lines.append(f"**Ranks / GPUs:** {self.devices or 'unknown'}")
        return "  \n".join(lines)

    def push(self, connected: bool = False) -> bool:
        """Send the current values to the browsers, if any is connected (``connected``: one is)."""
        if self.server is None or not (connected or len(self.server.get_clients()) > 0):
            return False
        with self._lock:
            for listener in self.push_listeners:  # before the panel: a browser never sees the panel ahead
                listener(self)
            if self._markdown is not None:
                self._markdown.content = self.markdown()
            self.pushes += 1
        return True
