"""SplatPlusTrainer: nerfstudio's Trainer with the pieces splat-plus needs before and around steps.

Thin on purpose: each concern lives in its own module and is called from one place here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Type

import torch

from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils.decorators import check_main_thread

from ns_splat_plus import compat


@dataclass
class SplatPlusTrainerConfig(TrainerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusTrainer)


class SplatPlusTrainer(Trainer):
    config: SplatPlusTrainerConfig

    # --- process / device set-up (distributed.py, devices.py) -------------------------------

    def __init__(self, config: SplatPlusTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        super().__init__(config, local_rank=local_rank, world_size=world_size)

    def setup(self, test_mode="val") -> None:
        model_config = self.config.pipeline.model
        if getattr(model_config, "init_seed", 0) is None:
            model_config.init_seed = self.config.machine.seed  # same on every rank, unlike the global seed
        super().setup(test_mode=test_mode)
        # --- viewer panel (viewer.py) goes here ---

    # --- optimizer step (gradient averaging: distributed.py; finiteness checks: densify.py) ---

    # --- training loop (warmup.py before step 0) ----------------------------------------------

    # --- checkpoints (compat.py; resume and strategy state: evaluation.py / resume) ----------

    def checkpoint_state(self, step: int) -> dict:
        """Everything a checkpoint holds, free of numpy objects (loadable with weights_only=True)."""
        return compat.weights_only_safe(
            {
                "step": step,
                "pipeline": self.pipeline.state_dict(),
                "optimizers": {k: v.state_dict() for (k, v) in self.optimizers.optimizers.items()},
                "schedulers": {k: v.state_dict() for (k, v) in self.optimizers.schedulers.items()},
                "scalers": self.grad_scaler.state_dict(),
            }
        )

    @check_main_thread
    def save_checkpoint(self, step: int) -> None:
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        ckpt_path: Path = self.checkpoint_dir / f"step-{step:09d}.ckpt"
        tmp_path = ckpt_path.with_suffix(".ckpt.tmp")
        torch.save(self.checkpoint_state(step), tmp_path)
        tmp_path.replace(ckpt_path)  # never leave a half-written checkpoint behind
        if self.config.save_only_latest_checkpoint:
            for f in self.checkpoint_dir.glob("*.ckpt"):
                if f != ckpt_path:
                    f.unlink()
