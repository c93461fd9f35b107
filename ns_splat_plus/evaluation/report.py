"""Per-image metrics of one pass over the eval split, and ns-eval's JSON shape: :class:`EvalReport`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

# Metrics nerfstudio's ns-eval reports (mean and, with get_std, <name>_std), in its order.
NS_EVAL_METRICS = ("psnr", "ssim", "lpips", "num_rays_per_sec", "fps")
COMPUTED_ON = "computed_on"
"""A per-image record's key for where its SSIM and LPIPS ran: ``{"ssim": "whole" | "strips" | "host", ...}``."""
PLACE_WORDS = {"strips": "in row strips on the GPU", "host": "on the host"}


def mean_and_std(values: Sequence[Optional[float]]) -> Tuple[Optional[float], Optional[float]]:
    """Mean and (unbiased, as nerfstudio's torch.std_mean) std of the non-None values.

    None when no value is available (LPIPS offline) or, for the std, fewer than two values:
    never 0 and never NaN (NaN is not valid JSON).
    """
    present = [float(v) for v in values if v is not None]
    if not present:
        return None, None
    mean = sum(present) / len(present)
    if len(present) < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in present) / (len(present) - 1)
    return mean, math.sqrt(var)


def scalar_metrics(metrics: Dict[str, Any]) -> Dict[str, float]:
    """The entries a writer can log: numbers only (LPIPS None is left out, not logged as 0)."""
    out = {}
    for key, value in metrics.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
            out[key] = float(value)
    return out


def metrics_summary(averages: Dict[str, Optional[float]], num_images: int, held_out: bool) -> str:
    """ns-eval's one console line, e.g. 'PSNR 21.30 dB, SSIM 0.710, LPIPS n/a on 3 held-out images'."""

    def number(key: str, spec: str, unit: str = "") -> str:
        value = averages.get(key)
        return "n/a" if value is None else f"{value:{spec}}{unit}"

    kind = "held-out" if held_out else "NOT held-out"
    images = "image" if num_images == 1 else "images"
    return (
        f"PSNR {number('psnr', '.2f', ' dB')}, SSIM {number('ssim', '.3f')}, LPIPS {number('lpips', '.3f')} "
        f"on {num_images} {kind} {images}"
    )


def places_count(per_image: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """How many images had each metric computed where: ``{"ssim": {"whole": 7, "strips": 2}, ...}``."""
    counts: Dict[str, Dict[str, int]] = {}
    for record in per_image:
        for metric, place in (record.get(COMPUTED_ON) or {}).items():
            counts.setdefault(metric, {}).setdefault(place, 0)
            counts[metric][place] += 1
    return counts


def places_summary(counts: Dict[str, Dict[str, int]], num_images: int, limit_mib: Optional[float]) -> Optional[str]:
    """ns-eval's console line for metrics that did not run on the whole image at once, e.g. 'SSIM and LPIPS
    in row strips on the GPU for 9 of 9 images (within the training peak, 532.6 MiB)'; None when every
    metric ran whole."""
    metrics_by_place: Dict[Tuple[str, int], List[str]] = {}
    for metric, places in counts.items():
        for place, n in places.items():
            if place in PLACE_WORDS:
                metrics_by_place.setdefault((place, n), []).append(metric.upper())
    if not metrics_by_place:
        return None
    images = "image" if num_images == 1 else "images"
    parts = [
        f"{' and '.join(names)} {PLACE_WORDS[place]} for {n} of {num_images} {images}"
        for (place, n), names in metrics_by_place.items()
    ]
    within = f" (within the training peak, {limit_mib:.1f} MiB)" if limit_mib else ""
    return ", ".join(parts) + within


@dataclass
class EvalReport:
    """Per-image metrics of one pass over the eval split, and what they were computed on."""

    per_image: List[Dict[str, Any]]
    split: Dict[str, Any]
    num_gaussians: Optional[int]
    memory: Dict[str, Any] = field(default_factory=dict)
    scored_here: Optional[int] = None  # images this rank rendered (its share on several ranks)

    def averages(self, get_std: bool) -> Dict[str, Optional[float]]:
        """nerfstudio's shape: psnr, ssim, lpips, num_rays_per_sec, fps (+ ``_std`` with get_std)."""
        keys = [k for k in NS_EVAL_METRICS if any(k in m for m in self.per_image)]
        keys += sorted({k for m in self.per_image for k in m} - set(keys) - {"image", "index", COMPUTED_ON})
        out: Dict[str, Optional[float]] = {}
        for key in keys:
            mean, std = mean_and_std([m.get(key) for m in self.per_image])
            out[key] = mean
            if get_std:
                out[f"{key}_std"] = std
        return out

    def ns_eval_results(self) -> Dict[str, Any]:
        """``results`` of ns-eval's JSON: nerfstudio's keys, then what splat-plus adds."""
        return {
            **self.averages(get_std=True),
            "lpips_available": any(m.get("lpips") is not None for m in self.per_image),
            "num_images": len(self.per_image),
            "num_gaussians": self.num_gaussians,
            "split": self.split,
            "memory": self.memory,
            "metrics_computed_on": places_count(self.per_image),
            "per_image": self.per_image,
        }
