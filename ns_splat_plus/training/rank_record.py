"""Per-rank start-up record: ``<run>/ranks/startup_rank<r>.json`` (:class:`StartupRecorder`).

What each rank spent from process start to the end of its first training step, in parts (imports up to
the plugin's; the command line; the device and process group; nerfstudio's trainer set-up; dataset parsing;
model; the rest of set-up; image decoding; checks; warmup; the loop's set-up; the viewer's scene; the first
step), the images it holds (count, bytes, decoding seconds: see ``SplatPlusDataManager.image_record``), its
resident memory, and the eval images it scored per evaluation. Written after the first step and after each
all-images evaluation; read by ``scripts/startup_parts.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import ns_splat_plus
from ns_splat_plus.parallel import collectives
from ns_splat_plus.training.warmup import in_warmup
from ns_splat_plus.upstream import TrainerLike

PARTS = (
    ("imports", "process_start", "plugin_imported"),  # python, torch, nerfstudio: up to its plugin discovery
    ("command_line", "plugin_imported", "trainer_init"),  # nerfstudio's method list, tyro, the config printed and saved
    ("device", "trainer_init", "device_ready"),  # this rank's device (the CUDA context) and process group
    ("trainer_setup", "device_ready", "dataset_parse_start"),  # nerfstudio's Trainer, up to the dataparser
    ("dataset_parse", "dataset_parse_start", "dataset_parse_end"),
    ("model_init", "dataset_parse_end", "model_built"),
    ("other_setup", "model_built", "decode_start"),
    ("image_decode", "decode_start", "decode_end"),
    ("checks", "decode_end", "preload_wait_start"),
    ("preload_wait", "preload_wait_start", "warmup_start"),  # the GPU preload's rest (training/gpu_preload.py)
    ("warmup", "warmup_start", "warmup_end"),
    ("loop_setup", "warmup_end", "viewer_scene_start"),  # the CUDA graph's set-up, dataparser_transforms.json
    ("viewer_scene", "viewer_scene_start", "loop_ready"),  # the viewer's scene with its camera pictures
    ("loop_start", "loop_ready", "first_step_start"),  # --start-paused waits here
    ("first_step", "first_step_start", "first_step_end"),
)
"""(part, from mark, to mark): consecutive, so the parts add up to process start -> first step end."""


def mark_startup(trainer: TrainerLike, name: str, at: Optional[float] = None) -> None:
    """Mark ``name`` at ``at`` (wall clock; default now) in the start-up record of ``trainer``'s pipeline,
    where it keeps one: marks taken before the pipeline existed are passed with their time."""
    recorder = getattr(trainer.pipeline, "startup", None)
    if isinstance(recorder, StartupRecorder):
        recorder.mark(name, at)


def note_startup(trainer: TrainerLike, name: str, value: Any) -> None:
    """Keep ``value`` (JSON) under ``name`` in the start-up record of ``trainer``'s pipeline, where it keeps one."""
    recorder = getattr(trainer.pipeline, "startup", None)
    if isinstance(recorder, StartupRecorder):
        recorder.notes[name] = value


def _process_start() -> Optional[float]:
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 (psutil missing or no permission)
        return None


def _memory() -> Dict[str, Optional[int]]:
    out: Dict[str, Optional[int]] = {"rss_bytes": None, "peak_rss_bytes": None}
    try:
        import psutil

        out["rss_bytes"] = int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001
        pass
    try:
        import resource

        out["peak_rss_bytes"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux
    except Exception:  # noqa: BLE001 (not on Windows)
        pass
    return out


class StartupRecorder:
    """Marks (wall-clock times) of a rank's start-up, and its record file; built by the pipeline."""

    def __init__(self, datamanager) -> None:
        self.datamanager = datamanager
        self.marks: Dict[str, Optional[float]] = {
            "process_start": _process_start(),
            "plugin_imported": ns_splat_plus.IMPORTED_AT,
        }
        self.marks.update(getattr(datamanager, "startup_times", {}))
        self.evaluations: List[int] = []
        self.notes: Dict[str, Any] = {}  # note_startup: e.g. the GPU preload's tasks and their seconds
        self.memory_at_first_step: Optional[Dict[str, Optional[int]]] = None
        self.trainer: Optional[TrainerLike] = None

    def mark(self, name: str, at: Optional[float] = None) -> None:
        self.marks.setdefault(name, time.time() if at is None else at)

    def callbacks(self, trainer: TrainerLike) -> list:
        from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

        self.trainer = trainer
        return [
            TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], self._before_step),
            TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], self._after_step),
        ]

    def _in_warmup(self) -> bool:
        assert self.trainer is not None, "callbacks() sets the trainer before any step"
        return in_warmup(self.trainer)

    def _before_step(self, step: int) -> None:
        if "first_step_start" in self.marks:  # warmup_start / warmup_end: marked by the trainer around the warmup
            return
        if not self._in_warmup():
            self.mark("first_step_start")

    def _after_step(self, step: int) -> None:
        if "first_step_start" in self.marks and "first_step_end" not in self.marks:
            self.mark("first_step_end")
            self.memory_at_first_step = _memory()
            self.write()

    def evaluated(self, scored: Optional[int]) -> None:
        """An all-images evaluation scored ``scored`` images on this rank."""
        self.evaluations.append(int(scored or 0))
        if "first_step_end" in self.marks:
            self.write()

    def as_dict(self) -> Dict[str, Any]:
        images = dict(getattr(self.datamanager, "image_record", {}) or {})
        marks = dict(self.marks)
        train, evals = images.get("train") or {}, images.get("eval") or {}
        if train:
            marks.setdefault("decode_start", train.get("started_at"))
            ends = [r["started_at"] + r["decode_seconds"] for r in (train, evals) if r]
            marks.setdefault("decode_end", max(ends))
        parts = {}
        for name, start, end in PARTS:
            started, ended = marks.get(start), marks.get(end)
            if started is not None and ended is not None:
                parts[name] = ended - started
        total = None
        process_start, first_step_end = marks.get("process_start"), marks.get("first_step_end")
        if process_start is not None and first_step_end is not None:
            total = first_step_end - process_start
        return {
            "rank": collectives.get_rank(),
            "world_size": collectives.get_world_size(),
            "seconds_to_first_step_end": total,
            "parts_seconds": parts,
            "marks": marks,
            "images": images,
            **self.notes,
            "memory_at_first_step": self.memory_at_first_step,
            "memory": _memory(),
            "eval_images_scored": self.evaluations,
        }

    def write(self) -> Optional[Path]:
        base_dir = getattr(self.trainer, "base_dir", None)
        if base_dir is None:
            return None
        path = Path(base_dir) / "ranks" / f"startup_rank{collectives.get_rank()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_dict(), indent=2))
        return path
