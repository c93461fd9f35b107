"""Which images an evaluation scored, and whether they are held out: :func:`describe_split`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from ns_splat_plus import upstream


def describe_split(datamanager) -> Dict[str, Any]:
    """How the evaluated images were chosen: split name, counts, dataparser eval settings, file names.

    ``held_out`` is False when an eval image is also a training image (``eval_mode all``), in
    which case the metrics are not held-out metrics.
    """
    dataparser_config = datamanager.config.dataparser
    eval_outputs = upstream.dataparser_outputs(datamanager.eval_dataset)
    train_outputs = upstream.dataparser_outputs(datamanager.train_dataset)
    eval_names = [Path(p).name for p in eval_outputs.image_filenames]
    train_paths = {str(p) for p in train_outputs.image_filenames}
    overlap = sum(1 for p in eval_outputs.image_filenames if str(p) in train_paths)
    eval_mode = getattr(dataparser_config, "eval_mode", None)
    how = {"eval_mode": eval_mode}
    if eval_mode == "interval":
        how["eval_interval"] = getattr(dataparser_config, "eval_interval", None)
    elif eval_mode == "fraction":
        how["train_split_fraction"] = getattr(dataparser_config, "train_split_fraction", None)
    return {
        "split": getattr(datamanager, "test_split", None),
        "dataparser": type(dataparser_config).__name__,
        **how,
        "num_images": len(eval_names),
        "num_train_images": len(train_outputs.image_filenames),
        "held_out": overlap == 0,
        "num_eval_images_also_in_train": overlap,
        "image_filenames": eval_names,
    }


def split_summary(split: Dict[str, Any]) -> str:
    """One line for the console, e.g. '7 held-out images (val split, eval_mode interval, every 8th)'."""
    how = f"eval_mode {split['eval_mode']}"
    if split.get("eval_interval") is not None:
        how += f", every {split['eval_interval']}th"
    if split.get("train_split_fraction") is not None:
        how += f", train fraction {split['train_split_fraction']}"
    kind = "held-out" if split["held_out"] else "NOT held-out (also used for training)"
    return f"{split['num_images']} {kind} images ({split['split']} split, {how}; {split['num_train_images']} train)"
