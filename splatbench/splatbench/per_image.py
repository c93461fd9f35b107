"""Held-out metrics image by image, for any nerfstudio method: recorded by the eval probe, shown in results.md.

Why: a run's PSNR is the mean over a few held-out images (nine on fox), and one view that goes wrong
moves it by most of a dB: the two lowest fast-preset runs on fox (29.44 and 29.97 dB) had a
per-image sd of 4.2 and 3.7 dB against 2.2-2.6 in the others. ns-eval's JSON keeps only the means
for splatfacto, so a low run could not be traced to a view. The probe records every image as the
model scores it, the same numbers ns-eval averages.

Entry points: :func:`record_per_image` (the eval probe wraps the loaded model with it),
:func:`per_image_table` (the report's table: each image's mean and lowest PSNR per method).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from splatbench.results import finite_or_none
from splatbench.stats import group_runs

PER_IMAGE_METRICS = ("psnr", "ssim", "lpips")
MAX_TABLE_IMAGES = 40
"""Images shown in results.md's table: the ones with the lowest mean PSNR; every image stays in results.json."""


def _number(value: Any) -> Optional[float]:
    if hasattr(value, "numel"):  # a tensor (torchmetrics' PSNR, LPIPS); the report side needs no torch
        value = value.item() if value.numel() == 1 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return finite_or_none(float(value))


def record_per_image(model, image_names: Sequence[str]) -> List[Dict[str, Any]]:
    """Wrap ``model.get_image_metrics_and_images`` on this instance (nothing in nerfstudio's classes
    changes) and return the list it fills: one ``{"index", "image", "psnr", "ssim", "lpips"}`` per
    call, in the order evaluation scored the images. Both nerfstudio's ``get_average_image_metrics``
    and splat-plus's evaluation call it once per eval image.

    Args:
        model: a nerfstudio model (splatfacto, splat-plus, ...), as ``eval_setup`` loaded it.
        image_names: the eval dataset's image file names, by the ``image_idx`` of each batch
            (without one, the call's position stands in for it).
    """
    records: List[Dict[str, Any]] = []
    score = model.get_image_metrics_and_images

    def scored(outputs, batch):
        metrics, images = score(outputs, batch)
        index = batch.get("image_idx") if isinstance(batch, dict) else None
        index = len(records) if index is None else int(index)
        name = Path(str(image_names[index])).name if 0 <= index < len(image_names) else None
        records.append({"index": index, "image": name, **{k: _number(metrics.get(k)) for k in PER_IMAGE_METRICS}})
        return metrics, images

    model.get_image_metrics_and_images = scored  # an instance attribute: only this loaded model records
    return records


def _psnr_by_image(runs: Sequence[Dict[str, Any]]) -> Dict[str, List[float]]:
    by_image: Dict[str, List[float]] = {}
    for r in runs:
        for entry in r.get("per_image") or []:
            if entry.get("image") is not None and entry.get("psnr") is not None:
                by_image.setdefault(entry["image"], []).append(float(entry["psnr"]))
    return by_image


def per_image_table(results: Dict[str, Any]) -> Optional[str]:
    """Each held-out image's PSNR per method and GPU count: the mean over that method's runs and, in
    brackets, its lowest run, over the successful runs that recorded images (their count in the
    header). Images by ascending mean over all those runs, at most :data:`MAX_TABLE_IMAGES`. None
    when no run recorded images."""
    groups = group_runs(r for r in results["runs"] if r.get("status") == "ok" and r.get("per_image"))
    if not groups:
        return None
    columns = [(key, _psnr_by_image(runs), len(runs)) for key, runs in groups.items()]
    everything = _psnr_by_image([r for runs in groups.values() for r in runs])
    images = sorted(everything, key=lambda name: (sum(everything[name]) / len(everything[name]), name))
    shown = images[:MAX_TABLE_IMAGES]
    multi_gpu = any(gpus > 1 for (_, gpus), _, _ in columns)
    header = (
        "| image | "
        + " | ".join(
            f"`{method}`" + (f" {gpus} GPUs" if multi_gpu else "") + f" ({n} runs)" for (method, gpus), _, n in columns
        )
        + " |"
    )
    lines = [header, "|---|" + "---|" * len(columns)]
    for name in shown:
        cells = [f"`{name}`"]
        for _, by_image, _ in columns:
            values = by_image.get(name)
            cells.append(f"{sum(values) / len(values):.2f} ({min(values):.2f})" if values else "–")
        lines.append("| " + " | ".join(cells) + " |")
    if len(images) > len(shown):
        lines.append(f"\n{len(images) - len(shown)} more images in results.json (`per_image` of each run).")
    return "\n".join(lines) + "\n"
