"""SplatPlusModel: splatfacto's recipe, device-correct, with pluggable rasterizer and strategy.

Differences from ``SplatfactoModel`` (nerfstudio 1.1.5), and why:

* initial Gaussians come from :mod:`ns_splat_plus.model.init` (seeded, canonical order, rank-0
  broadcast) instead of the global RNG; and nothing is put on ``.cuda()`` (splatfacto puts SfM
  colours and ``Ks`` on cuda:0, which breaks rank k > 0 and the CPU path);
* rendering goes through :func:`ns_splat_plus.raster.rasterize` (gsplat on CUDA, the PyTorch
  reference on CPU);
* the densification strategy comes from :mod:`ns_splat_plus.strategy` (built from one
  :class:`~ns_splat_plus.strategy.StrategyOptions`), with the MCMC recipe's regularisers;
* LPIPS is built from local weights, or downloaded with a short timeout (:mod:`ns_splat_plus.upstream`);
* per-step training metrics (PSNR) only on logging steps, computed on the device;
* the SSIM of the loss in five fused Triton kernels on CUDA (:mod:`ns_splat_plus.model.ssim`); with
  ``--pipeline.model.fused-loss`` the background composite and L1 term too (:mod:`.loss`: the loss,
  written once);
* a training camera's view matrix and ``K`` made once and kept in its render cache (:mod:`.cameras`);
* B cameras per step (``--pipeline.datamanager.cameras-per-step``) rendered in one rasterizer call,
  the loss the mean of their losses;
* the training step does not read anything back from the GPU (intrinsics and render size without
  splatfacto's host-device round trips, the zero regulariser made on the device): the same numbers,
  but the host runs ahead of the GPU, which the step time and multi-GPU scaling depend on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, List, Literal, Optional, Tuple, Type, Union

import torch
import tyro
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.configs.config_utils import to_immutable_dict
from nerfstudio.model_components.lib_bilagrid import BilateralGrid, total_variation_loss
from nerfstudio.models.splatfacto import SplatfactoModel, SplatfactoModelConfig
from nerfstudio.utils.colors import get_color
from nerfstudio.utils.rich_utils import CONSOLE
from pytorch_msssim import SSIM

from ns_splat_plus import upstream
from ns_splat_plus.model import init
from ns_splat_plus.model.cameras import camera_intrinsics, view_matrices, world_to_camera
from ns_splat_plus.model.images import TrainingOutputs, composite, resize_images, strip_rows
from ns_splat_plus.model.loss import photometric_loss, reference_photometric_loss
from ns_splat_plus.model.loss_graphs import LossGraphs
from ns_splat_plus.model.metrics import image_metrics, psnr_on_device
from ns_splat_plus.model.options import StrategyModelOptions, valid
from ns_splat_plus.model.ssim import SsimKernel, TrainingSSIM
from ns_splat_plus.parallel import collectives
from ns_splat_plus.raster import Backend, rasterize
from ns_splat_plus.strategy import StrategyOptions, build_strategy
from ns_splat_plus.strategy.options import Range


@dataclass
class SplatPlusModelConfig(StrategyModelOptions, SplatfactoModelConfig):
    """splatfacto's options, plus the ones below, plus the efficient strategy's ``efficient_*`` options (made
    from :class:`~ns_splat_plus.strategy.efficient.InstrumentedEfficientStrategy`'s fields: :mod:`.options`)."""

    _target: Type = field(default_factory=lambda: SplatPlusModel)
    init_seed: Optional[int] = None
    """Seed of the initial Gaussians; None: the run's --machine.seed. Same seed, identical Gaussians."""
    rasterizer: Backend = "auto"
    """auto: gsplat on CUDA, the pure-PyTorch reference on CPU (small scenes only)."""
    tight_tiles: bool = True
    """Sort each Gaussian into the tiles where its opacity can reach alpha 1/255 (the rasterizer skips it
    everywhere else) instead of gsplat's whole 3-sigma square: bitwise the same images, fewer tile
    entries to sort and rasterize, forward and backward. False: gsplat's tiles."""
    strategy: Literal["default", "mcmc", "efficient"] = "default"
    """Densification: gsplat's DefaultStrategy (splatfacto's), MCMCStrategy, or efficient (FastGS's multi-view
    error-guided densify and prune under a budget that grows with the resolution; docs/strategies.md), all
    instrumented."""
    # --- densification records and gradient checks (strategy/) ---
    instrumentation: bool = True
    """Record refine events and gradient summaries (densification.jsonl, writer, console, callbacks) and
    stop on zero / non-finite gradients. False: no records and no checks; densification still makes
    gsplat's decisions, with statistics reduced across ranks and seeded draws (replicas stay identical)."""
    grad_summary_every: int = valid(100, Range(low=1, integer=True))
    """Steps between two summaries of the per-step means2d gradient norms."""
    zero_grad_patience: int = valid(100, Range(low=0, integer=True))
    """Stop when means2d gradients are missing or all exactly zero for this many consecutive steps (0: never;
    the statistics are then read from the GPU only every --pipeline.model.grad-summary-every steps)."""
    grad_stats_every_after_refine: int = valid(10, Range(low=1, integer=True))
    """Once refinement has stopped (--pipeline.model.stop-split-at), take the means2d gradient statistics every
    this many steps instead of every step: nothing is decided from them any more (1: every step)."""
    warn_no_densify_after: int = valid(3, Range(low=0, integer=True))
    """Warn when no Gaussian has crossed the densify threshold by this refine (0: never)."""
    densify_callbacks: List[str] = field(default_factory=list)
    """Functions called with every densification record, as 'pkg.module:function'."""
    max_gs_num: int = valid(1_000_000, Range(low=1, integer=True))
    """MCMC strategy: maximum number of Gaussians (nerfstudio's name; gsplat's cap_max)."""
    noise_lr: float = valid(5e5, Range(low=0))
    """MCMC strategy: scale of the per-step position noise (times the means' learning rate)."""
    scale_reg_every: int = valid(10, Range(low=1, integer=True))
    """Steps between two scale regularisation terms (--pipeline.model.use-scale-regularization; splatfacto's
    10), scaled with the schedule as every step count: W x B cameras per step apply it every ceil(10 / (W x B))."""
    mcmc_opacity_reg: float = valid(0.01, Range(low=0))
    """MCMC strategy: weight of the mean-opacity regulariser (0.01 in gsplat's and nerfstudio's MCMC recipes)."""
    mcmc_scale_reg: float = valid(0.01, Range(low=0))
    """MCMC strategy: weight of the mean-scale regulariser (0.01 in gsplat's and nerfstudio's MCMC recipes).
    MCMC relocates Gaussians at or below --pipeline.model.cull-alpha-thresh, as upstream does."""
    empty_cache_after_refine: bool = True
    """torch.cuda.empty_cache() after each refine (splatfacto's habit). Skipped anyway when
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set, the alternative that avoids fragmentation
    without returning memory to the driver."""
    ssim_kernel: SsimKernel = "auto"
    """SSIM of the training loss. auto: on CUDA, rahul-goel/fused-ssim where it is installed, else fused Triton
    kernels (five kernels instead of pytorch_msssim's convolutions, their backward and its elementwise kernels);
    both the same function, not bitwise (float32 sums in another order); pytorch_msssim where neither imports
    and on the CPU. fused-ssim / triton: that one, on CUDA; an error where it does not import and on the CPU.
    pytorch-msssim: splatfacto's. Evaluation metrics always use pytorch_msssim, as splatfacto's."""
    fused_loss: bool = False
    """Fold splatfacto's background composite and L1 term into the fused SSIM kernels (one loss, about twenty
    fewer elementwise kernels and launches per step; the same function to 1e-7 in float64 tests). On in
    splat-plus-lite, where 5 runs against 5 at one commit showed no loss and a shorter step (method.py's
    LITE_FUSED_LOSS); off in the other methods, which have no such comparison (docs/speed-and-memory.md)."""
    loss_cuda_graph: bool = True
    """In a step that runs eagerly on a CUDA GPU, replay the loss (composite, L1, SSIM; forward and backward) from
    a CUDA graph recorded once per image size: the same kernels, bitwise the same loss and gradients, about twenty
    fewer launches from the host per step. False: the loss's operators are launched one by one
    (model/loss_graphs.py)."""
    eval_max_pixels: Optional[int] = None
    """Evaluation and viewer renders larger than this are rendered in horizontal strips of at most this
    many pixels (same pixels, less memory). None: the largest training render of this process, so that
    evaluation never needs more rasterizer memory than training; 0: never split."""
    # nerfstudio's Model options (nerfstudio 1.1.5's defaults) that splatfacto's model never reads (no rays, no
    # coarse/fine fields): kept (a config.yml holds them), hidden from --help
    enable_collider: tyro.conf.Suppress[bool] = True
    collider_params: tyro.conf.Suppress[Optional[Dict[str, float]]] = to_immutable_dict(
        {"near_plane": 2.0, "far_plane": 6.0}
    )
    loss_coefficients: tyro.conf.Suppress[Dict[str, float]] = to_immutable_dict(
        {"rgb_loss_coarse": 1.0, "rgb_loss_fine": 1.0}
    )


class SplatPlusModel(SplatfactoModel):
    config: SplatPlusModelConfig
    isect_capacity: Optional[int] = None
    """Training renders list their tile intersections in this many slots, with no host read, while the
    trainer records a CUDA graph (training/graphed_step.py); None: as gsplat does."""

    def populate_modules(self):
        upstream.check_versions()  # ns-eval / ns-viewer / ns-export reach here without ns-train's launch
        settings = init.InitSettings(
            seed=init.resolve_seed(self.config.init_seed),
            sh_degree=self.config.sh_degree,
            random_init=self.config.random_init,
            num_random=self.config.num_random,
            random_scale=self.config.random_scale,
        )
        if self.seed_points is None and not self.config.random_init:
            CONSOLE.log("No SfM points in this dataset: starting from random Gaussians (--pipeline.model.random-init).")
        params = init.initial_gaussians(settings, self.seed_points)
        params = init.broadcast_from_rank0(params, torch.device(self.kwargs.get("device", "cpu")))
        self.initial_checksum = init.checksum(params)
        # the trainer prints the count when it trains from scratch (ns-export / ns-eval load a checkpoint over it)
        self.gauss_params = torch.nn.ParameterDict({k: torch.nn.Parameter(v) for k, v in params.items()})

        self.camera_optimizer = self.config.camera_optimizer.setup(num_cameras=self.num_train_data, device="cpu")

        # PSNR: torchmetrics' function, imported at the first evaluation (metrics.py), without transformers
        # (upstream.import_torchmetrics: 9.0 s on the GPU machine with it)
        self.ssim = SSIM(data_range=1.0, size_average=True, channel=3)  # evaluation metrics, as splatfacto's
        self.loss_ssim = TrainingSSIM(self.config.ssim_kernel)  # the trainer says which (loss_ssim_note)
        self.loss_graphs = (
            LossGraphs(self.loss_ssim, self.config.ssim_lambda, reference_photometric_loss)
            if self.config.loss_cuda_graph
            else None
        )
        self.step = 0
        self.crop_box = None
        if self.config.background_color == "random":
            # viser's default background: only used when rendering, as in splatfacto
            self.background_color = torch.tensor([0.1490, 0.1647, 0.2157])
        else:
            self.background_color = get_color(self.config.background_color)
        if self.config.use_bilateral_grid:
            self.bil_grids = BilateralGrid(
                num=self.num_train_data,
                grid_X=self.config.grid_shape[0],
                grid_Y=self.config.grid_shape[1],
                grid_W=self.config.grid_shape[2],
            )

        self.cameras_per_step = 1
        self._build_strategy()

    # a cached_property: nerfstudio's viewer reads every other public attribute of the model at start-up
    @cached_property
    def lpips(self) -> Optional[torch.nn.Module]:
        """LPIPS (AlexNet) on the model's device, built the first time an evaluation scores it (None
        without its weights: warned there, :mod:`.metrics`). Not at start-up, where splatfacto builds it:
        a run that never scores LPIPS never loads AlexNet or tries its download (offline, on a compute
        node, every rank waited for the download to fail before step 0). Not a submodule, so neither in
        checkpoints nor in ``state_dict`` (``load_pipeline`` drops the LPIPS weights of older checkpoints)."""
        if "lpips" in self._modules:  # set as a module (tests): nn.Module keeps it there
            return self._modules["lpips"]
        with torch.random.fork_rng(devices=[]):  # AlexNet's initial draws: the training's random stream stays the same
            module = upstream.build_lpips(warn=False)
        return None if module is None else module.to(self.device)

    def loss_ssim_note(self) -> Optional[str]:
        """The line that says which SSIM the loss runs, None where it is splatfacto's (pytorch_msssim);
        the trainer prints it once per run (a model built by ns-eval or ns-export trains nothing). A CUDA-graph
        step that replaces fused-ssim says so itself (training/graphed_step.py)."""
        device = torch.device(self.kwargs.get("device", "cpu"))
        if self.ssim_in_fused_loss():
            return "SSIM of the loss: fused Triton kernels, with the composite and L1 (--pipeline.model.fused-loss)"
        if self.loss_ssim.backend(device) == "pytorch-msssim":
            return None
        return f"SSIM of the loss: {self.loss_ssim.describe(device)}"

    def ssim_in_fused_loss(self) -> bool:
        """Whether the loss's SSIM runs inside the fused loss's Triton kernels (--pipeline.model.fused-loss where
        they run on this device), not through :attr:`loss_ssim`'s own backend."""
        return self.config.fused_loss and self.loss_ssim.fused_on(torch.device(self.kwargs.get("device", "cpu")))

    def _build_strategy(self) -> None:
        batch = collectives.get_world_size() * self.cameras_per_step  # cameras per step, for the epoch length
        seed = init.resolve_seed(self.config.init_seed)  # the initial Gaussians' seed: refines draw from it too
        options = StrategyOptions.from_model_config(self.config, self.num_train_data, batch, rng_seed=seed)
        self.strategy = build_strategy(options)
        self.strategy_state = self.strategy.initialize_state(scene_scale=1.0)
        if hasattr(self.strategy, "views"):  # the efficient strategy renders training views at its refines
            self.strategy.views = getattr(self, "refine_views", None)

    def get_training_callbacks(self, training_callback_attributes):
        """splatfacto's callbacks; the efficient strategy also gets the training views it renders at a
        refine (:class:`~ns_splat_plus.model.refine_views.RefineViews`, over the pipeline's datamanager)."""
        if hasattr(self.strategy, "views"):
            from ns_splat_plus.model.refine_views import RefineViews

            self.refine_views = RefineViews(self, training_callback_attributes.pipeline.datamanager)
            self.strategy.views = self.refine_views
        check_cap = getattr(self.strategy, "check_cap", None)  # the efficient strategy's cap (refused), MCMC's (said)
        if check_cap is not None:
            check_cap(self.strategy_state, self.num_points)  # training only, not ns-eval / ns-viewer
        # a kernel named by --pipeline.model.ssim-kernel: training only, as above
        self.loss_ssim.check_available(torch.device(self.kwargs.get("device", "cpu")))
        return super().get_training_callbacks(training_callback_attributes)

    def set_cameras_per_step(self, cameras_per_step: int) -> None:
        """B cameras per step (the datamanager's option; the pipeline calls this before training):
        the strategy's pause after an opacity reset is one epoch, num_train_data / (W x B) steps."""
        if cameras_per_step != self.cameras_per_step:
            self.cameras_per_step = cameras_per_step
            self._build_strategy()

    # as splatfacto's: Cameras only (nerfstudio's base Model also takes a RayBundle)
    def get_outputs(self, camera: Cameras) -> Dict[str, Union[torch.Tensor, List]]:  # type: ignore[override]
        if not isinstance(camera, Cameras):
            raise TypeError(f"get_outputs expects a Cameras object, got {type(camera).__name__}")
        n_cameras = camera.shape[0] if camera.shape else 1
        if self.training and n_cameras > 1:  # B cameras of one size in one rasterizer call
            if self.config.camera_optimizer.mode != "off" or self.config.use_bilateral_grid:
                raise ValueError("several cameras per step work without the camera optimizer and bilateral grid")
            optimized_camera_to_world = camera.camera_to_worlds
        elif self.training:
            optimized_camera_to_world = self.camera_optimizer.apply_to_camera(camera)
        else:
            optimized_camera_to_world = camera.camera_to_worlds

        crop_ids = None
        if self.crop_box is not None and not self.training:
            crop_ids = self.crop_box.within(self.means).squeeze()
            if crop_ids.sum() == 0:
                return self.get_empty_outputs(
                    int(camera.width.item()), int(camera.height.item()), self.background_color
                )
        g = {k: (v[crop_ids] if crop_ids is not None else v) for k, v in self.gauss_params.items()}
        colors = torch.cat((g["features_dc"][:, None, :], g["features_rest"]), dim=1)

        camtoworlds = None  # the inverse of viewmat that gsplat's stages need, kept with it
        if optimized_camera_to_world is camera.camera_to_worlds:  # no pose correction: the same every step
            viewmat, camtoworlds = view_matrices(camera)
        else:
            viewmat = world_to_camera(optimized_camera_to_world)
        scale = 1.0 / upstream.downscale_factor(self)
        K, W, H = camera_intrinsics(camera, scale)
        self.last_size = (H, W)
        if self.training:  # B cameras: the rasterizer held B x H x W pixels
            self.max_train_pixels = max(getattr(self, "max_train_pixels", 0), n_cameras * H * W)

        if self.config.rasterize_mode not in ("antialiased", "classic"):
            raise ValueError(f"Unknown rasterize_mode: {self.config.rasterize_mode}")
        render_mode: Literal["RGB", "RGB+ED"] = (
            "RGB+ED" if (self.config.output_depth_during_training or not self.training) else "RGB"
        )
        if self.config.sh_degree > 0:
            sh_degree_to_use = min(self.step // self.config.sh_degree_interval, self.config.sh_degree)
        else:
            colors = torch.sigmoid(colors).squeeze(1)
            sh_degree_to_use = None

        render, alpha, self.info = rasterize(
            means=g["means"],
            quats=g["quats"],
            scales=torch.exp(g["scales"]),
            opacities=torch.sigmoid(g["opacities"]).squeeze(-1),
            colors=colors,
            viewmats=viewmat,
            Ks=K,
            width=W,
            height=H,
            sh_degree=sh_degree_to_use,
            render_mode=render_mode,
            absgrad=getattr(self.strategy, "absgrad", False),
            rasterize_mode=self.config.rasterize_mode,
            backend=self.config.rasterizer,
            # evaluation / viewer renders larger than training's go in strips: same pixels, training's memory
            rows=None if self.training else strip_rows(H, W, self.eval_pixel_budget()),
            camtoworlds=camtoworlds,
            tight_tiles=self.config.tight_tiles,
            isect_capacity=self.isect_capacity if self.training else None,
        )
        if self.training:
            self.strategy.step_pre_backward(
                self.gauss_params, self.optimizers, self.strategy_state, self.step, self.info
            )

        background = upstream.background(self)
        depth_im = None
        if render_mode == "RGB+ED":
            depth_im = render[..., 3:4]
            depth_im = torch.where(alpha > 0, depth_im, depth_im.detach().max()).squeeze(0)
        batched = n_cameras > 1  # batched: rgb [B, H, W, 3], accumulation [B, H, W, 1]; else [H, W, ...]
        if self.training and not self.config.use_bilateral_grid:
            # the composite waits for whoever reads "rgb": the fused loss reads the render itself
            return TrainingOutputs(
                render_colors=render[..., :3],
                render_alphas=alpha,
                batched=batched,
                depth=depth_im,
                accumulation=alpha if batched else alpha.squeeze(0),
                background=background,
            )
        if self.training:
            rgb = composite(render[..., :3], alpha, background)
            if camera.metadata is not None and "cam_idx" in camera.metadata:
                rgb = upstream.apply_bilateral_grid(self, rgb, camera.metadata["cam_idx"], H, W)
        else:  # no autograd here: composite in place, no full-resolution temporaries
            rgb = render[..., :3].addcmul_(1 - alpha, background).clamp_(0.0, 1.0)
        if background.shape[0] == 3 and not self.training:
            background = background.expand(H, W, 3)
        if not batched:  # one camera: [H, W, ...]
            rgb, alpha = rgb.squeeze(0), alpha.squeeze(0)
        return {
            "rgb": rgb,
            "depth": depth_im,  # type: ignore[dict-item]  # None without depth rendering (as splatfacto's)
            "accumulation": alpha,
            "background": background,
        }

    def batch_gt_img(self, images: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
        """splatfacto's ``get_gt_img`` + ``composite_with_background`` for a batch.

        Args:
            images: [B, H, W, C] uint8 or float, C 3 or 4 (alpha composited over ``background`` [3]).

        Returns:
            [B, H', W', 3] float on the model's device, at this step's downscale.
        """
        # across the bus as stored (uint8: a quarter of the bytes) and converted on the device, as the
        # training step converts its prefetched image: the same floats (CUDA divides by 255 as a
        # multiplication by its reciprocal) and no host conversion of a full-size image (~5 ms a view)
        images = images.to(self.device, non_blocking=True)
        if images.dtype == torch.uint8:
            images = images.float() / 255.0
        images = resize_images(images, upstream.downscale_factor(self))
        if images.shape[-1] == 4:
            alpha = images[..., -1:]
            return alpha * images[..., :3] + (1 - alpha) * background
        return images

    def _gt(self, outputs, batch) -> torch.Tensor:
        """The ground truth as the loss sees it: [H, W, 3] (one camera) or [B, H, W, 3] float."""
        if batch["image"].dim() == 3:
            return self.composite_with_background(self.get_gt_img(batch["image"]), outputs["background"])
        return self.batch_gt_img(batch["image"], outputs["background"])

    def _gt_and_pred(self, outputs, batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """(ground truth, prediction) as the loss sees them: [H, W, 3] (one camera) or [B, H, W, 3]."""
        return self._gt(outputs, batch), outputs["rgb"]

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, torch.Tensor]:
        """splatfacto's losses (L1 + SSIM, optional scale regularisation, camera and bilateral-grid
        terms), with its zero scale regulariser made on the device: splatfacto's
        ``torch.tensor(0.0).to(device)`` stalls the host until the GPU has finished the forward pass.
        The L1 + SSIM term is :func:`~ns_splat_plus.model.loss.photometric_loss`."""
        main_loss = self._main_loss(outputs, batch)
        # splatfacto's every 10 steps, scaled with the schedule (W x B cameras per step, --steps-scaler)
        if (
            self.config.use_scale_regularization
            and self.step % max(1, getattr(self.config, "scale_reg_every", 10)) == 0
        ):
            scale_exp = torch.exp(self.scales)
            ratio = scale_exp.amax(dim=-1) / scale_exp.amin(dim=-1)
            scale_reg = 0.1 * (ratio.clamp_min(self.config.max_gauss_ratio) - self.config.max_gauss_ratio).mean()
        else:
            scale_reg = torch.zeros((), device=main_loss.device)
        loss_dict = {"main_loss": main_loss, "scale_reg": scale_reg}
        if self.config.strategy == "mcmc":  # the MCMC recipe's regularisers (gsplat's and nerfstudio's)
            if self.config.mcmc_opacity_reg > 0.0:
                loss_dict["mcmc_opacity_reg"] = self.config.mcmc_opacity_reg * torch.sigmoid(self.opacities).mean()
            if self.config.mcmc_scale_reg > 0.0:
                loss_dict["mcmc_scale_reg"] = self.config.mcmc_scale_reg * torch.exp(self.scales).mean()
        if self.training:
            self.camera_optimizer.get_loss_dict(loss_dict)
            if self.config.use_bilateral_grid:
                loss_dict["tv_loss"] = 10 * total_variation_loss(self.bil_grids.grids)
        return loss_dict

    def _main_loss(self, outputs, batch) -> torch.Tensor:
        """splatfacto's ``(1 - lambda) * L1 + lambda * (1 - SSIM)``, defined once in :mod:`.loss` (masks
        included); its fused kernels run where --pipeline.model.fused-loss is on and they apply."""
        mask = batch.get("mask")
        if mask is not None:
            factor = upstream.downscale_factor(self)
            mask = resize_images(mask, factor) if mask.dim() == 4 else upstream.downscale_mask(self, mask)
            mask = mask.to(self.device)
        return photometric_loss(
            outputs,
            self._loss_gt(outputs, batch),
            self.loss_ssim,
            self.config.ssim_lambda,
            mask=mask,
            fused=self.config.fused_loss,
            graphs=self.loss_graphs,
        )

    def _loss_gt(self, outputs, batch) -> torch.Tensor:
        """The ground truth at the render's size: the photo itself (uint8 or float32, converted where
        the loss reads it) where it needs no alpha composite or downscale, else splatfacto's float one."""
        images = batch["image"]
        as_is = images.shape[-1] == 3 and images.dtype in (torch.uint8, torch.float32)
        if as_is and upstream.downscale_factor(self) == 1:
            return images.to(self.device)
        return self._gt(outputs, batch)

    def eval_pixel_budget(self) -> int:
        """Evaluation renders above this many pixels are rasterized in strips to the host (0: never); their
        SSIM and LPIPS then run on the device from row crops (:func:`.metrics.image_metrics`)."""
        if self.config.eval_max_pixels is not None:
            return self.config.eval_max_pixels
        return getattr(self, "max_train_pixels", 0)

    def get_metrics_dict(self, outputs, batch) -> Dict[str, torch.Tensor]:
        """splatfacto's training metrics, but PSNR only on logging steps (``metrics_every``, set by
        the trainer to --logging.steps-per-log) and on the device: splatfacto's torchmetrics PSNR
        synchronises the host with the GPU on every step, and nerfstudio writes it only on log steps."""
        metrics_dict: Dict[str, torch.Tensor] = {"gaussian_count": self.num_points}
        every = getattr(self, "metrics_every", 1)
        if every > 0 and self.step % every == 0:
            gt_rgb, _ = self._gt_and_pred(outputs, batch)
            metrics_dict["psnr"] = psnr_on_device(outputs["rgb"], gt_rgb)
            if self.config.color_corrected_metrics:
                from nerfstudio.model_components.lib_bilagrid import color_correct

                metrics_dict["cc_psnr"] = psnr_on_device(color_correct(outputs["rgb"], gt_rgb), gt_rgb)
        self.camera_optimizer.get_metrics_dict(metrics_dict)
        return metrics_dict

    def get_image_metrics_and_images(  # type: ignore[override]  # lpips is None without its weights (offline)
        self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
    ) -> Tuple[Dict[str, Optional[float]], Dict[str, torch.Tensor]]:
        return image_metrics(self, outputs, batch)
