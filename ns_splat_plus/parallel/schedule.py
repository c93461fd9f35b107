"""The scaling rule for W ranks and B cameras per step: :func:`scale_schedule`, :func:`effective_batch`.

W ranks with B cameras each (``--pipeline.datamanager.cameras-per-step``) do the one-camera run's
work in 1/(W x B) of the steps: step counts are divided by W x B, learning rates multiplied by
sqrt(W x B) and Adam's betas raised to the power W x B (Grendel-GS). ``--steps-scaler s`` multiplies
every step count by s as well (gsplat simple_trainer's ``steps_scaler``): a compressed or stretched
schedule. See docs/multi-gpu.md and docs/speed-and-memory.md.
"""

from __future__ import annotations

import math
from dataclasses import fields
from fractions import Fraction
from typing import List, Optional, Tuple

import torch

from ns_splat_plus.parallel.config import AdamWithBetasOptimizerConfig, DataParallelConfig
from ns_splat_plus.parallel.devices import DeviceResolutionError

MODEL_STEP_FIELDS = (
    "warmup_length",
    "refine_every",
    "stop_split_at",
    "stop_screen_size_at",
    "sh_degree_interval",
    "resolution_schedule",
    "refine_start_iter",
    "refine_stop_iter",
    "scale_reg_every",
    "efficient_late_prune_every",
)
TRAINER_STEP_FIELDS = (
    "max_num_iterations",
    "steps_per_eval_image",
    "steps_per_eval_all_images",
    "steps_per_save",
    "steps_per_eval_batch",
)
SCHEDULER_STEP_FIELDS = ("max_steps", "warmup_steps")


def scaled_steps(steps: int, world_size: int, steps_scaler: float = 1.0) -> int:
    """ceil(steps x steps_scaler / W), at least 1 for a positive count (0 stays 0: "never").

    The scaler is taken as the decimal it was written as (0.8 is 4/5, not the float just above it),
    so that 30000 x 0.8 / 4 is 6000, not 6001."""
    if steps <= 0:
        return steps
    return max(1, math.ceil(steps * steps_ratio(world_size, steps_scaler)))


def steps_ratio(world_size: int, steps_scaler: float = 1.0) -> Fraction:
    """steps_scaler / W as an exact fraction: what :func:`scaled_steps` multiplies a step count by."""
    return Fraction(steps_scaler).limit_denominator(10**6) / world_size


def steps_scaler_of(config) -> float:
    """``--steps-scaler`` of a SplatPlusTrainerConfig (1.0 for configs written before it existed)."""
    return float(getattr(config, "steps_scaler", 1.0))


def _launch_scaling(config) -> Tuple[int, float]:
    dp = config.data_parallel
    return dp.scaled_for_world_size or 1, dp.scaled_for_steps_scaler or 1.0


def typed_max_num_iterations(config, scaled: int) -> int:
    """The smallest ``--max-num-iterations`` a user types that the launch turns into ``scaled`` steps or more
    (``config``: a launched SplatPlusTrainerConfig; ``scaled`` itself where the launch scaled nothing)."""
    world_size, steps_scaler = _launch_scaling(config)
    ratio = steps_ratio(world_size, steps_scaler)
    typed = max(1, math.floor((scaled - 1) / ratio))  # at most a few below the answer (ceil's rounding)
    while scaled_steps(typed, world_size, steps_scaler) < scaled:
        typed += 1
    return typed


def describe_max_num_iterations(config) -> str:
    """``config``'s total steps with how the launch scaled them from the typed ``--max-num-iterations``:
    "the run's 100 steps (--max-num-iterations x 1/6: 2 cameras per step and --steps-scaler 0.333)", else
    "--max-num-iterations 200". Messages must not quote a scaled count as if it were the option's value
    (splat-plus-lite's preset scales by 1/3 unasked)."""
    steps = config.max_num_iterations
    world_size, steps_scaler = _launch_scaling(config)
    if world_size == 1 and steps_scaler == 1.0:
        return f"--max-num-iterations {steps}"
    ratio = steps_ratio(world_size, steps_scaler)
    reasons = [f"{world_size} cameras per step{_ranks_times_cameras(config, world_size)}"] if world_size > 1 else []
    reasons += [f"--steps-scaler {steps_scaler:.3g}"] if steps_scaler != 1.0 else []
    return f"the run's {steps} steps (--max-num-iterations x {ratio}: {' and '.join(reasons)})"


def _ranks_times_cameras(config, effective: int) -> str:
    """ " (2 ranks x 1)" where the launch resolved B and ``effective`` (the schedule's W x B) holds several ranks:
    "2 cameras per step" alone read as B = 2 to a user who ran 2 ranks of 1 camera; "" otherwise."""
    value = getattr(config.pipeline.datamanager, "cameras_per_step", "auto")
    per_rank = int(value) if value != "auto" else 0
    if per_rank < 1 or effective % per_rank or effective == per_rank:
        return ""
    return f" ({effective // per_rank} ranks x {per_rank})"


def lr_factor(world_size: int, rule: str) -> float:
    if rule == "sqrt":
        return math.sqrt(world_size)
    if rule == "linear":
        return float(world_size)
    if rule == "none":
        return 1.0
    raise ValueError(f"unknown lr scaling rule {rule!r} (sqrt, linear or none)")


AUTO_EFFECTIVE_BATCH = 4
"""``--pipeline.datamanager.cameras-per-step auto`` keeps W x B at this many cameras per step: the largest
effective batch compared with splatfacto over many runs (splat-plus-fast, B = 4 on one GPU: fox
-0.15 ± 0.15 dB over 9 runs against 6, plush-dog +0.46 ± 0.39 dB over 7 against 8; benchmarks/README.md)."""


def auto_cameras_per_step(world_size: int) -> int:
    """B cameras per rank for ``cameras-per-step auto`` on W ranks: W x B = :data:`AUTO_EFFECTIVE_BATCH` while
    W divides it (4, 2 and 1 on 1, 2 and 4 ranks), else the most that stays under it, and one camera per
    rank from W = 4 on. A function of W alone: the image size is not known when the schedule is scaled
    (before any rank parses the dataset), and the rule's effective batch, not the image size, is what the
    quality comparisons above validated."""
    return max(1, AUTO_EFFECTIVE_BATCH // max(1, int(world_size)))


def resolve_cameras_per_step(config, world_size: int) -> Optional[int]:
    """Replace ``cameras-per-step auto`` in ``config`` (a SplatPlusTrainerConfig) by
    :func:`auto_cameras_per_step` for ``world_size`` ranks; the B chosen, or None where B was a number.
    Before :func:`effective_batch` and :func:`scale_schedule` (the launch), so the saved config.yml,
    checkpoints and every later reader see the number."""
    datamanager = config.pipeline.datamanager
    if getattr(datamanager, "cameras_per_step", 1) != "auto":
        return None
    datamanager.cameras_per_step = auto_cameras_per_step(world_size)
    return datamanager.cameras_per_step


def cameras_per_step_of(datamanager_config, world_size: int) -> int:
    """B of a datamanager config (SplatPlusDataManagerConfig; 1 for configs without the option): its
    number, or :func:`auto_cameras_per_step` where it is still ``auto`` (a config the launch did not
    resolve, e.g. one built in-process)."""
    value = getattr(datamanager_config, "cameras_per_step", 1)
    return auto_cameras_per_step(world_size) if value == "auto" else max(1, int(value))


def effective_batch(config, world_size: int) -> int:
    """Cameras per optimizer step: W ranks x B cameras each (``config``: a SplatPlusTrainerConfig)."""
    return world_size * cameras_per_step_of(config.pipeline.datamanager, world_size)


def scale_schedule(config, world_size: int, dp: DataParallelConfig) -> List[str]:
    """Scale ``config`` (a SplatPlusTrainerConfig) in place for an effective batch of ``world_size``
    cameras per step (W ranks x B cameras per rank: pass :func:`effective_batch`) and for its
    ``steps_scaler``; returns what changed.

    The rule: each step processes W x B cameras, so it does the one-camera run's work in 1/(W x B)
    of the steps (below, W stands for the effective batch W x B). Every step count is multiplied by
    steps_scaler / W (rounded up): total steps, refine interval, refine start (warmup_length) and
    stop, screen-size stop, late-prune interval, SH-degree interval, resolution schedule, LR-scheduler max/warmup steps,
    eval and checkpoint intervals (the opacity reset is counted in refine intervals, so it follows).
    Gradients are averaged over W cameras, so learning rates are multiplied by sqrt(W)
    (``lr_scaling``) and Adam's betas raised to the power W (``scale_adam_betas``), as Grendel-GS
    does for batched training; the steps scaler changes step counts only. With ``scale_schedule``
    off, only the steps scaler applies. Applied once per config.
    """
    steps_scaler = steps_scaler_of(config)
    if world_size <= 1 or not dp.scale_schedule:
        world_size = 1
    if world_size == 1 and steps_scaler == 1.0:
        return []
    if dp.scaled_for_world_size or dp.scaled_for_steps_scaler:
        if dp.scaled_for_world_size and dp.scaled_for_world_size != world_size:
            raise DeviceResolutionError(
                f"this config's schedule was already scaled for {dp.scaled_for_world_size} cameras per step (ranks x "
                f"--pipeline.datamanager.cameras-per-step), but this run has {world_size}; start from the method's "
                "defaults (not --load-config) to rescale"
            )
        if (dp.scaled_for_steps_scaler or 1.0) != steps_scaler:
            raise DeviceResolutionError(
                f"this config's schedule was already scaled by --steps-scaler {dp.scaled_for_steps_scaler or 1.0}, but "
                f"this run asks for {steps_scaler}; start from the method's defaults (not --load-config) to rescale"
            )
        return []
    changes: List[str] = []

    def scale_attr(obj, name: str, label: str) -> None:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            new = scaled_steps(value, world_size, steps_scaler)
            setattr(obj, name, new)
            changes.append(f"{label} {value}->{new}")

    for name in TRAINER_STEP_FIELDS:
        scale_attr(config, name, name)
    model = config.pipeline.model
    for name in MODEL_STEP_FIELDS:
        scale_attr(model, name, name)

    factor = lr_factor(world_size, dp.lr_scaling)
    optimizers = dict(config.optimizers)
    for group, entry in optimizers.items():
        entry = dict(entry)
        opt = entry.get("optimizer")
        if opt is not None:
            if factor != 1.0:
                opt.lr = opt.lr * factor
            if dp.scale_adam_betas and world_size > 1 and opt._target is torch.optim.Adam:
                if not isinstance(opt, AdamWithBetasOptimizerConfig):
                    values = {f.name: getattr(opt, f.name) for f in fields(opt) if f.name != "_target"}
                    opt = AdamWithBetasOptimizerConfig(**values)
                opt.betas = (opt.betas[0] ** world_size, opt.betas[1] ** world_size)
                entry["optimizer"] = opt
        sched = entry.get("scheduler")
        if sched is not None:
            for name in SCHEDULER_STEP_FIELDS:
                scale_attr(sched, name, f"{group}.{name}")
            if factor != 1.0:
                for name in ("lr_final", "lr_pre_warmup"):
                    if getattr(sched, name, None) is not None:
                        setattr(sched, name, getattr(sched, name) * factor)
        optimizers[group] = entry
    config.optimizers = optimizers
    if factor != 1.0:
        changes.append(f"learning rates x{factor:.3g} ({dp.lr_scaling}(W))")
    if dp.scale_adam_betas and world_size > 1:
        changes.append(f"Adam betas ^{world_size}")
    if world_size > 1:
        dp.scaled_for_world_size = world_size
    if steps_scaler != 1.0:
        dp.scaled_for_steps_scaler = steps_scaler
    return changes
