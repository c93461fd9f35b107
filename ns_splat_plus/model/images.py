"""The model's images: the training composite, strips of large renders, the ground-truth downscale.

Entry points: :func:`composite` and :class:`TrainingOutputs` (the training composite, made only
where it is read), :func:`strip_rows` (tile-aligned row ranges for renders larger than training's)
and :func:`resize_images` (splatfacto's ground-truth downscale for a batch).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch


def composite(colors: torch.Tensor, alphas: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
    """splatfacto's training composite: ``clamp(colors + (1 - alphas) * background, 0, 1)``.

    Args:
        colors: [..., 3]. alphas: [..., 1]. background: [3].
    """
    return torch.clamp(colors + (1 - alphas) * background, 0.0, 1.0)


class TrainingOutputs(dict):
    """``get_outputs``' dict in training, whose ``"rgb"`` (the composite; [H, W, 3] for one camera,
    [B, H, W, 3] batched) is made on first read: the fused loss reads the render before its
    composite (``"render_colors"`` [B, H, W, 3], ``"render_alphas"`` [B, H, W, 1]) and the
    composite's kernels then run only on the steps that read ``"rgb"`` (logging steps' metrics)."""

    def __init__(self, *, batched: bool, **outputs: Optional[torch.Tensor]) -> None:  # depth: None unless rendered
        super().__init__(**outputs)
        self.batched = batched

    def __missing__(self, key: str) -> torch.Tensor:
        if key != "rgb":
            raise KeyError(key)
        rgb = composite(self["render_colors"], self["render_alphas"], self["background"])
        self["rgb"] = rgb if self.batched else rgb.squeeze(0)
        return self["rgb"]


STRIP_ALIGN = 16  # gsplat's tile size: strips on tile boundaries render exactly the same pixels


def strip_rows(height: int, width: int, max_pixels: int) -> Optional[List[Tuple[int, int]]]:
    """Tile-aligned row ranges [top, bottom) of at most ``max_pixels`` each; None: render whole."""
    if max_pixels <= 0 or height * width <= max_pixels:
        return None
    rows = max(STRIP_ALIGN, (max_pixels // max(width, 1)) // STRIP_ALIGN * STRIP_ALIGN)
    return [(top, min(top + rows, height)) for top in range(0, height, rows)]


def resize_images(images: torch.Tensor, d: int) -> torch.Tensor:
    """splatfacto's ``resize_image`` (OpenCV's 'area' downscale by ``d``) on a batch.

    Args:
        images: [B, H, W, C]. d: the integer downscale factor (1: returned as is).

    Returns:
        [B, H // d, W // d, C] float32 (``images`` itself when ``d`` is 1).
    """
    if d <= 1:
        return images
    import torch.nn.functional as tf

    B, H, W, C = images.shape
    weight = (1.0 / (d * d)) * torch.ones((1, 1, d, d), dtype=torch.float32, device=images.device)
    planes = images.to(torch.float32).permute(0, 3, 1, 2).reshape(B * C, 1, H, W)  # every channel alone, as upstream
    out = tf.conv2d(planes, weight, stride=d)
    return out.reshape(B, C, out.shape[-2], out.shape[-1]).permute(0, 2, 3, 1)
