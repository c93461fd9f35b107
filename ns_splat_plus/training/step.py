"""The one training step of splat-plus: :func:`run_training_step`.

Used by the training loop (:mod:`ns_splat_plus.training.loop`), the warmup before step 0 and the
step profiler, so that all three run exactly the same work: the before-iteration callbacks, the
trainer's ``train_iteration`` (this rank's camera, render, loss, backward, gradients averaged
across ranks, the finiteness gate, one optimizer update) and the after-iteration callbacks
(densification, replica checks). The caller holds ``trainer.train_lock`` (the viewer renders
between steps, never inside one).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from nerfstudio.engine.callbacks import TrainingCallbackLocation


def run_training_step(trainer: Any, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
    """One training step at ``step``; returns nerfstudio's ``(loss, loss_dict, metrics_dict)``."""
    trainer.step = step
    trainer.pipeline.train()
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    loss, loss_dict, metrics_dict = trainer.train_iteration(step)
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
    return loss, loss_dict, metrics_dict
