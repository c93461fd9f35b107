"""Training views rendered for the efficient strategy's refines: :class:`RefineViews`.

The model's :class:`~ns_splat_plus.strategy.multiview.RefineViewSource`: it renders a training view
with the current Gaussians through :func:`ns_splat_plus.raster.rasterize` (gsplat on CUDA, the
reference on the CPU), with the camera, resolution schedule, colours (spherical harmonics at this
step's degree) and loss of the training step, and gives the strategy the per-Gaussian sums of blend
weights it scores with. The ground truth is the datamanager's (``cached_train``), as training reads
it. Nothing here touches the training step's state (``model.info``, gradients of the parameters):
the Gaussians are rendered detached.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.model.cameras import camera_intrinsics, view_matrices
from ns_splat_plus.model.images import composite, resize_images
from ns_splat_plus.model.loss import reference_photometric_loss
from ns_splat_plus.raster import rasterize


class RefineViews:
    """Renders training view ``index`` of ``datamanager`` with ``model``'s current Gaussians."""

    def __init__(self, model, datamanager) -> None:
        self.model = model
        self.datamanager = datamanager

    def num_views(self) -> int:
        return len(self.datamanager.train_dataset)

    def owns(self, index: int) -> bool:
        held = getattr(self.datamanager.cached_train, "indices", None)  # the store of this rank's shard
        return True if held is None else index in held

    def downscale(self) -> int:
        return int(upstream.downscale_factor(self.model))  # the strategy runs in training: this step's divisor

    def _camera(self, index: int):
        single = getattr(self.datamanager, "_single_camera", None)  # keeps the camera's view matrix and K
        if single is not None:
            return single(index)
        return self.datamanager.train_dataset.cameras[index : index + 1].to(self.model.device)

    def _gaussians(self) -> Dict[str, Tensor]:
        g = {k: v.detach() for k, v in self.model.gauss_params.items()}
        return {
            "means": g["means"],
            "quats": g["quats"],
            "scales": torch.exp(g["scales"]),
            "opacities": torch.sigmoid(g["opacities"]).squeeze(-1),
            "features_dc": g["features_dc"],
            "features_rest": g["features_rest"],
        }

    def _rasterize(self, index: int, colors: Tensor, sh_degree) -> Tuple[Tensor, Tensor]:
        """``(render [H, W, D], alpha [H, W, 1])`` of view ``index`` at this step's resolution."""
        config = self.model.config
        g = self._gaussians()
        camera = self._camera(index)
        viewmat, camtoworlds = view_matrices(camera)
        K, width, height = camera_intrinsics(camera, 1.0 / self.downscale())
        render, alpha, _ = rasterize(
            means=g["means"],
            quats=g["quats"],
            scales=g["scales"],
            opacities=g["opacities"],
            colors=colors,
            viewmats=viewmat,
            Ks=K,
            width=width,
            height=height,
            sh_degree=sh_degree,
            render_mode="RGB",
            rasterize_mode=config.rasterize_mode,
            backend=config.rasterizer,
            camtoworlds=camtoworlds,
            tight_tiles=config.tight_tiles,
        )
        return render[0], alpha[0]

    def _colors(self) -> Tuple[Tensor, object]:
        """The colours as the training step renders them: SH up to this step's degree, or RGB."""
        config = self.model.config
        g = self._gaussians()
        colors = torch.cat((g["features_dc"][:, None, :], g["features_rest"]), dim=1)
        if config.sh_degree > 0:
            return colors, min(self.model.step // config.sh_degree_interval, config.sh_degree)
        return torch.sigmoid(colors).squeeze(1), None

    def _ground_truth(self, index: int, background: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """``(gt [H, W, 3] float, mask [H, W, 1] or None)`` at this step's resolution."""
        data = self.datamanager.cached_train[index]
        gt = self.model.batch_gt_img(data["image"][None], background)[0]
        mask = data.get("mask")
        if mask is not None:
            mask = resize_images(mask[None].to(gt.device).to(torch.float32), self.downscale())[0]
        return gt, mask

    @torch.no_grad()
    def render_view(self, index: int) -> Tuple[Tensor, Tensor, Tensor]:
        """``(rendered [H, W, 3], gt [H, W, 3], loss [])``: the composite over the model's fixed
        background (its viewer's when training on random ones), masked pixels set to the ground truth."""
        background = self.model.background_color.to(self.model.device)
        colors, sh_degree = self._colors()
        render, alpha = self._rasterize(index, colors, sh_degree)
        rgb = composite(render[..., :3], alpha, background)
        gt, mask = self._ground_truth(index, background)
        loss = reference_photometric_loss(rgb, gt, self.model.loss_ssim, self.model.config.ssim_lambda, mask)
        if mask is not None:  # no error where the dataset masks the photo out
            rgb = torch.where(mask > 0.5, rgb, gt)
        return rgb, gt, loss

    def blend_weight_sums(self, index: int, pixel_weights: Tensor) -> Tensor:
        """``[N]`` ``sum_p w[i, p] * pixel_weights[p]``: a per-Gaussian scalar ``s`` (zeros) rendered as
        a one-channel colour gives ``render[p] = sum_i w[i, p] * s_i``, so the gradient of
        ``sum_p pixel_weights[p] * render[p]`` with respect to ``s_i`` is the sum. ``pixel_weights``: [H, W]."""
        n = len(self.model.gauss_params["means"])
        scalar = torch.zeros((n, 1), device=self.model.device, requires_grad=True)
        with torch.enable_grad():
            render, _ = self._rasterize(index, scalar, None)
            if not render.requires_grad:  # no Gaussian in view
                return torch.zeros(n, device=self.model.device)
            (grad,) = torch.autograd.grad((render[..., 0] * pixel_weights).sum(), scalar, allow_unused=True)
        return torch.zeros(n, device=self.model.device) if grad is None else grad[:, 0]
