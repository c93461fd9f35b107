"""Options of data-parallel training (``--data-parallel.*``) and the Adam config with explicit betas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Tuple

import tyro
from nerfstudio.configs.base_config import PrintableConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig


@dataclass
class DataParallelConfig(PrintableConfig):
    """How training on W ranks differs from one (see docs/multi-gpu.md)."""

    scale_schedule: bool = True
    """Divide every step count (total steps, refine interval / start / stop, SH and resolution schedules, LR-scheduler steps, eval and save intervals) by W: each step sees W cameras."""
    lr_scaling: Literal["sqrt", "linear", "none"] = "sqrt"
    """Multiply every learning rate by sqrt(W) (Grendel-GS, "On Scaling Up 3D Gaussian Splatting Training"), by W, or not at all."""
    scale_adam_betas: bool = True
    """Adam momentum over W-times larger batches: beta -> beta**W (Grendel-GS)."""
    replica_check_every: int = 100
    """Compare a checksum of the parameters across ranks every this many steps (0: only at the end)."""
    overlap_gradient_averaging: bool = True
    """Start each gradient's all-reduce during the backward pass, as soon as it is ready (False: all after it). The same collectives either way: bitwise the same gradients. Under NCCL on 2 H200s it took the step from about 9.0 to 7.3 ms (docs/multi-gpu.md)."""
    timeout_minutes: float = 15.0
    """Process-group timeout for torchrun / srun: a rank stuck longer than this in a collective (a peer that vanished) stops with an error. ns-train's own spawn uses nerfstudio's 30 minutes."""
    # Bookkeeping, not options (hidden from the command line, where setting one would skip the scaling
    # silently): written by scale_schedule and saved in config.yml, so that a config loaded again
    # (--load-config, ns-eval) is never scaled twice.
    scaled_for_world_size: tyro.conf.Suppress[int] = 0
    """The effective batch (ranks x cameras per step) this config's schedule was already scaled for (0: not scaled)."""
    scaled_for_steps_scaler: tyro.conf.Suppress[float] = 0.0
    """The --steps-scaler this config's schedule was already scaled by (0: not scaled)."""


@dataclass
class AdamWithBetasOptimizerConfig(AdamOptimizerConfig):
    """nerfstudio's Adam config with explicit betas (for the data-parallel momentum rule)."""

    betas: Tuple[float, float] = (0.9, 0.999)


def data_parallel_of(trainer_config: Any) -> DataParallelConfig:
    """The ``--data-parallel.*`` options of a run's ``SplatPlusTrainerConfig`` (its ``data_parallel``), for
    code that is handed nerfstudio's ``TrainerConfig`` (``upstream.TrainerLike.config``: the splat-plus
    config class sits in the training layer, above the layers that read this)."""
    return trainer_config.data_parallel
