"""SplatPlusTrainer: nerfstudio's Trainer with the pieces splat-plus needs before and around steps."""

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

    def setup(self, test_mode="val") -> None:
        model_config = self.config.pipeline.model
        if getattr(model_config, "init_seed", 0) is None:
            model_config.init_seed = self.config.machine.seed  # same on every rank, unlike the global seed
        super().setup(test_mode=test_mode)

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
