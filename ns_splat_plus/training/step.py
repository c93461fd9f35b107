"""The one training step of splat-plus: :func:`run_training_step` (and the warmup's forward and
backward alone at a later image size: :func:`run_forward_and_backward`).

Used by the training loop (:mod:`ns_splat_plus.training.loop`), the warmup before step 0 and the
step profiler, so that all three run exactly the same work: the before-iteration callbacks, the
trainer's ``train_iteration`` (:func:`optimize`: this rank's camera, render, loss, backward with
the gradients' all-reduces started from it (:mod:`ns_splat_plus.parallel.gradients`), their
averages awaited, the finiteness gate, one optimizer update) and the after-iteration callbacks
(densification, replica checks). The caller holds ``trainer.train_lock`` (the viewer renders
between steps, never inside one). A device out-of-memory error anywhere in the step becomes one
:class:`DeviceOutOfMemoryError` naming the Gaussian count, the image size and what to change
(:mod:`.oom`), in both.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from nerfstudio.engine.callbacks import TrainingCallbackLocation

from ns_splat_plus.errors import TrainingHealthError
from ns_splat_plus.parallel.config import data_parallel_of
from ns_splat_plus.upstream import TrainerLike


def run_training_step(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
    """One training step at ``step``; returns nerfstudio's ``(loss, loss_dict, metrics_dict)``."""
    return _memory_checked(trainer, step, _training_step)


def run_forward_and_backward(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Tuple[int, int]]:
    """The forward, loss and backward of a training step at ``step``'s resolution and SH degree, without
    the callbacks (no refine) or the optimizer update, neither of which depends on the image size: the
    warmup's pass at a later training size. Returns the loss and the rendered (H, W)."""
    return _memory_checked(
        trainer, step, _forward_and_backward, where=f"in the warmup's render at step {step}'s image size"
    )


def _memory_checked(
    trainer: TrainerLike, step: int, work: Callable[[TrainerLike, int], Any], where: Optional[str] = None
) -> Any:
    """``work(trainer, step)``, a device out-of-memory error in it raised as one message (:mod:`.oom`)."""
    from ns_splat_plus.training import oom

    failure = None
    try:
        return work(trainer, step)
    except torch.OutOfMemoryError as err:
        failure = str(err).splitlines()[0] if str(err) else "out of memory"
    # outside the except block: the traceback (and the step's tensors its frames hold) is gone
    raise oom.out_of_memory_error(trainer, step, failure, where=where)


def _forward_and_backward(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Tuple[int, int]]:
    model = trainer.pipeline.model
    trainer.pipeline.train()
    trainer.optimizers.zero_grad_some(list(trainer.optimizers.parameters))  # this pass's gradients alone
    model.step = step  # splatfacto's BEFORE_TRAIN_ITERATION callback sets it; it picks the resolution
    loss, _, _ = _forward_loss(trainer, step)
    trainer.grad_scaler.scale(loss).backward()
    height, width = model.last_size
    return loss, (int(height), int(width))


def _forward_loss(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
    """This step's camera, render and loss, under the trainer's autocast: ``(loss, loss_dict, metrics_dict)``.
    A loss that reaches no parameter stops here with a message naming the step (see :func:`optimize`)."""
    device_type = trainer.device.split(":")[0]
    device_type = "cpu" if device_type == "mps" else device_type
    with torch.autocast(device_type=device_type, enabled=trainer.mixed_precision):
        _, loss_dict, metrics_dict = trainer.pipeline.get_train_loss_dict(step=step)
        loss = total_loss(loss_dict, step)
    return loss, loss_dict, metrics_dict


def total_loss(loss_dict: Dict[str, torch.Tensor], step: int) -> torch.Tensor:
    """The sum of a step's losses; a sum that depends on no parameter (no Gaussian in view of the
    camera) stops training with a message naming the step."""
    loss = functools.reduce(torch.add, loss_dict.values())
    if not loss.requires_grad:
        raise _loss_reaches_no_parameter(step)
    return loss


def detached(values: Dict[str, Any]) -> Dict[str, Any]:
    """``values`` with each tensor detached from autograd (the writers read them as plain numbers; a caller
    that keeps them keeps no autograd graph)."""
    return {key: value.detach() if isinstance(value, torch.Tensor) else value for key, value in values.items()}


def step_schedulers(trainer: TrainerLike, step: int) -> None:
    """After the optimizer update: the gradient scaler's update, then the schedulers (skipped, as
    nerfstudio's, where the scaler lowered its scale: the update was skipped)."""
    scale = trainer.grad_scaler.get_scale()
    trainer.grad_scaler.update()
    if scale <= trainer.grad_scaler.get_scale():  # a decreased scale skipped the update: not the schedulers either
        trainer.optimizers.scheduler_step_all(step)


def _loss_reaches_no_parameter(step: int) -> TrainingHealthError:
    """The error of a step whose loss depends on no parameter (no Gaussian in view of its camera)."""
    return TrainingHealthError(
        f"Training stopped at step {step}: the loss depends on no parameter, so no Gaussian was in view of "
        "this step's camera. Likely causes:\n  - the Gaussians diverged (NaN/Inf or far away): a learning rate "
        "far too high (--optimizers.<group>.optimizer.lr)\n  - a NaN or degenerate camera pose in the dataset"
        "\n  - the scene scale or near plane puts every Gaussian outside the view"
    )


def _training_step(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
    trainer.step = step
    trainer.pipeline.train()
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    loss, loss_dict, metrics_dict = trainer.train_iteration(step)
    for callback in trainer.callbacks:
        callback.run_callback_at_location(step, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
    return loss, loss_dict, metrics_dict


def optimize(trainer: TrainerLike, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
    """nerfstudio 1.1.5's ``Trainer.train_iteration`` (zero gradients, forward, loss, backward, the
    optimizer update, the schedulers), plus one check: a loss that reaches no parameter (no Gaussian
    in view: a NaN camera pose, or Gaussians diverged to NaN / far away) stops with a message
    naming the step, instead of autograd's "element 0 of tensors does not require grad"."""
    from ns_splat_plus.parallel.gradients import start_gradient_averaging

    needs_zero = [g for g in trainer.optimizers.parameters if step % trainer.gradient_accumulation_steps[g] == 0]
    trainer.optimizers.zero_grad_some(needs_zero)
    loss, loss_dict, metrics_dict = _forward_loss(trainer, step)
    needs_step = [
        g
        for g in trainer.optimizers.parameters
        if step % trainer.gradient_accumulation_steps[g] == trainer.gradient_accumulation_steps[g] - 1
    ]
    averaging = None
    if data_parallel_of(trainer.config).overlap_gradient_averaging:
        # the optimizers' own param groups (densification replaces the Parameters there), in the order
        # CheckedOptimizers averages them in: its average_gradients finishes this averaging
        groups = trainer.optimizers.optimizers
        averaging = start_gradient_averaging(
            p for g in needs_step for pg in groups[g].param_groups for p in pg["params"]
        )
    try:
        trainer.grad_scaler.scale(loss).backward()
    except BaseException:
        if averaging is not None:
            averaging.cancel()
        raise
    trainer.optimizers.optimizer_scaler_step_some(trainer.grad_scaler, needs_step)
    if trainer.config.log_gradients:  # between the update and the schedulers, as nerfstudio's
        total = 0
        for tag, value in trainer.pipeline.model.named_parameters():
            if value.grad is not None:
                grad = value.grad.norm()
                metrics_dict[f"Gradients/{tag}"] = grad
                total += grad
        metrics_dict["Gradients/Total"] = total
    step_schedulers(trainer, step)
    return loss, loss_dict, metrics_dict
