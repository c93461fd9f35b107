"""FastGS's multi-view scores of the Gaussians, computed through the model's own rasterizer.

Entry point: :func:`multiview_scores`. At a refine, ``V`` training views drawn by
:func:`sample_views` (the same on every rank: seeded by the run seed and the step) are rendered
with the current Gaussians. In each view the per-pixel L1 error (mean over the colour channels)
is normalised to [0, 1] by its minimum and maximum and thresholded: ``M[p] = norm_error[p] >
loss_thresh``. Each Gaussian ``i`` gets its *coverage* of the high-error pixels, ``sum_p w[i, p]
* M[p]``, where ``w[i, p] = alpha_i(p) * T_i(p)`` is its alpha-blend weight at pixel ``p`` (the
weight the rasterizer gives its colour). That sum is the gradient, with respect to a per-Gaussian
scalar ``s_i`` rendered as a one-channel colour, of ``sum_p M[p] * render(s)[p]``: one more
render and its backward, with the rasterizer the model trains with (gsplat on CUDA, the reference
on the CPU) and no new kernel. FastGS counts the pixels (``w > 0``); the weighted sum is what a
backward gives and weighs pixels the Gaussian barely reaches less.

With W ranks, each sampled view is rendered by one rank, the lowest that holds its image (ranks hold
their own shard of the training images), and the sums are reduced across ranks, so every rank
holds the same scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Protocol, Sequence, Tuple

import torch
from torch import Tensor

from ns_splat_plus.parallel import collectives
from ns_splat_plus.strategy.monitor import step_seed


class RefineViewSource(Protocol):
    """What the model gives the strategy to render training views at a refine (``model/refine_views.py``)."""

    def num_views(self) -> int:
        """Number of training views that can be drawn."""

    def owns(self, index: int) -> bool:
        """Whether this rank holds the image of training view ``index`` (its shard of the cameras)."""

    def downscale(self) -> int:
        """This step's resolution-schedule divisor (1: full resolution)."""

    def render_view(self, index: int) -> Tuple[Tensor, Tensor, Tensor]:
        """``(rendered [H, W, 3], ground truth [H, W, 3], loss [])`` of training view ``index`` at this
        step's resolution, without autograd; ``loss`` is the view's photometric loss."""

    def blend_weight_sums(self, index: int, pixel_weights: Tensor) -> Tensor:
        """``[N]``: ``sum_p w[i, p] * pixel_weights[p]`` over the pixels of view ``index``, where
        ``w[i, p]`` is Gaussian ``i``'s alpha-blend weight at pixel ``p``. ``pixel_weights``: [H, W]."""


def sample_views(num_views: int, count: int, seed: int, step: int) -> List[int]:
    """``min(count, num_views)`` distinct view indices drawn without replacement (FastGS's
    ``sampling_cameras``), a function of (``seed``, ``step``) only: the same on every rank and in a
    resumed run."""
    generator = torch.Generator().manual_seed(step_seed(seed, step))
    return torch.randperm(num_views, generator=generator)[: min(count, num_views)].tolist()


def high_error_mask(rendered: Tensor, ground_truth: Tensor, loss_thresh: float) -> Tensor:
    """FastGS's ``get_loss`` and threshold: the per-pixel L1 error (mean over channels), min-max
    normalised, above ``loss_thresh``. An error map that is constant flags no pixel.

    Args:
        rendered, ground_truth: [H, W, 3].

    Returns:
        [H, W] float mask (1.0 where the pixel's error is high).
    """
    error = (rendered - ground_truth).abs().mean(dim=-1)
    low, high = error.min(), error.max()
    normalised = (error - low) / (high - low).clamp_min(torch.finfo(error.dtype).tiny)
    return ((normalised > loss_thresh) & (high > low)).to(error.dtype)


@dataclass
class MultiViewScores:
    """The scores of one refine, the same on every rank.

    ``coverage`` [N]: per Gaussian, the high-error pixels it covers summed over the views, weighted
    by its blend weights, in full-resolution pixels (x downscale^2). ``loss_weighted`` [N]: the same
    sum with each view's term multiplied by that view's photometric loss (FastGS's pruning score
    before its min-max normalisation). ``losses`` [V]: the views' losses. ``high_pixels`` [V]: the
    views' high-error pixel counts (at the render's resolution)."""

    views: List[int]
    coverage: Tensor
    loss_weighted: Tensor
    losses: Tensor
    high_pixels: Tensor

    def per_view_coverage(self) -> Tensor:
        """[N] the coverage averaged over the views (FastGS's ``importance_score``, weighted)."""
        return self.coverage / max(1, len(self.views))

    def pruning_score(self) -> Tensor:
        """[N] FastGS's pruning score: ``loss_weighted`` min-max normalised to [0, 1] (zero when constant)."""
        low, high = self.loss_weighted.min(), self.loss_weighted.max()
        return (self.loss_weighted - low) / (high - low).clamp_min(torch.finfo(self.loss_weighted.dtype).tiny)


@torch.no_grad()
def multiview_scores(
    source: RefineViewSource, views: Sequence[int], loss_thresh: float, num_gaussians: int, device: torch.device
) -> MultiViewScores:
    """Render ``views`` (this rank's share of them), score every Gaussian, reduce across ranks.

    Args:
        source: the model's renderer of training views. views: the sampled view indices (the same
            list on every rank). loss_thresh: FastGS's threshold on the normalised L1 error.
        num_gaussians: N, the length of the scores. device: where the scores live (the model's).
    """
    rank, world_size = collectives.get_rank(), collectives.get_world_size()
    # each view to the lowest rank that holds its image: one render per view whatever the shards
    renderer = torch.tensor([rank if source.owns(v) else world_size for v in views], device=device)
    collectives.all_reduce(renderer, "MIN")
    mine = [k for k, r in enumerate(renderer.tolist()) if r == rank]
    scale = float(source.downscale()) ** 2  # a pixel at 1/d resolution stands for d^2 full-resolution ones
    coverage = torch.zeros(num_gaussians, device=device)
    loss_weighted = torch.zeros(num_gaussians, device=device)
    losses = torch.zeros(len(views), device=device)
    high_pixels = torch.zeros(len(views), device=device)
    for k in mine:
        rendered, ground_truth, loss = source.render_view(views[k])
        mask = high_error_mask(rendered, ground_truth, loss_thresh)
        with torch.enable_grad():
            sums = source.blend_weight_sums(views[k], mask) * scale
        coverage += sums
        loss_weighted += loss * sums
        losses[k] = loss
        high_pixels[k] = mask.sum()
    for tensor in (coverage, loss_weighted, losses, high_pixels):
        collectives.all_reduce(tensor, "SUM")
    return MultiViewScores(list(views), coverage, loss_weighted, losses, high_pixels)
