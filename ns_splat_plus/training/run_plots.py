"""A picture of a finished run: ``<run>/training.png``, written by rank 0 at the end of training.

Entry points: :func:`write_run_plot` (the training loop calls it after the last step, before the viewer
may keep the process open), :func:`plot_run` (records and eval metrics to a PNG; no trainer needed),
:func:`read_records`, :func:`read_eval_metrics`.

What it shows, from ``densification.jsonl`` (strategy/records.py) and, when an event writer of
TensorBoard is on (``--vis tensorboard`` or ``viewer+tensorboard``), nerfstudio's in-training eval:

* the Gaussian count over the steps (every record that carries one);
* the counts of each refine (duplicated, split, pruned, relocated, added);
* the gradient statistics behind the refine decisions (``grad2d``: median, p90, p99, max and the
  threshold) and the per-step gradient norms (``gradient_summary``: mean and max), on a log scale;
* the held-out PSNR / SSIM / LPIPS over the steps (one image, and all images where evaluated).

matplotlib (a dependency of nerfstudio) draws it without pyplot, so no global backend is chosen; a
missing matplotlib or a failing plot costs one line on the console, never the run.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ns_splat_plus.strategy.records import JSONL_NAME

PLOT_NAME = "training.png"
REFINE_COUNTS = ("duplicated", "split", "pruned", "relocated", "added")
GRAD2D_KEYS = ("median", "p90", "p99", "max")
EVAL_TAGS = {
    "Eval Images Metrics Dict (all images)": "all eval images",
    "Eval Images Metrics": "one eval image",
}
"""nerfstudio's eval groups (Trainer.eval_iteration) -> the legend's name."""
EVAL_KEYS = ("psnr", "ssim", "lpips")
EVAL_COLOURS = {"psnr": "tab:blue", "ssim": "tab:green", "lpips": "tab:red"}

Series = List[Tuple[int, float]]


def read_records(path: Path) -> List[Dict[str, Any]]:
    """The records of a ``densification.jsonl`` (a line that is not JSON, e.g. cut by a full disk, is skipped)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), (int, float)):
            records.append(record)
    return records


def read_eval_metrics(run_dir: Path) -> Dict[str, Dict[str, Series]]:
    """{group name: {metric: [(step, value), ...]}} from the TensorBoard event files in ``run_dir``
    (empty without any, or without tensorboard)."""
    files = sorted(Path(run_dir).rglob("events.out.tfevents.*"))
    if not files:
        return {}
    try:
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError:
        return {}
    found: Dict[str, Dict[str, Dict[int, float]]] = {}
    wanted = tuple(tag.encode() for tag in EVAL_TAGS)
    for path in files:
        for event in _small_events(path, Event, wanted):
            for value in event.summary.value:
                group, _, key = value.tag.rpartition("/")
                if group not in EVAL_TAGS or key not in EVAL_KEYS:
                    continue
                number = _scalar(value)
                if number is not None:
                    found.setdefault(EVAL_TAGS[group], {}).setdefault(key, {})[int(event.step)] = number
    return {group: {key: sorted(points.items()) for key, points in metrics.items()} for group, metrics in found.items()}


SMALL_EVENT_BYTES = 1 << 16
"""Records larger than this (images) are skipped unread: scalar events are about a hundred bytes."""


def _small_events(path: Path, event_type: Any, containing: Sequence[bytes] = ()) -> Iterator[Any]:
    """The events of one TensorBoard event file (TFRecord framing: length [u64], its CRC [u32], the data,
    its CRC [u32]) whose record is at most :data:`SMALL_EVENT_BYTES`, parsed as ``event_type``;
    with ``containing``, only records whose bytes hold one of these strings (a tag is stored as its
    UTF-8 bytes): a 30,000-step run logs about 30,000 training scalars and a few dozen evaluations,
    and parsing only those took 0.33 -> 0.05 s on the 2-core machine.

    tensorboard's own reader checks every record's CRC in pure Python when TensorFlow is not
    installed, images included: 57 s for 30 eval images at 3000 x 1000 on the 2-core machine, 5.1 s
    at the end of a 1,000-step plush-dog run on the GPU machine. A plot needs neither the images nor
    the checks; a record cut short (a file still being written) ends the reading."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            if length > SMALL_EVENT_BYTES:
                f.seek(length + 4, os.SEEK_CUR)
                continue
            data = f.read(length + 4)[:length]
            if len(data) < length:
                return
            if containing and not any(text in data for text in containing):
                continue
            try:
                yield event_type.FromString(data)
            except Exception:  # noqa: BLE001 - a damaged record: the plot shows what came before it
                return


def _scalar(value: Any) -> Optional[float]:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.tensor.float_val:
        return float(value.tensor.float_val[0])
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def plot_run(
    records: Sequence[Mapping[str, Any]],
    out_path: Path,
    eval_metrics: Optional[Mapping[str, Mapping[str, Series]]] = None,
    title: str = "",
) -> Path:
    """Draw the run's records (and eval metrics) into ``out_path`` (PNG) and return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    eval_metrics = eval_metrics or {}
    figure = Figure(figsize=(12, 8), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 2, sharex=True)
    _plot_gaussians(axes[0][0], records)
    _plot_refines(axes[0][1], records)
    _plot_gradients(axes[1][0], records)
    _plot_eval(axes[1][1], eval_metrics)
    for ax in axes[1]:
        ax.set_xlabel("step")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    out_path = Path(out_path)
    figure.savefig(out_path, format="png")
    return out_path


def _note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey", wrap=True)


def _plot_gaussians(ax: Any, records: Sequence[Mapping[str, Any]]) -> None:
    points = sorted((int(r["step"]), r["num_gaussians"]) for r in records if _finite(r.get("num_gaussians")))
    ax.set_title("Gaussians")
    if not points:
        _note(ax, "no Gaussian count recorded")
        return
    steps, counts = zip(*points)
    ax.step(steps, counts, where="post", color="tab:blue")
    ax.set_ylim(bottom=0)


def _plot_refines(ax: Any, records: Sequence[Mapping[str, Any]]) -> None:
    refines = [r for r in records if r.get("event") == "refine"]
    ax.set_title(f"refine counts ({len(refines)} refines)")
    drawn = False
    for key in REFINE_COUNTS:
        points = [(int(r["step"]), r[key]) for r in refines if _finite(r.get(key))]
        if points and any(v for _, v in points):
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o", markersize=3, label=key)
            drawn = True
    if drawn:
        ax.legend(loc="best", fontsize="small")
    else:
        _note(ax, "no refine in this run" if not refines else "every refine changed nothing")


def _plot_gradients(ax: Any, records: Sequence[Mapping[str, Any]]) -> None:
    ax.set_title("gradients (screen-space means)")
    drawn = False
    grad2d = [(int(r["step"]), r["grad2d"]) for r in records if isinstance(r.get("grad2d"), Mapping)]
    for key in GRAD2D_KEYS + ("threshold",):
        points = [(s, g[key]) for s, g in grad2d if _finite(g.get(key)) and g[key] > 0]
        if points:
            steps, values = zip(*points)
            style = {"linestyle": "--", "color": "black"} if key == "threshold" else {"marker": "o", "markersize": 3}
            ax.plot(steps, values, label=f"refine {key}", **style)
            drawn = True
    summaries = [r for r in records if r.get("event") == "gradient_summary"]
    for key, label in (("norm_mean", "per-step norm, mean"), ("norm_max", "per-step norm, max")):
        points = [(int(r["step"]), r[key]) for r in summaries if _finite(r.get(key)) and r[key] > 0]
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, alpha=0.6, label=label)
            drawn = True
    if drawn:
        ax.set_yscale("log")
        ax.legend(loc="best", fontsize="small")
    else:
        _note(ax, "no gradient statistics recorded")


def _plot_eval(ax: Any, eval_metrics: Mapping[str, Mapping[str, Series]]) -> None:
    ax.set_title("held-out evaluation during training")
    if not any(eval_metrics.values()):
        _note(ax, "no in-training evaluation recorded\n(it is read from TensorBoard: --vis viewer+tensorboard)")
        return
    twin = None
    for number, (group, metrics) in enumerate(eval_metrics.items()):
        for key, points in metrics.items():
            if not points:
                continue
            steps, values = zip(*points)
            target = ax
            if key != "psnr":  # SSIM and LPIPS are in [0, 1]: their own axis
                twin = twin or ax.twinx()
                target = twin
            target.plot(steps, values, marker="os^"[number % 3], markersize=4, label=f"{key.upper()} ({group})",
                        color=EVAL_COLOURS.get(key), linestyle="-" if number == 0 else ":")  # fmt: skip
    ax.set_ylabel("PSNR (dB)")
    handles, labels = ax.get_legend_handles_labels()
    if twin is not None:
        twin.set_ylabel("SSIM / LPIPS")
        more = twin.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.legend(handles, labels, loc="best", fontsize="small")


def write_run_plot(run_dir: Path, event_writers: Sequence[Any] = ()) -> Optional[Path]:
    """Write ``<run_dir>/training.png`` and print one line saying where; None (and one line) when
    matplotlib is missing or the plot fails: the run itself is never affected. ``event_writers``
    (nerfstudio's ``writer.EVENT_WRITERS``) are flushed first, so that the last evaluations are read."""
    from nerfstudio.utils.rich_utils import CONSOLE

    run_dir = Path(run_dir)
    jsonl = run_dir / JSONL_NAME
    if not jsonl.is_file():
        return None  # --pipeline.model.instrumentation False: nothing recorded
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        CONSOLE.print(f"No {PLOT_NAME}: matplotlib is not installed (pip install matplotlib)", soft_wrap=True)
        return None
    for event_writer in event_writers:
        flush = getattr(getattr(event_writer, "tb_writer", None), "flush", None)
        if flush is not None:
            flush()
    try:
        path = plot_run(read_records(jsonl), run_dir / PLOT_NAME, read_eval_metrics(run_dir), title=run_dir.name)
    except Exception as err:  # noqa: BLE001 (a picture must never fail a finished run)
        CONSOLE.print(f"No {PLOT_NAME}: the plot failed ({type(err).__name__}: {err})", soft_wrap=True, markup=False)
        return None
    CONSOLE.print(f"Plot of the run: {path}", soft_wrap=True, markup=False)
    return path
