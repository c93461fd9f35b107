"""Evaluation that never needs more memory than training.

Entry points: :func:`evaluate_all_images` / :func:`evaluate_one_image` (streamed, no autograd),
:func:`memory_tracker` (train and eval peaks kept apart), :func:`describe_split` (which images,
held out or not), :class:`EvalReport` (ns-eval's JSON).
"""

from ns_splat_plus.evaluation.memory import MIB, PeakMemoryTracker, memory_tracker
from ns_splat_plus.evaluation.report import (
    NS_EVAL_METRICS,
    EvalReport,
    mean_and_std,
    metrics_summary,
    places_count,
    places_summary,
    scalar_metrics,
)
from ns_splat_plus.evaluation.split import describe_split, split_summary
from ns_splat_plus.evaluation.streamed import (
    eval_camera_and_batch,
    evaluate_all_images,
    evaluate_one_image,
    next_eval_index,
)

__all__ = [
    "MIB",
    "NS_EVAL_METRICS",
    "EvalReport",
    "PeakMemoryTracker",
    "describe_split",
    "eval_camera_and_batch",
    "evaluate_all_images",
    "evaluate_one_image",
    "mean_and_std",
    "memory_tracker",
    "next_eval_index",
    "scalar_metrics",
    "split_summary",
    "metrics_summary",
    "places_count",
    "places_summary",
]
