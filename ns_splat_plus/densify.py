"""Instrumented densification: gsplat's strategies that say what they did, and why.

``build_strategy(config, num_train_data)`` is the one entry point the model calls. It returns a
:class:`InstrumentedDefaultStrategy` (splatfacto's recipe) or :class:`InstrumentedMCMCStrategy`
(``--pipeline.model.strategy mcmc``). Both are ``@dataclass`` subclasses of gsplat 1.4.0's
strategies that make the same decisions and add:

* a record per refine event (``refine``: duplicated / split / pruned or relocated / added counts,
  the Gaussian count before and after, and the statistics behind the decision: mean, median, p90,
  p99 and max of the accumulated averaged 2D gradient over the visible Gaussians, the threshold,
  how many crossed it, how many were visible), per opacity reset (``opacity_reset``), and every
  ``grad_summary_every`` steps a ``gradient_summary`` of the per-step means2d gradient norms;
* failure detection: means2d gradients missing or all exactly zero for ``zero_grad_patience``
  consecutive steps stop training with :class:`TrainingHealthError`; a warning when no Gaussian
  crossed the densify threshold by the ``warn_no_densify_after``-th refine;
* several ranks: the accumulated statistics are summed (radii: max) across ranks before each
  decision, and every random draw of the strategy comes from a generator seeded by (run seed,
  step), so every replica makes the same decisions;
* MCMC on the CPU: pure-PyTorch versions of gsplat's two CUDA-only MCMC kernels.

Records go to the sinks of :class:`DensificationLog` (rank 0 only): ``densification.jsonl`` in
the run directory, nerfstudio's writer (tensorboard / wandb / comet scalars), one console line per
refine, and user callbacks (:func:`register_callback`, or ``--pipeline.model.densify-callbacks
pkg.module:function``).

:class:`CheckedOptimizers` (nerfstudio's ``Optimizers``) refuses non-finite gradients and
parameters: one fused check per optimizer step, read without a device sync on CUDA (the flags of
step s are read at step s+1, long after the stream passed them), at once on the CPU.

Per-step cost on the GPU: the gradient norms gsplat computes anyway are reduced to three numbers
on the device (no boolean index where gsplat has none: MCMC, and after ``refine_stop_iter``); the
host reads them every ``min(zero_grad_patience // 4, grad_summary_every)`` steps, and at refine
events, where gsplat synchronises already. Random draws are forked per step only where gsplat
draws (refines; MCMC's per-step noise).
"""

from __future__ import annotations

import importlib
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from gsplat.strategy import DefaultStrategy, MCMCStrategy
from gsplat.strategy import ops as gsplat_ops
from nerfstudio.engine.optimizers import Optimizers
from nerfstudio.utils import writer
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import distributed

Record = Dict[str, Any]
EventCallback = Callable[[Record], None]

JSONL_NAME = "densification.jsonl"
EVENTS = ("start", "refine", "opacity_reset", "gradient_summary", "warning", "error")


class TrainingHealthError(SystemExit):
    """Training cannot lead anywhere useful (zero or non-finite gradients); the message says why.

    A SystemExit, like checkpoint.CheckpointError: ns-train has no error handler, and a SystemExit
    prints its one message and exits with status 1, without a traceback."""

    def __str__(self) -> str:
        return str(self.code)


# --- ranks --------------------------------------------------------------------------------------


def world() -> Tuple[int, int]:
    """(rank, world size) of torch.distributed, (0, 1) without it."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _all_reduce(tensor: Tensor, op: str) -> None:
    if world()[1] > 1:
        torch.distributed.all_reduce(tensor, op=getattr(torch.distributed.ReduceOp, op))


# --- callbacks ------------------------------------------------------------------------------------

_CALLBACKS: List[Tuple[EventCallback, Optional[frozenset]]] = []


def register_callback(fn: Optional[EventCallback] = None, *, events: Optional[Iterable[str]] = None):
    """Call ``fn(record)`` for every densification record (or only for the ``events`` named).

    ``record`` is a plain JSON-able dict with at least ``step`` and ``event`` (one of
    ``start``, ``refine``, ``opacity_reset``, ``gradient_summary``, ``warning``, ``error``), the
    same object that goes to ``densification.jsonl``. Called on rank 0, in the training process,
    right after the event. Usable as a decorator, with or without ``events``. Returns ``fn``.
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
    """Stop calling ``fn`` (every registration of it)."""
    _CALLBACKS[:] = [(f, e) for (f, e) in _CALLBACKS if f is not fn]


def load_callback(path: str) -> EventCallback:
    """The function named by ``"pkg.module:function"`` (as given in ``--pipeline.model.densify-callbacks``)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"densify callback {path!r}: expected 'pkg.module:function'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
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


def _fmt(x: Optional[float]) -> str:
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

    def add_callback(self, fn: EventCallback, events: Optional[Iterable[str]] = None) -> None:
        """A callback for this run only (the global registry is :func:`register_callback`)."""
        self.callbacks.append((fn, None if events is None else frozenset(events)))

    def emit(self, record: Record) -> None:
        if _PAUSED or world()[0] != 0:
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
        for fn, events in list(self.callbacks) + list(_CALLBACKS):
            if events is not None and record["event"] not in events:
                continue
            try:
                fn(dict(record))
            except Exception as err:  # a user's plotting bug must not end a training run
                if id(fn) not in self._failed_callbacks:
                    self._failed_callbacks.add(id(fn))
                    CONSOLE.print(f"[yellow]Densification callback {getattr(fn, '__name__', fn)} failed: {err!r}[/yellow]")

    @staticmethod
    def _to_writer(record: Record) -> None:
        step, event = record["step"], record["event"]
        scalars: Dict[str, Any] = {}
        if event == "refine":
            for key in ("duplicated", "split", "pruned", "relocated", "added", "num_gaussians"):
                if key in record:
                    scalars[f"Densify/{key}"] = record[key]
            for key, value in (record.get("grad2d") or {}).items():
                scalars[f"Densify/grad2d_{key}"] = value
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
        else:
            counts = f"+{record['duplicated']} duplicated, +{record['split']} split, -{record['pruned']} pruned"
        text = f"Densify step {step}: {counts} -> {record['num_gaussians']} Gaussians"
        g = record.get("grad2d")
        if g:
            text += (
                f" | grad2d median {_fmt(g['median'])} p99 {_fmt(g['p99'])} max {_fmt(g['max'])}"
                f" over {g['num_visible']} visible"
            )
            if g.get("threshold") is not None:
                text += f", {g['num_over_threshold']} over threshold {_fmt(g['threshold'])}"
        return text
    if event in ("warning", "error"):
        return f"[{'yellow' if event == 'warning' else 'red'}]{record['message']}[/]"
    return None


# --- statistics -----------------------------------------------------------------------------------


def _quantiles(sorted_values: Tensor, qs: Sequence[float]) -> List[Tensor]:
    """Linear-interpolated quantiles (torch.quantile's default) of an ascending 1-D tensor, which
    may be longer than torch.quantile's 16M limit. The length is known on the host: no sync."""
    n = sorted_values.numel()
    out = []
    for q in qs:
        pos = q * (n - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, n - 1)
        frac = pos - lo
        out.append(sorted_values[lo] * (1.0 - frac) + sorted_values[hi] * frac)
    return out


@torch.no_grad()
def grad2d_statistics(grad2d: Tensor, count: Tensor, threshold: Optional[float]) -> Dict[str, Any]:
    """Statistics of the accumulated averaged 2D gradient (gsplat's ``grad2d / count``) over the
    Gaussians seen since the last refine, and how many exceed ``threshold`` (gsplat's test)."""
    averaged = grad2d / count.clamp_min(1)
    visible = averaged[count > 0]  # one sync (boolean index); refine steps only
    n = visible.numel()
    stats: Dict[str, Any] = {"threshold": threshold, "num_visible": n}
    if n == 0:
        stats.update(mean=0.0, median=0.0, p90=0.0, p99=0.0, max=0.0, num_over_threshold=0 if threshold is not None else None)
        return stats
    ordered = visible.sort().values
    parts = [visible.mean(), *_quantiles(ordered, (0.5, 0.9, 0.99)), ordered[-1]]
    if threshold is not None:
        parts.append((averaged > threshold).sum().to(averaged.dtype))
    values = torch.stack(parts).tolist()
    stats.update(zip(("mean", "median", "p90", "p99", "max"), values[:5]))
    stats["num_over_threshold"] = int(values[5]) if threshold is not None else None
    return stats


@torch.no_grad()
def opacity_statistics(opacity_logits: Tensor, threshold: float) -> Dict[str, Any]:
    opacities = torch.sigmoid(opacity_logits.flatten())
    n = opacities.numel()
    if n == 0:
        return {"threshold": threshold, "num_below_threshold": 0, "num_gaussians": 0}
    ordered = opacities.sort().values
    values = torch.stack(
        [opacities.mean(), *_quantiles(ordered, (0.1, 0.5, 0.9)), (opacities <= threshold).sum().to(opacities.dtype)]
    ).tolist()
    return {
        "mean": values[0], "p10": values[1], "median": values[2], "p90": values[3],
        "threshold": threshold, "num_below_threshold": int(values[4]), "num_gaussians": n,
    }


def _dense_norms(info: Dict[str, Any], key: str, absgrad: bool, packed: bool) -> Optional[Tuple[Tensor, Tensor]]:
    """gsplat's screen-space norms of the 2D gradient (``DefaultStrategy._update_state``) without
    its boolean index, so without a host sync: ``(norms [C, N], visible [C, N])`` with norms zero
    where not visible; packed: ``(norms [nnz], gaussian ids [nnz])``. None when there is no gradient
    (backward never reached means2d)."""
    means2d = info.get(key)
    if means2d is None or means2d.grad is None:
        return None
    grads = getattr(means2d, "absgrad", None) if absgrad else means2d.grad
    if grads is None:
        return None
    grads = grads.clone()
    grads[..., 0] *= info["width"] / 2.0 * info["n_cameras"]
    grads[..., 1] *= info["height"] / 2.0 * info["n_cameras"]
    norms = grads.norm(dim=-1)
    if packed:
        return norms, info["gaussian_ids"]
    visible = info["radii"] > 0.0
    return torch.where(visible, norms, torch.zeros((), dtype=norms.dtype, device=norms.device)), visible


StepGradients = Tuple[Tensor, Tensor, bool]
"""``(norms, where, packed)`` of one step, as :func:`_dense_norms` returns them, plus ``packed``."""


def _write_step_stats(row: Tensor, grads: Optional[StepGradients]) -> None:
    """(sum, max, count) of this step's visible norms into the 3-vector ``row`` on the device:
    three reductions written in place (no stacking, no copy, no sync; this runs every step)."""
    if grads is None or grads[0].numel() == 0:
        row.zero_()
        return
    norms, where, packed = grads
    dims = tuple(range(norms.dim()))
    torch.sum(norms, dim=dims, out=row[0])
    torch.amax(norms, dim=dims, out=row[1])
    if packed:
        row[2].fill_(float(norms.numel()))
    else:
        torch.sum(where, dim=dims, dtype=row.dtype, out=row[2])


def _step_seed(run_seed: int, step: int) -> int:
    return (int(run_seed) * 1_000_003 + int(step) * 7_919 + 0x5EED) % (2**63 - 1)


@contextmanager
def seeded_rng(run_seed: int, step: int, device: torch.device, numpy_too: bool = False) -> Iterator[None]:
    """Every draw inside comes from generators seeded by (run seed, step): the same on every rank
    and in every run; the global generators continue afterwards as if nothing was drawn."""
    cuda_index = None
    if device.type == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    seed = _step_seed(run_seed, step)
    with torch.random.fork_rng(devices=[] if cuda_index is None else [cuda_index]):
        torch.default_generator.manual_seed(seed)
        if cuda_index is not None:
            torch.cuda.default_generators[cuda_index].manual_seed(seed)
        np_state = np.random.get_state() if numpy_too else None
        if numpy_too:
            np.random.seed(seed % (2**32))
        try:
            yield
        finally:
            if np_state is not None:
                np.random.set_state(np_state)


# --- the shared instrumentation ---------------------------------------------------------------------


@dataclass
class _MonitorState:
    """Host + device bookkeeping of the per-step gradient statistics (not per Gaussian)."""

    rows: Optional[Tensor] = None  # [cap, 3] per-step (sum, max, count) of the visible gradient norms, on the device
    row_steps: List[int] = field(default_factory=list)
    row_present: List[int] = field(default_factory=list)
    window: List[Tuple[int, float, float, int, int]] = field(default_factory=list)  # step, sum, max, visible, present
    zero_run: int = 0
    zero_run_start: Optional[int] = None
    zero_run_missing: int = 0
    zero_run_visible: int = 0
    refines: int = 0
    over_threshold_total: int = 0
    warned_no_densify: bool = False
    acc_grad2d: Optional[Tensor] = None  # MCMC only: the statistics gsplat's DefaultStrategy would keep
    acc_count: Optional[Tensor] = None


@dataclass
class _Instrumentation:
    """Fields and helpers shared by both instrumented strategies (a dataclass mixin)."""

    instrumentation: bool = True
    """Record statistics and watch gradients; False: gsplat's behaviour (kept: rank consistency)."""
    grad_summary_every: int = 100
    zero_grad_patience: int = 100
    warn_no_densify_after: int = 3
    rng_seed: int = 0
    log: DensificationLog = field(default_factory=DensificationLog, repr=False, compare=False)
    _mon: _MonitorState = field(default_factory=_MonitorState, init=False, repr=False, compare=False)

    # -- state for warmup / checkpoints ------------------------------------------------------------

    def instrumentation_state(self) -> _MonitorState:
        """A deep copy of the instrumentation bookkeeping (restore with :meth:`load_instrumentation_state`)."""
        import copy

        return copy.deepcopy(self._mon)

    def load_instrumentation_state(self, state: _MonitorState) -> None:
        import copy

        self._mon = copy.deepcopy(state)

    # -- per step ------------------------------------------------------------------------------------

    def _flush_every(self, device: torch.device) -> int:
        if device.type != "cuda":
            return 1  # reading a CPU tensor costs no sync
        return max(1, min(self.zero_grad_patience // 4, self.grad_summary_every))

    def _observe_step(self, step: int, device: torch.device, grads: Optional[StepGradients]) -> None:
        """Record this step's (sum, max, count) of the visible gradient norms, kept on the device;
        the host reads them every few steps. None: no gradient reached means2d this step."""
        mon = self._mon
        cap = self._flush_every(device)
        if mon.rows is None or mon.rows.shape[0] != cap or mon.rows.device != device:
            mon.rows = torch.zeros((cap, 3), device=device)
        _write_step_stats(mon.rows[len(mon.row_steps)], grads)
        mon.row_steps.append(step)
        mon.row_present.append(0 if grads is None else 1)
        summary_due = (step + 1) % self.grad_summary_every == 0
        if len(mon.row_steps) >= cap or summary_due:
            self._flush(step)
        if summary_due:
            self._emit_summary(step)

    def _flush(self, step: int) -> None:
        mon = self._mon
        n = len(mon.row_steps)
        if n == 0:
            return
        device = mon.rows.device
        rows = mon.rows[:n]
        present = torch.tensor(mon.row_present, dtype=rows.dtype).to(device)
        sums = torch.cat((rows[:, 0:1], rows[:, 2:3], present[:, None]), dim=1)  # sum, visible, present: summed over ranks
        maxes = rows[:, 1].clone()  # max: max over ranks
        _all_reduce(sums, "SUM")
        _all_reduce(maxes, "MAX")
        sums_host, maxes_host = sums.tolist(), maxes.tolist()
        for i, row_step in enumerate(mon.row_steps):
            total, visible, present = sums_host[i]
            row = (row_step, total, maxes_host[i], int(visible), int(present))
            mon.window.append(row)
            if maxes_host[i] == 0.0:  # missing gradients count as zero
                if mon.zero_run == 0:
                    mon.zero_run_start = row_step
                mon.zero_run += 1
                mon.zero_run_missing += int(present == 0)
                mon.zero_run_visible = max(mon.zero_run_visible, int(visible))
            else:
                mon.zero_run, mon.zero_run_start, mon.zero_run_missing, mon.zero_run_visible = 0, None, 0, 0
        mon.row_steps.clear()
        mon.row_present.clear()
        if self.zero_grad_patience > 0 and mon.zero_run >= self.zero_grad_patience:
            self._fail_zero_gradients(step)

    def _emit_summary(self, step: int) -> None:
        mon = self._mon
        if not mon.window:
            return
        steps = [r[0] for r in mon.window]
        per_step_mean = [r[1] / r[3] for r in mon.window if r[3] > 0]
        per_step_max = [r[2] for r in mon.window]
        record = {
            "step": step,
            "event": "gradient_summary",
            "first_step": steps[0],
            "num_steps": len(steps),
            "norm_mean": float(np.mean(per_step_mean)) if per_step_mean else 0.0,
            "norm_max": float(np.max(per_step_max)),
            "norm_max_median": float(np.median(per_step_max)),
            "norm_max_min": float(np.min(per_step_max)),
            "zero_steps": sum(1 for m in per_step_max if m == 0.0),
            "missing_steps": sum(1 for r in mon.window if r[4] == 0),
            "visible_mean": float(np.mean([r[3] for r in mon.window])),
            "world_size": world()[1],
        }
        mon.window.clear()
        self.log.emit(record)

    def _fail_zero_gradients(self, step: int) -> None:
        mon = self._mon
        k = mon.zero_run
        start = mon.zero_run_start
        if mon.zero_run_missing == k:
            what = "received no gradient at all (means2d.grad is None)"
            causes = [
                "the loss does not depend on the rendered image: it was detached (.detach(), torch.no_grad, "
                "a loss computed from the ground truth only)",
                "the rasterizer output was replaced or copied outside autograd",
            ]
        else:
            what = "had gradients that were all exactly zero"
            causes = []
            if mon.zero_run_visible == 0:
                causes.append(
                    "no Gaussian is inside any camera view (0 visible on those steps): check the camera poses, "
                    "the scene scale / dataparser scaling, and the near plane"
                )
            causes += [
                "the loss is detached from the Gaussians (only a term without the rendered image reaches backward)",
                "every Gaussian is transparent (opacities ~0) or hidden behind the near plane",
                "learning rates of 0 on a degenerate initialisation, or a loss weight of 0",
            ]
        message = (
            f"Training stopped at step {step}: the 2D means (means2d) {what} for {k} consecutive steps "
            f"(since step {start}; --pipeline.model.zero-grad-patience {self.zero_grad_patience}). "
            "Densification can never happen and the Gaussians stop learning. Likely causes:\n  - "
            + "\n  - ".join(causes)
        )
        self.log.emit({"step": step, "event": "error", "kind": "zero_gradient", "message": message})
        raise TrainingHealthError(message)

    def _after_refine_checks(self, step: int, stats: Optional[Dict[str, Any]]) -> None:
        """Warn once when no Gaussian crossed the densify threshold by the N-th refine."""
        mon = self._mon
        mon.refines += 1
        if stats is None or stats.get("threshold") is None:
            return
        mon.over_threshold_total += int(stats["num_over_threshold"] or 0)
        if mon.warned_no_densify or self.warn_no_densify_after <= 0 or mon.refines < self.warn_no_densify_after:
            return
        if mon.over_threshold_total == 0:
            mon.warned_no_densify = True
            message = (
                f"Densification: no Gaussian has crossed the densify threshold in {mon.refines} refines "
                f"(step {step}). Accumulated 2D gradient over {stats['num_visible']} visible Gaussians: "
                f"median {_fmt(stats['median'])}, p90 {_fmt(stats['p90'])}, p99 {_fmt(stats['p99'])}, "
                f"max {_fmt(stats['max'])} vs threshold {_fmt(stats['threshold'])}. The scene will not grow: "
                f"lower --pipeline.model.densify-grad-thresh (about {_fmt(stats['p99'])} densifies ~1%), or check "
                "that the loss reaches the Gaussians."
            )
            self.log.emit({"step": step, "event": "warning", "kind": "no_densification", "message": message, "grad2d": stats})


# --- DefaultStrategy --------------------------------------------------------------------------------


@dataclass
class InstrumentedDefaultStrategy(_Instrumentation, DefaultStrategy):
    """gsplat's DefaultStrategy (same decisions), with records, gradient watch and rank consistency."""

    def _update_state(self, params, state, info, packed: bool = False):
        """gsplat's accumulation of the screen-space gradients, bitwise the same for nerfstudio's one
        camera per step, but dense (``torch.where`` over the [C, N] visibility instead of gsplat's
        boolean index): no host sync in the training step. Keeps this step's (sum, max, count) of
        the visible norms for the statistics."""
        for key in ["width", "height", "n_cameras", "radii", "gaussian_ids", self.key_for_gradient]:
            assert key in info, f"{key} is required but missing."
        out = _dense_norms(info, self.key_for_gradient, self.absgrad, packed)
        if out is None:
            self._step_grads = None
            return  # no gradient this step (gsplat would crash on None.clone()); the monitor counts it
        norms, where = out
        self._step_grads = (norms, where, packed)
        n_gaussian = len(list(params.values())[0])
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            if state[key] is None:
                state[key] = torch.zeros(n_gaussian, device=norms.device)
        if packed:  # where: the Gaussian id of each projected entry
            state["grad2d"].index_add_(0, where, norms)
            state["count"].index_add_(0, where, torch.ones_like(norms))
            if self.refine_scale2d_stop_iter > 0:
                radii = info["radii"] / float(max(info["width"], info["height"]))
                state["radii"][where] = torch.maximum(state["radii"][where], radii)
            return
        if norms.shape[0] == 1:  # nerfstudio's one camera: the sum over cameras is the row itself
            state["grad2d"].add_(norms[0])  # zero where not visible: x + 0 == x
            state["count"].add_(where[0])
        else:
            state["grad2d"].add_(norms.sum(dim=0))
            state["count"].add_(where.sum(dim=0).to(state["count"].dtype))
        if self.refine_scale2d_stop_iter > 0:
            radii = torch.where(where, info["radii"] / float(max(info["width"], info["height"])), 0.0)
            torch.maximum(state["radii"], radii.amax(dim=0), out=state["radii"])

    def step_post_backward(self, params, optimizers, state, step, info, packed: bool = False):
        device = params["means"].device
        self._step_grads = None
        if step < self.refine_stop_iter:
            self._update_state(params, state, info, packed=packed)
            if (
                step > self.refine_start_iter
                and step % self.refine_every == 0
                and step % self.reset_every >= self.pause_refine_after_reset
            ):
                self._refine(params, optimizers, state, step)
            if step % self.reset_every == 0:
                gsplat_ops.reset_opa(params=params, optimizers=optimizers, state=state, value=self.prune_opa * 2.0)
                if self.instrumentation:
                    self.log.emit(
                        {"step": step, "event": "opacity_reset", "value": self.prune_opa * 2.0,
                         "num_gaussians": len(params["means"])}
                    )
        elif self.instrumentation:
            out = _dense_norms(info, self.key_for_gradient, self.absgrad, packed)
            self._step_grads = None if out is None else (*out, packed)
        if self.instrumentation:
            self._observe_step(step, device, self._step_grads)
        self._step_grads = None

    def _refine(self, params, optimizers, state, step: int) -> None:
        device = params["means"].device
        n = len(params["means"])
        for key in ("grad2d", "count") + (("radii",) if self.refine_scale2d_stop_iter > 0 else ()):
            if state.get(key) is None:
                state[key] = torch.zeros(n, device=device)
        # the same statistics on every rank before anyone decides
        _all_reduce(state["grad2d"], "SUM")
        _all_reduce(state["count"], "SUM")
        if self.refine_scale2d_stop_iter > 0:
            _all_reduce(state["radii"], "MAX")
        stats = grad2d_statistics(state["grad2d"], state["count"], self.grow_grad2d) if self.instrumentation else None
        if stats is not None and step < self.refine_scale2d_stop_iter:
            # gsplat also splits Gaussians that were large on screen, whatever their gradient
            stats["screen_size_threshold"] = self.grow_scale2d
            stats["num_over_screen_size"] = int((state["radii"] > self.grow_scale2d).sum().item())
        with seeded_rng(self.rng_seed, step, device, numpy_too=True):  # split draws torch.randn
            n_dupli, n_split = self._grow_gs(params, optimizers, state, step)
        n_prune = self._prune_gs(params, optimizers, state, step)
        state["grad2d"].zero_()
        state["count"].zero_()
        if self.refine_scale2d_stop_iter > 0:
            state["radii"].zero_()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if self.instrumentation:
            self.log.emit(
                {
                    "step": step, "event": "refine", "strategy": "default",
                    "duplicated": int(n_dupli), "split": int(n_split), "pruned": int(n_prune),
                    "num_gaussians_before": n, "num_gaussians": len(params["means"]),
                    "grad2d": stats, "absgrad": self.absgrad, "world_size": world()[1],
                }
            )
            self._after_refine_checks(step, stats)


# --- MCMCStrategy -----------------------------------------------------------------------------------


def compute_relocation_torch(opacities: Tensor, scales: Tensor, ratios: Tensor, binoms: Tensor) -> Tuple[Tensor, Tensor]:
    """Pure-PyTorch ``gsplat.relocation.compute_relocation`` (Eq. 9 of 3DGS-as-MCMC), for the CPU.

    The double sum over i <= n, k < i of binom(i-1, k) * (-1)^k / sqrt(k+1) * o'^(k+1) is a single
    sum over k with the column sums of the binomial table: sum_{i=1..n} binom(i-1, k).
    """
    n_max = binoms.shape[0]
    ratios = ratios.clamp(min=1, max=n_max).to(torch.int64)
    new_opacities = 1.0 - torch.pow(1.0 - opacities, 1.0 / ratios.to(opacities.dtype))
    row_sums = torch.cumsum(binoms.to(opacities.dtype), dim=0)  # [n_max, n_max]: sum over i-1 = 0..n-1
    k = torch.arange(n_max, device=opacities.device, dtype=opacities.dtype)
    signs = torch.where(k.to(torch.int64) % 2 == 0, 1.0, -1.0).to(opacities.dtype) / torch.sqrt(k + 1.0)
    powers = new_opacities[:, None] ** (k[None, :] + 1.0)  # [N, n_max]
    denom = (row_sums[ratios - 1] * signs[None, :] * powers).sum(dim=-1)
    new_scales = (opacities / denom)[:, None] * scales
    return new_opacities, new_scales


def _relocation(opacities, scales, ratios, binoms):
    if opacities.is_cuda:
        from gsplat.relocation import compute_relocation

        return compute_relocation(opacities=opacities, scales=scales, ratios=ratios, binoms=binoms)
    return compute_relocation_torch(opacities, scales, ratios, binoms)


def _relocated_writer(params, opacities: Tensor, sampled_idxs: Tensor, binoms: Tensor, min_opacity: float):
    """The MCMC relocation of the sampled Gaussians (the paper's Eq. 9, shared by relocate and add):
    a function writing their new opacity and scale into a parameter tensor, as gsplat's ops do."""
    new_opacities, new_scales = _relocation(
        opacities[sampled_idxs].flatten(),
        torch.exp(params["scales"])[sampled_idxs],
        torch.bincount(sampled_idxs)[sampled_idxs] + 1,
        binoms,
    )
    new_opacities = torch.clamp(new_opacities, max=1.0 - torch.finfo(torch.float32).eps, min=min_opacity)

    def write(name: str, p: Tensor) -> None:
        if name == "opacities":
            p[sampled_idxs] = torch.logit(new_opacities).reshape(p[sampled_idxs].shape)
        elif name == "scales":
            p[sampled_idxs] = torch.log(new_scales)

    return write


@torch.no_grad()
def relocate_torch(params, optimizers, mask: Tensor, binoms: Tensor, min_opacity: float) -> None:
    """gsplat.strategy.ops.relocate with a device-independent relocation formula."""
    opacities = torch.sigmoid(params["opacities"])
    dead_indices = mask.nonzero(as_tuple=True)[0]
    alive_indices = (~mask).nonzero(as_tuple=True)[0]
    probs = opacities[alive_indices].flatten()
    sampled_idxs = alive_indices[gsplat_ops._multinomial_sample(probs, len(dead_indices), replacement=True)]
    write_relocated = _relocated_writer(params, opacities, sampled_idxs, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        write_relocated(name, p)
        p[dead_indices] = p[sampled_idxs]
        return torch.nn.Parameter(p)

    def optimizer_fn(key: str, v: Tensor) -> Tensor:
        v[sampled_idxs] = 0
        return v

    gsplat_ops._update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


@torch.no_grad()
def sample_add_torch(params, optimizers, n: int, binoms: Tensor, min_opacity: float) -> None:
    """gsplat.strategy.ops.sample_add with a device-independent relocation formula."""
    opacities = torch.sigmoid(params["opacities"])
    sampled_idxs = gsplat_ops._multinomial_sample(opacities.flatten(), n, replacement=True)
    write_relocated = _relocated_writer(params, opacities, sampled_idxs, binoms, min_opacity)

    def param_fn(name: str, p: Tensor) -> Tensor:
        write_relocated(name, p)
        return torch.nn.Parameter(torch.cat([p, p[sampled_idxs]]))

    def optimizer_fn(key: str, v: Tensor) -> Tensor:
        return torch.cat([v, torch.zeros((len(sampled_idxs), *v.shape[1:]), device=v.device, dtype=v.dtype)])

    gsplat_ops._update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


@torch.no_grad()
def inject_noise_torch(params, scaler: float) -> None:
    """gsplat.strategy.ops.inject_noise_to_position with PyTorch covariances, for the CPU."""
    from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci

    opacities = torch.sigmoid(params["opacities"].flatten())
    covars, _ = _quat_scale_to_covar_preci(
        params["quats"], torch.exp(params["scales"]), compute_covar=True, compute_preci=False, triu=False
    )
    gate = 1 / (1 + torch.exp(-100 * ((1 - opacities) - 0.995)))
    noise = torch.randn_like(params["means"]) * gate.unsqueeze(-1) * scaler
    params["means"].add_(torch.einsum("bij,bj->bi", covars, noise))


@dataclass
class InstrumentedMCMCStrategy(_Instrumentation, MCMCStrategy):
    """gsplat's MCMCStrategy (same decisions), instrumented, rank-consistent, and runnable on the CPU.

    Takes nerfstudio's call (no ``lr``: the means' current learning rate is read from its optimizer)."""

    def initialize_state(self, scene_scale: float = 1.0) -> Dict[str, Any]:
        return super().initialize_state()

    def step_pre_backward(self, params, optimizers, state, step, info) -> None:
        means2d = info.get("means2d")
        if self.instrumentation and means2d is not None and means2d.requires_grad:
            means2d.retain_grad()  # only for the gradient statistics: MCMC decides on opacities

    def step_post_backward(self, params, optimizers, state, step, info, packed: bool = False, lr: Optional[float] = None):
        if lr is None:
            lr = float(optimizers["means"].param_groups[0]["lr"])
        device = params["means"].device
        state["binoms"] = state["binoms"].to(device)
        mon = self._mon
        if self.instrumentation:
            # no boolean index here (upstream MCMC has no per-step host sync; neither do we)
            out = _dense_norms(info, "means2d", False, packed) if "radii" in info else None
            n = len(params["means"])
            if mon.acc_grad2d is None or mon.acc_grad2d.shape[0] != n or mon.acc_grad2d.device != device:
                mon.acc_grad2d = torch.zeros(n, device=device)
                mon.acc_count = torch.zeros(n, device=device)
            if out is not None and packed:
                mon.acc_grad2d.index_add_(0, out[1], out[0])
                mon.acc_count.index_add_(0, out[1], torch.ones_like(out[0]))
            elif out is not None:
                mon.acc_grad2d.add_(out[0].sum(dim=0))
                mon.acc_count.add_(out[1].sum(dim=0).to(mon.acc_count.dtype))
            self._observe_step(step, device, None if out is None else (*out, packed))
        refine = step < self.refine_stop_iter and step > self.refine_start_iter and step % self.refine_every == 0
        with seeded_rng(self.rng_seed, step, device, numpy_too=refine):
            if refine:
                self._refine(params, optimizers, state, step)
            # gsplat's per-step position noise, drawn from the seeded generator
            if params["means"].is_cuda:
                gsplat_ops.inject_noise_to_position(params=params, optimizers=optimizers, state={}, scaler=lr * self.noise_lr)
            else:
                inject_noise_torch(params, lr * self.noise_lr)

    def _refine(self, params, optimizers, state, step: int) -> None:
        binoms = state["binoms"]
        n_before = len(params["means"])
        mon = self._mon
        grad_stats = opa_stats = None
        if self.instrumentation:
            _all_reduce(mon.acc_grad2d, "SUM")
            _all_reduce(mon.acc_count, "SUM")
            grad_stats = grad2d_statistics(mon.acc_grad2d, mon.acc_count, None)
            opa_stats = opacity_statistics(params["opacities"], self.min_opacity)
        n_relocated = self._relocate_gs(params, optimizers, binoms)
        n_added = self._add_new_gs(params, optimizers, binoms)
        if params["means"].is_cuda:
            torch.cuda.empty_cache()
        if self.instrumentation:
            n_after = len(params["means"])
            mon.acc_grad2d = torch.zeros(n_after, device=params["means"].device)
            mon.acc_count = torch.zeros(n_after, device=params["means"].device)
            self.log.emit(
                {
                    "step": step, "event": "refine", "strategy": "mcmc",
                    "relocated": int(n_relocated), "added": int(n_added),
                    "num_gaussians_before": n_before, "num_gaussians": n_after, "cap_max": self.cap_max,
                    "opacity": opa_stats, "grad2d": grad_stats, "world_size": world()[1],
                }
            )
            self._after_refine_checks(step, grad_stats)

    @torch.no_grad()
    def _relocate_gs(self, params, optimizers, binoms) -> int:
        if params["means"].is_cuda:
            return super()._relocate_gs(params, optimizers, binoms)
        dead_mask = torch.sigmoid(params["opacities"].flatten()) <= self.min_opacity
        n_gs = int(dead_mask.sum().item())
        if n_gs > 0:
            relocate_torch(params, optimizers, dead_mask, binoms, self.min_opacity)
        return n_gs

    @torch.no_grad()
    def _add_new_gs(self, params, optimizers, binoms) -> int:
        if params["means"].is_cuda:
            return super()._add_new_gs(params, optimizers, binoms)
        current = len(params["means"])
        n_gs = max(0, min(self.cap_max, int(1.05 * current)) - current)
        if n_gs > 0:
            sample_add_torch(params, optimizers, n_gs, binoms, self.min_opacity)
        return n_gs


# --- building and wiring ----------------------------------------------------------------------------

InstrumentedStrategy = Union[InstrumentedDefaultStrategy, InstrumentedMCMCStrategy]


def build_strategy(config, num_train_data: int) -> InstrumentedStrategy:
    """The strategy a model config asks for (``config.strategy``: default or mcmc), with splatfacto's settings."""
    log = DensificationLog(callback_paths=list(getattr(config, "densify_callbacks", ()) or ()))
    seed = getattr(config, "init_seed", None)
    common = dict(
        instrumentation=getattr(config, "instrumentation", True),
        grad_summary_every=max(1, int(getattr(config, "grad_summary_every", 100))),
        zero_grad_patience=int(getattr(config, "zero_grad_patience", 100)),
        warn_no_densify_after=int(getattr(config, "warn_no_densify_after", 3)),
        rng_seed=42 if seed is None else int(seed),
        log=log,
    )
    strategy_name = getattr(config, "strategy", "default")
    if strategy_name == "mcmc":
        return InstrumentedMCMCStrategy(
            cap_max=int(getattr(config, "mcmc_cap_max", 1_000_000)),
            noise_lr=float(getattr(config, "mcmc_noise_lr", 5e5)),
            refine_start_iter=config.warmup_length,
            refine_stop_iter=config.stop_split_at,
            refine_every=config.refine_every,
            min_opacity=float(getattr(config, "mcmc_min_opacity", 0.005)),
            verbose=False,
            **common,
        )
    if strategy_name != "default":
        raise ValueError(f"unknown densification strategy {strategy_name!r}: use 'default' or 'mcmc'")
    return InstrumentedDefaultStrategy(
        prune_opa=config.cull_alpha_thresh,
        grow_grad2d=config.densify_grad_thresh,
        grow_scale3d=config.densify_size_thresh,
        grow_scale2d=config.split_screen_size,
        prune_scale3d=config.cull_scale_thresh,
        prune_scale2d=config.cull_screen_size,
        refine_scale2d_stop_iter=config.stop_screen_size_at,
        refine_start_iter=config.warmup_length,
        refine_stop_iter=config.stop_split_at,
        reset_every=config.reset_alpha_every * config.refine_every,
        refine_every=config.refine_every,
        # one epoch of images after a reset; on W ranks an epoch takes num_train_data / W steps
        pause_refine_after_reset=distributed.scaled_steps(num_train_data, distributed.get_world_size()) + config.refine_every,
        absgrad=config.use_absgrad,
        revised_opacity=False,
        verbose=False,
        **common,
    )


def attach_to_trainer(trainer) -> None:
    """Point the model's densification log at the run directory and the viewer panel, and write
    the ``start`` record (settings of the strategy). Called from ``SplatPlusTrainer.setup``."""
    model = trainer.pipeline.model
    strategy = getattr(model, "strategy", None)
    log = getattr(strategy, "log", None)
    if not isinstance(log, DensificationLog):
        return
    log.set_run_dir(trainer.base_dir)
    log.load_configured_callbacks()  # a wrong 'pkg.module:function' fails here, before step 0
    panel = getattr(trainer, "health_panel", None)
    if panel is not None:
        if hasattr(panel, "on_refine"):
            log.add_callback(panel.on_refine, events=["refine"])
        if hasattr(panel, "on_gradient_summary"):
            log.add_callback(panel.on_gradient_summary, events=["gradient_summary"])
    if strategy.instrumentation:
        settings = {
            k: getattr(strategy, k)
            for k in (
                "grow_grad2d", "grow_scale3d", "prune_opa", "refine_start_iter", "refine_stop_iter", "refine_every",
                "reset_every", "absgrad", "cap_max", "noise_lr", "min_opacity",
            )
            if hasattr(strategy, k)
        }
        log.emit(
            {
                "step": int(getattr(trainer, "_start_step", 0)), "event": "start",
                "strategy": "mcmc" if isinstance(strategy, MCMCStrategy) else "default",
                "num_gaussians": int(model.num_points), "world_size": world()[1], "settings": settings,
                "zero_grad_patience": strategy.zero_grad_patience, "grad_summary_every": strategy.grad_summary_every,
            }
        )


# --- optimizer-step checks ----------------------------------------------------------------------------


class CheckedOptimizers(Optimizers):
    """nerfstudio's ``Optimizers`` that stop training on non-finite gradients or parameters.

    Before each optimizer step the max-abs of every gradient about to be stepped is taken in one
    fused kernel (``torch._foreach_norm(ord=inf)``: NaN and Inf propagate, finite values cannot
    overflow). On the CPU the maxima and the parameter values are checked at once and a bad step
    never happens. On CUDA the maxima stay on the device, one row per step, and the host reads
    ``check_every`` rows at a time together with the max-abs of the parameter values (no per-step
    synchronisation): the error names the step and the parameter, at most ``check_every`` steps
    after it. :meth:`resolve_pending` reads what is pending (the trainer calls it before each
    checkpoint and after the last step). Hook order in ``optimizer_scaler_step_some``: gradient
    averaging across ranks first, then the check, then the step.
    """

    def __init__(
        self,
        config: Dict[str, Any],
        param_groups: Dict[str, List[torch.nn.Parameter]],
        check_finite: bool = True,
        step_source: Optional[Callable[[], int]] = None,
        check_every: int = 25,
    ) -> None:
        super().__init__(config, param_groups)
        self.check_finite = check_finite
        self.step_source = step_source
        self.check_every = max(1, int(check_every))
        self._rows: Optional[Tensor] = None  # [check_every, gradients] max-abs per step, on the device
        self._row_steps: List[int] = []
        self._row_names: List[str] = []  # the gradients, in row order
        self._checked_groups: List[str] = []  # whose values the next read checks

    def optimizer_scaler_step_some(self, grad_scaler, param_groups: List[str]) -> None:
        # gradient averaging across ranks (distributed.py) goes first, so that the check sees the averaged gradients.
        # The optimizers' own param_groups, not self.parameters: densification replaces the Parameters there.
        distributed.average_gradients(
            p for group in param_groups for g in self.optimizers[group].param_groups for p in g["params"]
        )
        if self.check_finite:
            self.check_step(param_groups, check_grads=not grad_scaler.is_enabled())
        super().optimizer_scaler_step_some(grad_scaler, param_groups)

    def _current_step(self) -> int:
        return int(self.step_source()) if self.step_source is not None else -1

    def _named(self, param_groups: List[str]) -> List[Tuple[str, Tensor]]:
        named = []
        for group in param_groups:
            params = [p for g in self.optimizers[group].param_groups for p in g["params"]]
            named += [(group if len(params) == 1 else f"{group}[{i}]", p) for i, p in enumerate(params) if p.numel() > 0]
        return named

    @torch.no_grad()
    def check_step(self, param_groups: List[str], check_grads: bool = True) -> None:
        """Check (CPU) or record (CUDA) the gradients of the groups about to be stepped (see the class doc)."""
        step = self._current_step()
        named = self._named(param_groups)
        grads = [(name, p.grad) for name, p in named if check_grads and p.grad is not None]
        if not named:
            return
        if named[0][1].device.type != "cuda" or len({p.device for _, p in named}) > 1:
            names = [f"gradient of '{n}'" for n, _ in grads] + [f"values of '{n}'" for n, _ in named]
            tensors = [g for _, g in grads] + [p for _, p in named]
            maxima = [torch.linalg.vector_norm(t, float("inf")).item() for t in tensors]
            self._raise_if_bad(f"step {step}, before its optimizer step", names, [math.isfinite(m) for m in maxima])
            return
        names = [f"gradient of '{n}'" for n, _ in grads]
        new_layout = names != self._row_names or (names and self._rows.shape != (self.check_every, len(names)))
        if new_layout:
            self.resolve_pending()  # another set of gradients: read the rows of the old one first
            self._row_names = names
            self._rows = torch.empty((self.check_every, len(names)), device=named[0][1].device) if names else None
        self._checked_groups = list(param_groups)
        if names:
            torch.stack(torch._foreach_norm([g for _, g in grads], float("inf")), out=self._rows[len(self._row_steps)])
        self._row_steps.append(step)
        if len(self._row_steps) >= self.check_every:
            self.resolve_pending()

    @torch.no_grad()
    def resolve_pending(self) -> None:
        """Read the recorded gradient maxima and the current parameter values; raise on a non-finite one."""
        steps, self._row_steps = self._row_steps, []
        if not steps:
            return
        now = self._current_step()
        if self._rows is not None and self._row_names:
            for step, row in zip(steps, self._rows[: len(steps)].tolist()):  # the one transfer
                when = f"step {step} (read at step {now}: on the GPU the checks are read every {self.check_every} steps)"
                self._raise_if_bad(when, self._row_names, [math.isfinite(m) for m in row])
        named = self._named(self._checked_groups)
        if named:
            maxima = torch.stack(torch._foreach_norm([p for _, p in named], float("inf"))).tolist()
            names = [f"values of '{n}'" for n, _ in named]
            when = f"step {steps[-1]} (values read after steps {steps[0]}-{steps[-1]})"
            self._raise_if_bad(when, names, [math.isfinite(m) for m in maxima])

    def discard_pending(self) -> None:
        self._row_steps = []

    def _raise_if_bad(self, when: str, names: List[str], ok: List[bool]) -> None:
        if all(ok):
            return
        bad = [n for n, flag in zip(names, ok) if not flag]
        grads = [n for n in names if n.startswith("gradient")]
        bad_grads = [n for n in bad if n.startswith("gradient")]
        message = f"Training stopped at {when}: non-finite values (NaN or Inf) in " + ", ".join(bad) + "."
        if grads and len(bad_grads) == len(grads):
            message += " Every gradient is non-finite: the loss itself was most likely NaN or Inf."
        message += (
            "\nLikely causes:\n  - a NaN/Inf written into a parameter (custom code, a corrupt checkpoint)"
            "\n  - a learning rate too high for this scene (--optimizers.<group>.optimizer.lr)"
            "\n  - an input image or mask with NaN/Inf pixels, or a degenerate camera (zero focal length, NaN pose)"
        )
        if world()[0] == 0:
            CONSOLE.print(f"[red]{message}[/red]")
        raise TrainingHealthError(message)
