"""In-process warmup: a few real training steps before step 0, then every piece of state put back.

Why: the first steps of a fresh process pay for lazy work (CUDA context and module loading, gsplat's
kernels, allocator growth, library handles), and a field report (gsplat "Cold-start training bug on
NVIDIA L4") saw the first training process on a fresh machine end at PSNR ~14 where later ones
reached ~27, cured by a throwaway run before the real one. ``run_warmup`` is that throwaway run,
inside the training process and on the real step path (the trainer's ``train_iteration`` between
the BEFORE/AFTER_TRAIN_ITERATION callbacks: rasterize forward and backward at the resolution of the
first steps, loss, optimizer step, strategy hooks), then the render, loss and backward once at each
later training resolution of the run (:func:`later_resolution_steps`), followed by a bitwise restore
of the training state. It is state-neutral, so it also runs when resuming; on several ranks every
rank runs the same warmup steps (their collectives match).

Why the later resolutions: the fused SSIM's Triton kernels compile once per specialization of their
arguments, and a new image size changes it (strides divisible by 16 or not; the ground truth read as
uint8 at full size, as float where resized). Without these passes splat-plus-lite's steps 2000 and
4000 on plush-dog each took 2.5-4 s more than their neighbours on a machine whose Triton cache did not
hold them yet (benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite, the train logs):
that time now falls before step 0, where the warmup reports it, and a warm cache makes it loads.

Restored: parameters (also when the strategy replaced the ``nn.Parameter`` objects) and their
gradients, buffers, torchmetrics states, optimizer states and param groups, schedulers, the grad
scaler, the strategy state and its instrumentation, plain model attributes (``step``, ``info``...),
the RNGs (python, numpy, torch CPU, torch CUDA of the current device), the datamanager's sampling
state, the trainer's step and the writer's pending events. Densification records are muted.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from nerfstudio.utils import writer
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import upstream
from ns_splat_plus.errors import TrainingHealthError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy import recording_paused
from ns_splat_plus.training.short_run import resolution_change_steps
from ns_splat_plus.training.snapshot import TrainingSnapshot
from ns_splat_plus.training.step import run_forward_and_backward, run_training_step
from ns_splat_plus.upstream import TrainerLike


@dataclass
class WarmupResult:
    steps: int
    seconds: float
    first_step_seconds: float
    means2d_grad_max: Optional[float]
    nonzero_gradient_steps: int
    restored: bool = True
    later_sizes: List[Tuple[int, int]] = field(default_factory=list)
    """(H, W) rendered by the passes at the run's later training resolutions, in step order."""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _means2d_grad_max(model: Any) -> Optional[float]:
    """Largest |d loss / d means2d| of the last step; None when the model keeps no means2d."""
    info = getattr(model, "info", None)
    means2d = info.get("means2d") if isinstance(info, dict) else None
    if not isinstance(means2d, torch.Tensor) or not (means2d.is_leaf or means2d.retains_grad):
        return None  # the strategy did not ask for its gradient (MCMC without instrumentation)
    grad = means2d.grad
    if grad is None or grad.numel() == 0:
        return 0.0
    return float(grad.detach().abs().max())


def later_resolution_steps(trainer: TrainerLike) -> List[int]:
    """The first step of each training resolution that this run reaches after the one it starts at
    (splatfacto's resolution schedule, as the run scaled it; none once training is at full size)."""
    config = trainer.pipeline.model.config
    return resolution_change_steps(
        upstream.start_step(trainer),
        trainer.config.max_num_iterations,
        int(getattr(config, "num_downscales", 0)),
        int(getattr(config, "resolution_schedule", 1)),
    )


def _check_step(trainer: TrainerLike, step: int, loss: Any, device: torch.device) -> None:
    loss_value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
    bad = [
        name
        for name, p in trainer.pipeline.model.named_parameters()
        if p.grad is not None and not bool(torch.isfinite(p.grad).all())
    ]
    local_bad = not math.isfinite(loss_value) or bool(bad)
    if not collectives.any_rank(local_bad, device):
        return
    what = [] if math.isfinite(loss_value) else [f"the loss ({loss_value})"]
    what += [f"the gradient of '{name}'" for name in bad]
    if not what:
        what = ["another rank's loss or gradients"]
    message = (
        f"Warmup step {step}: non-finite values in {', '.join(what)}, before training started. Likely causes: "
        "an input image or mask with NaN/Inf pixels, a degenerate camera (zero focal length, NaN pose), "
        "a learning rate far too high, or NaN in the initial points."
    )
    raise TrainingHealthError.shown(message, collectives.get_rank())


def _zero_gradient_error(steps: int) -> TrainingHealthError:
    message = (
        f"Warmup: the 2D means (means2d) got no gradient or only exact zeros in all {steps} warmup steps, "
        "so training cannot move or densify the Gaussians. Likely causes:\n  - the loss is detached from the "
        "rendered image (.detach(), torch.no_grad, a loss of the ground truth only)\n  - no Gaussian is inside the "
        "camera views (check camera poses, scene scale, near plane)\n  - every Gaussian is transparent (opacities ~0)"
        "\nSet --warmup-steps 0 to skip this check."
    )
    return TrainingHealthError.shown(message, collectives.get_rank())


def in_warmup(trainer: Any) -> bool:
    """Whether :func:`run_warmup`'s steps are running: they go through the training callbacks before step 0, so a
    callback that counts the run's own steps skips them. False for trainers without a warmup (splatfacto's)."""
    return int(getattr(trainer.config, "warmup_steps", 0)) > 0 and getattr(trainer, "warmup_result", None) is None


def run_warmup(trainer: TrainerLike, steps: Optional[int] = None) -> Optional[WarmupResult]:
    """Run ``steps`` (default ``trainer.config.warmup_steps``) real training steps, check their
    gradients, and restore the exact training state. Returns the result (also ``trainer.warmup_result``)."""
    steps = int(getattr(trainer.config, "warmup_steps", 0) if steps is None else steps)
    if steps <= 0:
        return None
    device = torch.device(trainer.device) if not isinstance(trainer.device, torch.device) else trainer.device
    model = trainer.pipeline.model
    snapshot = TrainingSnapshot(trainer)
    _sync(device)
    started = time.perf_counter()
    first_step_seconds = 0.0
    grad_maxes: List[Optional[float]] = []
    later_sizes: List[Tuple[int, int]] = []
    try:
        with recording_paused():
            for i in range(steps):
                step = upstream.start_step(trainer) + i
                with trainer.train_lock:  # a browser connected during warmup renders between steps
                    loss, _, _ = run_training_step(trainer, step)
                _check_step(trainer, step, loss, device)
                grad_maxes.append(_means2d_grad_max(model))
                if i == 0:
                    _sync(device)
                    first_step_seconds = time.perf_counter() - started
            for step in later_resolution_steps(trainer):
                with trainer.train_lock:
                    loss, size = run_forward_and_backward(trainer, step)
                _check_step(trainer, step, loss, device)
                later_sizes.append(size)
            if hasattr(trainer.optimizers, "resolve_pending"):
                trainer.optimizers.resolve_pending()  # the warmup steps' finiteness checks (read in batches on the GPU)
            _sync(device)
    finally:
        seconds = time.perf_counter() - started
        with trainer.train_lock:  # a viewer render must not see the model half restored
            snapshot.restore(trainer)
    if collectives.is_distributed() and grad_maxes and all(g is not None for g in grad_maxes):
        # every rank decides on the largest gradient any rank saw (cameras differ per rank)
        reduced = torch.tensor(grad_maxes, device=device)
        collectives.all_reduce(reduced, "MAX")
        grad_maxes = reduced.tolist()
    known = [g for g in grad_maxes if g is not None]
    if known and all(g == 0.0 for g in known):
        raise _zero_gradient_error(steps)
    result = WarmupResult(
        steps=steps,
        seconds=seconds,
        first_step_seconds=first_step_seconds,
        means2d_grad_max=max(known) if known else None,
        nonzero_gradient_steps=sum(1 for g in known if g > 0.0),
        later_sizes=later_sizes,
    )
    trainer.warmup_result = result
    if collectives.get_rank() == 0:
        later = " and ".join(f"{w}x{h}" for h, w in later_sizes)
        also = f", then a render, loss and backward at {later} (the run's later sizes)" if later else ""
        CONSOLE.log(
            f"Warmup: {steps} training steps in {seconds:.2f} s (first {first_step_seconds:.2f} s){also}, gradients "
            "finite and non-zero; training state restored bitwise."
        )
    writer.put_scalar(name="Warmup/seconds", scalar=seconds, step=upstream.start_step(trainer))
    writer.put_scalar(name="Warmup/first_step_seconds", scalar=first_step_seconds, step=upstream.start_step(trainer))
    panel = getattr(trainer, "health_panel", None)
    if panel is not None and hasattr(panel, "on_warmup"):
        panel.on_warmup(result.as_dict())
    return result
