"""Which photos a run trained and held out, and in which frame: recorded in its checkpoints, compared later.

nerfstudio's dataparsers normalise the poses over the photos they find (centre, orientation, scale) and split
train from eval by position in that list. Photos added to or removed from the dataset folder after training
therefore move every camera into another frame and re-split the photos, without a word: a ``--load-dir`` resume
then trains the checkpoint's Gaussians in another frame, and ``ns-eval`` may score a training photo as held out.

The record (:func:`photo_record_of`, stored in the checkpoint's run info by ``checkpoint.run_info``) holds the
train and eval photo names (relative to the dataset folder, sorted), which eval split they are, and the
dataparser's transform and scale. :func:`compare` (and :func:`dataset_changes`, its lines) says what differs now;
:func:`resume_warning` and :func:`evaluation_warning` say what that means. Checkpoints without a record (written
before it existed) compare as unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ns_splat_plus import upstream

RECORD_KEY = "photos"
"""The record's key in the checkpoint's run info (``checkpoint.RUN_INFO_KEY``)."""
TRANSFORM_TOL = 1e-4
"""Largest difference of a transform entry (relative above 1) or of the scale (relative) that counts as the same."""
NAMES_SHOWN = 5
"""Photo names a message lists before "and N more"."""
SAME_EVAL_SPLIT = "val/test"
"""The eval split of a dataparser that holds out the same photos for val and test (those with an ``eval_mode``)."""


# --- the record -------------------------------------------------------------------------------------


def relative_names(paths: Sequence[Any], data: Optional[Path]) -> List[str]:
    """``paths`` as names relative to the dataset folder ``data`` (its folder, where ``data`` is a file such as
    transforms.json), or to the paths' common folder where some lie outside it; absolute paths are not compared,
    so that the same dataset read from another place (a relative ``--data``, a copied folder) records the same."""
    absolute = [os.path.abspath(p) for p in paths]
    base = None
    if data is not None:
        folder = os.path.abspath(data)
        base = folder if not os.path.isfile(folder) else os.path.dirname(folder)
        if not all(p.startswith(base.rstrip(os.sep) + os.sep) for p in absolute):
            base = None
    if base is None and absolute:
        base = os.path.commonpath(absolute)
        if len(absolute) == 1 or base in absolute:
            base = os.path.dirname(base)
    return sorted(Path(os.path.relpath(p, base)).as_posix() for p in absolute)


def photo_record(
    train_outputs: Any, eval_outputs: Any, data: Optional[Path], eval_split: Optional[str]
) -> Dict[str, Any]:
    """The record of two dataparser outputs (nerfstudio ``DataparserOutputs``: ``image_filenames``,
    ``dataparser_transform`` [3, 4], ``dataparser_scale``): plain lists, strings and floats (weights_only-safe)."""
    transform = getattr(train_outputs, "dataparser_transform", None)
    return {
        "train": relative_names(train_outputs.image_filenames, data),
        "eval": relative_names(eval_outputs.image_filenames, data),
        "eval_split": eval_split,
        "transform": None if transform is None else [[float(x) for x in row] for row in transform.tolist()],
        "scale": float(getattr(train_outputs, "dataparser_scale", 1.0)),
    }


def eval_split_of(datamanager: Any) -> Optional[str]:
    """Which eval split ``datamanager`` holds: ``val`` in training, ``test`` in ns-eval; one name for both
    (:data:`SAME_EVAL_SPLIT`) where the dataparser holds out the same photos for each (an ``eval_mode`` option:
    colmap, nerfstudio-data), so that ns-eval's test split compares with the training's val split."""
    if hasattr(getattr(datamanager.config, "dataparser", None), "eval_mode"):
        return SAME_EVAL_SPLIT
    return getattr(datamanager, "test_split", None)


def photo_record_of(datamanager: Any) -> Optional[Dict[str, Any]]:
    """The record of a FullImageDatamanager's two splits; None where it holds no datasets."""
    train_outputs = getattr(datamanager, "train_dataparser_outputs", None)
    eval_dataset = getattr(datamanager, "eval_dataset", None)
    if train_outputs is None or eval_dataset is None:
        return None
    config = datamanager.config
    data = getattr(config, "data", None) or getattr(getattr(config, "dataparser", None), "data", None)
    return photo_record(train_outputs, upstream.dataparser_outputs(eval_dataset), data, eval_split_of(datamanager))


# --- the comparison ---------------------------------------------------------------------------------


def named(names: Iterable[str], limit: int = NAMES_SHOWN) -> str:
    """'a.png, b.png' or, beyond ``limit`` names, 'a.png, ... e.png and 3 more'."""
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@dataclass
class DatasetChanges:
    """What differs between a run's record and the dataset now (photo names sorted)."""

    removed: List[str] = field(default_factory=list)
    """Photos of the run (either split) that the dataset no longer holds."""
    added: List[str] = field(default_factory=list)
    """Photos the run did not have."""
    trained_now_eval: List[str] = field(default_factory=list)
    """Training photos of the run that are in the eval split now: scoring them is not a held-out score."""
    eval_now_trained: List[str] = field(default_factory=list)
    """Held-out photos of the run that are training photos now."""
    frame: Optional[str] = None
    """How the dataparser's pose normalisation (transform, scale) changed; None where it did not."""

    def __bool__(self) -> bool:
        return bool(self.removed or self.added or self.trained_now_eval or self.eval_now_trained or self.frame)

    def lines(self) -> List[str]:
        out = []
        if self.removed:
            out.append(f"{len(self.removed)} photo(s) removed since training: {named(self.removed)}")
        if self.added:
            out.append(f"{len(self.added)} photo(s) added since training: {named(self.added)}")
        if self.trained_now_eval:
            out.append(
                f"{len(self.trained_now_eval)} training photo(s) now in the eval split: {named(self.trained_now_eval)}"
            )
        if self.eval_now_trained:
            out.append(
                f"{len(self.eval_now_trained)} held-out photo(s) now in the training split: "
                f"{named(self.eval_now_trained)}"
            )
        if self.frame:
            out.append(self.frame)
        return out


def _frame_change(saved: Dict[str, Any], now: Dict[str, Any], tol: float) -> Optional[str]:
    old_t, new_t = saved.get("transform"), now.get("transform")
    moved = 0.0
    if old_t is not None and new_t is not None:
        old_flat = [float(x) for row in old_t for x in row]
        new_flat = [float(x) for row in new_t for x in row]
        if len(old_flat) != len(new_flat):
            moved = float("inf")
        else:
            moved = max((abs(a - b) / max(1.0, abs(a), abs(b)) for a, b in zip(old_flat, new_flat)), default=0.0)
    old_s, new_s = float(saved.get("scale", 1.0)), float(now.get("scale", 1.0))
    scale_moved = abs(old_s - new_s) / max(abs(old_s), abs(new_s), 1e-12)
    if moved <= tol and scale_moved <= tol:
        return None
    parts = []
    if moved > tol:
        parts.append("its transform differs" + (f" by up to {moved:.3g}" if moved != float("inf") else ""))
    if scale_moved > tol:
        parts.append(f"its scale is {new_s:.6g}, was {old_s:.6g}")
    return "the dataparser's pose normalisation changed (" + "; ".join(parts) + ")"


def compare(
    saved: Optional[Dict[str, Any]], now: Optional[Dict[str, Any]], tol: float = TRANSFORM_TOL
) -> DatasetChanges:
    """What differs between the record ``saved`` (a checkpoint's) and ``now``; nothing where either is missing.

    Eval photos are compared only where both records hold the same eval split (:func:`eval_split_of`: a
    dataparser with separate val and test files has other photos in ns-eval's test split)."""
    if not saved or not now:
        return DatasetChanges()
    saved_train, now_train = set(saved.get("train") or ()), set(now.get("train") or ())
    saved_eval, now_eval = set(saved.get("eval") or ()), set(now.get("eval") or ())
    same_split = saved.get("eval_split") == now.get("eval_split")
    saved_all = saved_train | (saved_eval if same_split else set())
    now_all = (now_train | now_eval) if same_split else now_train
    return DatasetChanges(
        removed=sorted(saved_all - now_all - now_eval),  # a training photo now held out is not removed
        added=sorted(now_all - saved_all - saved_eval),  # nor a photo held out then that trains now
        trained_now_eval=sorted((now_eval & saved_train) - (saved_eval if same_split else set())),
        eval_now_trained=sorted((now_train & saved_eval) - saved_train),
        frame=_frame_change(saved, now, tol),
    )


def changes_since(run_info: Dict[str, Any], datamanager: Any) -> DatasetChanges:
    """What differs between the record in a checkpoint's ``run_info`` and ``datamanager``'s photos now (resume,
    ns-eval and the other loaders of a trained run)."""
    return compare(run_info.get(RECORD_KEY), photo_record_of(datamanager))


def dataset_changes(saved: Optional[Dict[str, Any]], now: Optional[Dict[str, Any]]) -> List[str]:
    """The differences between a run's record and the dataset now, one line each (empty: none, or no record)."""
    return compare(saved, now).lines()


# --- what the differences mean ------------------------------------------------------------------------


def resume_warning(changes: DatasetChanges, checkpoint: Any) -> Optional[str]:
    """The warning of a resume from ``checkpoint`` on a dataset that changed since that run; None if unchanged."""
    if not changes:
        return None
    meaning = []
    if changes.frame or changes.removed or changes.added:
        meaning.append(
            "the dataparser normalised the poses over the photos there now, so the resumed run trains the "
            "checkpoint's Gaussians in another coordinate frame"
        )
    if changes.trained_now_eval or changes.eval_now_trained:
        meaning.append("the train/eval split is not the one the checkpoint trained on")
    return (
        f"Resuming {checkpoint} on a dataset that changed since that run trained: "
        + "; ".join(changes.lines())
        + ". This means "
        + ", and ".join(meaning)
        + ". Put the photos back as they were, or start a new run."
    )


def evaluation_warning(changes: DatasetChanges) -> Optional[str]:
    """The warning of ns-eval (any loading of a trained run) on a dataset that changed since; None if unchanged."""
    if not changes:
        return None
    meaning = []
    if changes.trained_now_eval:
        meaning.append(
            f"{named(changes.trained_now_eval)} trained the model, so a score over the eval split is not a "
            "held-out score"
        )
    if changes.frame or changes.removed or changes.added:
        meaning.append(
            "the poses are normalised over the photos there now, so the cameras are in another frame than the "
            "trained Gaussians and the renders do not match the photos"
        )
    if changes.eval_now_trained and not meaning:
        meaning.append("the eval split is not the one held out in training")
    return (
        "The dataset changed since this run trained: "
        + "; ".join(changes.lines())
        + ". This means "
        + ", and ".join(meaning)
        + ". Put the photos back as they were when the run trained, or train a new run on this dataset."
    )
