"""SplatPlusPipeline: nerfstudio's VanillaPipeline without the DDP wrapper.

nerfstudio wraps the model in DistributedDataParallel when world_size > 1, but gsplat's strategies
replace the nn.Parameter objects whenever they densify, after which DDP silently stops averaging
(and with SfM points it refuses to start: strided features_dc). Gradients are averaged by
:mod:`ns_splat_plus.distributed` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Type

import torch

from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig


@dataclass
class SplatPlusPipelineConfig(VanillaPipelineConfig):
    _target: Type = field(default_factory=lambda: SplatPlusPipeline)


class SplatPlusPipeline(VanillaPipeline):
    config: SplatPlusPipelineConfig

    def __init__(
        self,
        config: SplatPlusPipelineConfig,
        device: str,
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        grad_scaler: Optional[torch.cuda.amp.GradScaler] = None,
    ):
        # world_size=1 keeps VanillaPipeline from wrapping the model in DDP
        super().__init__(config, device, test_mode=test_mode, world_size=1, local_rank=local_rank, grad_scaler=grad_scaler)
        self.world_size = world_size
