"""The SSIM term of the training loss: fused Triton kernels on CUDA, pytorch_msssim elsewhere.

Why: splatfacto's SSIM (``pytorch_msssim.SSIM``: an 11-tap Gaussian window, sigma 1.5, valid
padding) runs as ten cuDNN grouped convolutions per step plus their backward kernels and a dozen
elementwise ones. At full size on fox that is 2.2 of 5.9 ms of GPU work per step at one camera,
and 9.7 of 22.0 ms for four (benchmarks/2026-11-24-h200-kernels-fullres). Here the same function
takes three kernels forward and two backward, every one of them memory-bound
(:mod:`ns_splat_plus.kernels.ssim`, where the gradient is derived). :mod:`.photometric_loss` runs the same
kernels with splatfacto's background composite and L1 term folded in.

Trainers such as FastGS use the CUDA package ``fused-ssim`` for the same reason; this one is
Triton (no compiler at install time) and keeps pytorch_msssim's valid padding, so that the loss is
splatfacto's.

The function is pytorch_msssim's, ``SSIM(data_range=1.0, size_average=True, channel=C)``: the
mean over images, channels and valid pixels of ``l * cs`` with C1 = 0.01**2 and C2 = 0.03**2.
It is not bitwise the same (other summation order; cuDNN may also run its convolutions in TF32):
tests/kernels/test_ssim.py compares both with a float64 reference. Gradients flow to one input (the
render); with both inputs requiring gradients, images under 11 pixels on a side (where
pytorch_msssim skips the filter), batches of 429M values or more (32-bit offsets), or no Triton,
pytorch_msssim runs instead.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Literal

import torch
from pytorch_msssim import SSIM

from ns_splat_plus.kernels import ssim as kernels
from ns_splat_plus.kernels.ssim import MAX_ELEMENTS, WINDOW_SIZE

SsimKernel = Literal["auto", "triton", "pytorch-msssim"]

WINDOW_SIGMA = 1.5


def triton_interpreting() -> bool:
    """True when Triton runs its kernels in the interpreter (TRITON_INTERPRET=1: CPU tensors, tests)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # not installed (CPU-only torch, Windows, macOS), or broken
        return False
    return True


class _FusedSSIM(torch.autograd.Function):
    """Mean SSIM of x and y, [N, C, H, W] each; the gradient goes to x only."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
        images = kernels.Images(x, y)
        value, derivatives = kernels.forward(
            images, window, kernels.Weights(), keep_derivatives=ctx.needs_input_grad[0]
        )
        if derivatives is not None:
            ctx.save_for_backward(x, y, window, derivatives)
        return value

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, y, window, derivatives = ctx.saved_tensors
        grad, _ = kernels.backward(grad_out, kernels.Images(x, y), window, kernels.Weights(), derivatives)
        return grad, None, None


def fused_ssim(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean SSIM (pytorch_msssim's, data range 1) with the fused kernels; the gradient flows to ``x``.

    Args:
        x: [N, C, H, W], H and W >= 11, any strides (a permuted [N, H, W, C] render is read in place).
        y: [N, C, H, W] on x's device, no gradient.

    Returns:
        [] float32.
    """
    check_images("fused_ssim", x, y)
    with on_device_of(x):
        return _FusedSSIM.apply(x, y, window_on(x.device))


def check_images(caller: str, x: torch.Tensor, y: torch.Tensor) -> None:
    """Raises ValueError for images the kernels cannot take ([N, C, H, W] each, same shape)."""
    if x.shape != y.shape or x.dim() != 4:
        raise ValueError(
            f"{caller} needs two [N, C, H, W] images of one shape, got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    if min(x.shape[-2:]) < WINDOW_SIZE:
        raise ValueError(f"{caller} needs images of at least {WINDOW_SIZE} pixels on a side, got {tuple(x.shape)}")
    if y.requires_grad:
        raise ValueError(f"{caller} gives no gradient to its second image; pass the one that needs it first")
    if x.numel() >= MAX_ELEMENTS:
        raise ValueError(
            f"{caller} takes at most {MAX_ELEMENTS - 1} elements (its offsets are 32-bit), got {tuple(x.shape)}"
        )


def on_device_of(x: torch.Tensor):
    """Triton launches on the current CUDA device: make it x's (a no-op context elsewhere)."""
    if x.is_cuda and x.device.index != torch.cuda.current_device():
        return torch.cuda.device(x.device)
    return contextlib.nullcontext()


@functools.lru_cache(maxsize=8)
def window_on(device: torch.device) -> torch.Tensor:
    """pytorch_msssim's own window (its ``SSIM.win``, the same float32 numbers) on ``device``: [11]."""
    return SSIM(data_range=1.0, win_size=WINDOW_SIZE, win_sigma=WINDOW_SIGMA, channel=1).win.reshape(-1).to(device)


class TrainingSSIM(torch.nn.Module):
    """Mean SSIM as ``pytorch_msssim.SSIM(data_range=1.0, size_average=True, channel=3)`` is called
    by splatfacto's loss, ``ssim(gt, pred)``, [N, C, H, W] each; the fused kernels where they apply.

    Args:
        kernel: "auto": fused on CUDA when Triton imports, pytorch_msssim elsewhere; "triton": fused
            on CUDA (an error at construction without Triton); "pytorch-msssim": splatfacto's.

    Holds no parameters or buffers: checkpoints are those of splatfacto's ``SSIM`` module.
    """

    def __init__(self, kernel: SsimKernel = "auto", channel: int = 3):
        super().__init__()
        if kernel not in ("auto", "triton", "pytorch-msssim"):
            raise ValueError(f"unknown SSIM kernel {kernel!r}: auto, triton or pytorch-msssim")
        if kernel == "triton" and not triton_available():
            raise RuntimeError(
                "--pipeline.model.ssim-kernel triton: Triton does not import here "
                "(pip install triton, or use auto / pytorch-msssim)"
            )
        self.kernel = kernel
        self.reference = SSIM(data_range=1.0, size_average=True, channel=channel)

    def fused_on(self, device: torch.device) -> bool:
        """Whether images on ``device`` get the fused kernels (unless their shape rules them out)."""
        if self.kernel == "pytorch-msssim" or not triton_available():
            return False
        return device.type == "cuda" or triton_interpreting()

    def describe(self, device: torch.device) -> str:
        """What the loss's SSIM runs as on ``device``, for the console."""
        return "fused Triton kernels" if self.fused_on(device) else "pytorch_msssim"

    def uses_fused(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether ``forward(a, b)`` runs the fused kernels."""
        if not self.fused_on(a.device):
            return False
        small_enough = a.numel() < MAX_ELEMENTS  # e.g. eight 8K images per step go to pytorch_msssim
        return (
            a.dim() == 4
            and min(a.shape[-2:]) >= WINDOW_SIZE
            and small_enough
            and not (a.requires_grad and b.requires_grad)
        )

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not self.uses_fused(a, b):
            return self.reference(a, b)
        # SSIM is symmetric in its two images; the fused pass differentiates its first
        return fused_ssim(b, a) if not a.requires_grad else fused_ssim(a, b)
