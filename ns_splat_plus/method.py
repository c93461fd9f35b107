"""Method specifications registered through nerfstudio's ``nerfstudio.method_configs`` entry point.

The entry points (``splat-plus``, ``splat-plus-mcmc``, ``splat-plus-fast``, ``splat-plus-lite``) name
:data:`splat_plus`, :data:`splat_plus_mcmc`, :data:`splat_plus_fast` and :data:`splat_plus_lite`; the
method-level defaults live here. ``splat-plus`` is splatfacto's recipe (same optimizers, schedules and
densification settings) on splat-plus's model, pipeline and trainer.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Literal, Union, cast

from nerfstudio.configs.base_config import LoggingConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig
from nerfstudio.plugins.types import MethodSpecification

from ns_splat_plus import upstream
from ns_splat_plus.model import SplatPlusModelConfig
from ns_splat_plus.parallel.schedule import AUTO_EFFECTIVE_BATCH
from ns_splat_plus.strategy.build import MCMC_RECIPE
from ns_splat_plus.training import uncaught
from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig
from ns_splat_plus.training.pipeline import SplatPlusPipelineConfig
from ns_splat_plus.training.trainer import SplatPlusTrainerConfig
from ns_splat_plus.viewer import SplatPlusViewerConfig

# nerfstudio's entry points import this module before they parse their command line, in every ns-* command:
# from here on, a full or read-only disk, a bad --load-config and Ctrl-C outside training end in one message
# (training/uncaught.py), where the command runs splat-plus; other methods keep Python's hook (upstream/command_line.py)
if upstream.splat_plus_command(sys.argv):
    uncaught.install()


def splatfacto_optimizers(max_steps: int = 30000) -> dict:
    """splatfacto's optimizer and scheduler settings (nerfstudio 1.1.5 method_configs)."""
    return {
        "means": {
            "optimizer": AdamOptimizerConfig(lr=1.6e-4, eps=1e-15),
            "scheduler": ExponentialDecaySchedulerConfig(lr_final=1.6e-6, max_steps=max_steps),
        },
        "features_dc": {"optimizer": AdamOptimizerConfig(lr=0.0025, eps=1e-15), "scheduler": None},
        "features_rest": {"optimizer": AdamOptimizerConfig(lr=0.0025 / 20, eps=1e-15), "scheduler": None},
        "opacities": {"optimizer": AdamOptimizerConfig(lr=0.05, eps=1e-15), "scheduler": None},
        "scales": {"optimizer": AdamOptimizerConfig(lr=0.005, eps=1e-15), "scheduler": None},
        "quats": {"optimizer": AdamOptimizerConfig(lr=0.001, eps=1e-15), "scheduler": None},
        "camera_opt": {
            "optimizer": AdamOptimizerConfig(lr=1e-4, eps=1e-15),
            "scheduler": ExponentialDecaySchedulerConfig(
                lr_final=5e-7, max_steps=max_steps, warmup_steps=1000, lr_pre_warmup=0
            ),
        },
        "bilateral_grid": {
            "optimizer": AdamOptimizerConfig(lr=2e-3, eps=1e-15),
            "scheduler": ExponentialDecaySchedulerConfig(
                lr_final=1e-4, max_steps=max_steps, warmup_steps=1000, lr_pre_warmup=0
            ),
        },
    }


def splat_plus_trainer_config(method_name: str = "splat-plus", strategy: str = "default") -> SplatPlusTrainerConfig:
    return SplatPlusTrainerConfig(
        method_name=method_name,
        steps_per_eval_image=100,
        steps_per_eval_batch=0,
        steps_per_save=2000,
        steps_per_eval_all_images=1000,
        max_num_iterations=30000,
        mixed_precision=False,
        # nerfstudio's "basic" profiler prints its timings table after every run; --logging.profiler basic brings it back
        logging=LoggingConfig(profiler="none"),
        pipeline=SplatPlusPipelineConfig(
            datamanager=SplatPlusDataManagerConfig(
                dataparser=NerfstudioDataParserConfig(load_3D_points=True),
                cache_images_type="uint8",
            ),
            model=SplatPlusModelConfig(strategy="default")
            if strategy == "default"
            # nerfstudio's splatfacto-mcmc recipe: relocate at opacity <= 0.005, refine until step 25000
            else SplatPlusModelConfig(strategy="mcmc", **cast(Dict[str, Any], MCMC_RECIPE)),  # its keyword arguments
        ),
        optimizers=splatfacto_optimizers(),
        viewer=SplatPlusViewerConfig(num_rays_per_chunk=1 << 15),  # auto exit for batch jobs
        vis="viewer",
    )


splat_plus = MethodSpecification(
    config=splat_plus_trainer_config(),
    description="Gaussian splatting (splatfacto recipe) that runs on several GPUs, offline and on CPU",
)

splat_plus_mcmc = MethodSpecification(
    config=splat_plus_trainer_config("splat-plus-mcmc", strategy="mcmc"),
    description="splat-plus with gsplat's MCMC densification (nerfstudio's splatfacto-mcmc recipe)",
)


FAST_CAMERAS_PER_STEP: Union[int, Literal["auto"]] = "auto"
"""Cameras per step of ``splat-plus-fast``: auto, :data:`~ns_splat_plus.parallel.schedule.AUTO_EFFECTIVE_BATCH`
(4) cameras per step in all, 4 per GPU on one GPU, 2 on two, 1 from four. Until 2026-11-28 it was 4 per GPU
on any number, 8 in all on two GPUs: an effective batch never compared with splatfacto."""


def splat_plus_fast_trainer_config(
    cameras_per_step: Union[int, Literal["auto"]] = FAST_CAMERAS_PER_STEP,
) -> SplatPlusTrainerConfig:
    """splat-plus with B cameras per step in one rasterizer call and one fused Adam update. The
    schedule is written for one camera per step, as splat-plus's: it is scaled at launch for
    W x B cameras per step (steps / (W x B), lr x sqrt(W x B), betas ^ (W x B))."""
    config = splat_plus_trainer_config("splat-plus-fast")
    cast(SplatPlusDataManagerConfig, config.pipeline.datamanager).cameras_per_step = cameras_per_step
    config.fused_adam = True
    return config


splat_plus_fast = MethodSpecification(
    config=splat_plus_fast_trainer_config(),
    description=(
        f"splat-plus for speed: {AUTO_EFFECTIVE_BATCH} cameras per step (on one GPU in one rasterizer call; on W "
        f"GPUs {AUTO_EFFECTIVE_BATCH}/W each) and one fused Adam update, with the schedule scaled for "
        f"{AUTO_EFFECTIVE_BATCH} cameras per step (1/{AUTO_EFFECTIVE_BATCH} of the steps, learning rates "
        f"x sqrt({AUTO_EFFECTIVE_BATCH}), Adam betas ^{AUTO_EFFECTIVE_BATCH}); no camera optimizer or bilateral grid"
    ),
)


LITE_STEPS_SCALER = 1.0 / 3.0
"""``splat-plus-lite`` trains splatfacto's schedule in a third of the camera iterations (FastGS trains 10k)."""
LITE_REFINE_EVERY = 300
"""``splat-plus-lite``'s refine interval in splatfacto's step units (100 there): every 100 camera
iterations after the steps scaler (FastGS: 500 of 10k)."""
LITE_CAMERAS_PER_STEP = 1
"""One camera per step: the train peak grows with the cameras rendered at once (fox, one H100:
0.62 GiB at 1, 1.03 at 2, 1.85 at 4, against splatfacto's 1.40; benchmarks/2026-11-26-h100-fox-lite-tuning)."""
LITE_DENSIFY_SCORE = 6.0
"""Grow only where a Gaussian covers over 6 full-resolution high-error pixels per view (the strategy's
default is 1): 85k Gaussians instead of 112k on fox at the same PSNR (one run each, same folder)."""
LITE_NUM_VIEWS = 5
"""Views rendered per refine (FastGS: 10): half the scoring time, no loss of PSNR on fox (one run)."""
LITE_FUSED_LOSS = True
"""The L1 + SSIM loss in the fused kernels (--pipeline.model.fused-loss): on plush-dog, one H200, 5 runs
against 5 at one commit, PSNR +0.25 dB (90 % Welch: -1.24 to +1.73) and SSIM +0.0030 (-0.0020 to +0.0081)
over the PyTorch loss, with a 4.61 ms median step against 5.52 (the timed runs, one each;
benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite). The reference runs where the kernels do
not apply (the CPU, masks)."""
LITE_CUDA_GRAPH = True
"""Replay each step's forward and backward from a CUDA graph (--cuda-graph): lite's step is set by the host.
On plush-dog, one H200, at one commit: process wall 54.0 against 63.7 s (one timed run each), PSNR +0.52 dB
(90 % Welch: -0.13 to +1.17) and SSIM +0.0026 (+0.0001 to +0.0051) over the eager step, 8 runs against 8
(benchmarks/2026-11-29-h200x2-cuda-graph-lite-default). Where it does not apply (the CPU, several GPUs) the
step runs eagerly and start-up says why."""
LITE_RESOLUTION_SCHEDULE = 6000
"""splatfacto's resolution schedule stretched twice (3000 there): a quarter, then half the resolution
for the first 20 % and 40 % of the run (DashGaussian's coarse-to-fine), the budget growing with it."""


def splat_plus_lite_trainer_config(cameras_per_step: int = LITE_CAMERAS_PER_STEP) -> SplatPlusTrainerConfig:
    """splat-plus with the efficient strategy (FastGS's multi-view densification under DashGaussian's budget, tied
    to a stretched resolution schedule), a third of splatfacto's schedule (``--steps-scaler`` 1/3), the fused L1 +
    SSIM loss, the fused Adam update and the step replayed from a CUDA graph. Trades some time per Gaussian for far
    fewer Gaussians and steps (docs/strategies.md)."""
    config = splat_plus_trainer_config("splat-plus-lite")
    cast(SplatPlusDataManagerConfig, config.pipeline.datamanager).cameras_per_step = cameras_per_step
    config.fused_adam = True
    config.steps_scaler = LITE_STEPS_SCALER
    model = cast(SplatPlusModelConfig, config.pipeline.model)  # nerfstudio types it ModelConfig
    model.strategy = "efficient"
    model.refine_every = LITE_REFINE_EVERY
    model.efficient_densify_score = LITE_DENSIFY_SCORE
    model.efficient_num_views = LITE_NUM_VIEWS
    model.resolution_schedule = LITE_RESOLUTION_SCHEDULE
    model.fused_loss = LITE_FUSED_LOSS
    config.cuda_graph = LITE_CUDA_GRAPH
    return config


splat_plus_lite = MethodSpecification(
    config=splat_plus_lite_trainer_config(),
    description=(
        "splat-plus for few Gaussians, little GPU memory and a short run: the efficient densification strategy "
        "(multi-view error-guided, under a growing Gaussian budget), a third of splatfacto's schedule at one camera "
        "per step with a longer coarse-to-fine resolution schedule, the fused L1 + SSIM loss, one fused Adam update "
        "and the step replayed from a CUDA graph (docs/strategies.md)"
    ),
)
