"""The SSIM term of the training loss: fused kernels on CUDA (fused-ssim where installed, else Triton), pytorch_msssim elsewhere.

Why: splatfacto's SSIM (``pytorch_msssim.SSIM``: an 11-tap Gaussian window, sigma 1.5, valid
padding) runs as ten cuDNN grouped convolutions per step plus their backward kernels and a dozen
elementwise ones. At full size on fox that is 2.2 of 5.9 ms of GPU work per step at one camera,
and 9.7 of 22.0 ms for four (benchmarks/2026-11-24-h200-kernels-fullres). Here the same function
takes three kernels forward and two backward, every one of them memory-bound
(:mod:`ns_splat_plus.kernels.ssim`, where the gradient is derived). :func:`.fused_loss.fused_photometric_loss` runs the same
kernels with splatfacto's background composite and L1 term folded in.

Where rahul-goel/fused-ssim (the CUDA package FastGS and gsplat's examples use) is installed, ``auto``
runs it instead: side by side on an H200 (benchmarks/2026-11-28-h200x2-gpu-tier-and-ssim-libraries) it
took 0.53 against the Triton kernels' 0.83 ms forward + backward at 1500x1000 and 0.67 against 0.77 ms at
800x600 (0.79 against 0.65 ms at 1920x1080), and a whole plush-dog step 4.6-5.0 against 5.3-5.4 ms. It is
not on PyPI and needs nvcc to build, so the Triton kernels stay the default that every install gets
(no compiler at install time); fussim, the PyPI package with prebuilt wheels, did not load with torch
2.11 (its extensions are built against other torch versions). Both keep pytorch_msssim's valid padding,
so the loss is splatfacto's. A run that records its steps in a CUDA graph (``--cuda-graph``) runs the Triton
kernels instead (:attr:`TrainingSSIM.recordable`): fused-ssim launches its kernels on CUDA's legacy default
stream, which a graph recording on torch's current stream does not capture (its replays computed a stale SSIM:
tests/training/test_graphed_step_gpu.py).

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
from typing import Literal, Optional

import torch
from pytorch_msssim import SSIM

from ns_splat_plus.kernels import ssim as kernels
from ns_splat_plus.kernels.ssim import MAX_ELEMENTS, WINDOW_SIZE

SsimKernel = Literal["auto", "fused-ssim", "triton", "pytorch-msssim"]

WINDOW_SIGMA = 1.5


def triton_interpreting() -> bool:
    """True when Triton runs its kernels in the interpreter (TRITON_INTERPRET=1: CPU tensors, tests)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.lru_cache(maxsize=1)
def fused_ssim_library():
    """The ``fused_ssim`` module of rahul-goel/fused-ssim when it is installed with its CUDA kernels, else None."""
    try:
        import fused_ssim
        from fused_ssim import fusedssim  # noqa: F401  (bound only where its CUDA extension loaded)
    except Exception:  # not installed, built without CUDA, or broken
        return None
    return fused_ssim


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
    by splatfacto's loss, ``ssim(gt, pred)``, [N, C, H, W] each; fused kernels where they apply.

    Args:
        kernel: "auto": on CUDA, fused-ssim where it is installed, else the Triton kernels where Triton
            imports; pytorch_msssim elsewhere. "fused-ssim" / "triton": that one on CUDA (training refuses
            to start where it does not import: :meth:`check_available`); "pytorch-msssim": splatfacto's.

    Holds no parameters or buffers: checkpoints are those of splatfacto's ``SSIM`` module. Constructing it
    never fails for a missing library, so that ns-eval, ns-viewer and ns-export (which never run the loss)
    load a run trained where that library was installed.
    """

    def __init__(self, kernel: SsimKernel = "auto", channel: int = 3):
        super().__init__()
        if kernel not in ("auto", "fused-ssim", "triton", "pytorch-msssim"):
            raise ValueError(f"unknown SSIM kernel {kernel!r}: auto, fused-ssim, triton or pytorch-msssim")
        self.kernel = kernel
        self.reference = SSIM(data_range=1.0, size_average=True, channel=channel)
        self.recordable = False
        """Set by the CUDA-graph step (``--cuda-graph``): every call then runs kernels that a graph records, the
        Triton ones in place of fused-ssim, eager steps too, so that the recording's kernels ran before it."""

    def check_available(self, device: Optional[torch.device] = None) -> None:
        """Refuse (:class:`~ns_splat_plus.errors.UserInputError`, before training) a kernel asked for by name
        that does not import here, or that would not run on ``device`` (the CPU: it ran pytorch_msssim silently)."""
        from ns_splat_plus.errors import UserInputError

        if self.kernel == "triton" and not triton_available():
            raise UserInputError(
                "--pipeline.model.ssim-kernel triton: Triton does not import here",
                "pip install triton, or pass --pipeline.model.ssim-kernel auto (or pytorch-msssim)",
            )
        if self.kernel == "fused-ssim" and fused_ssim_library() is None:
            raise UserInputError(
                "--pipeline.model.ssim-kernel fused-ssim: the fused_ssim package (with its CUDA kernels) does not "
                "import here",
                "pip install git+https://github.com/rahul-goel/fused-ssim (it needs nvcc), or pass "
                "--pipeline.model.ssim-kernel auto",
            )
        interpreted = self.kernel == "triton" and triton_interpreting()  # the tests' Triton interpreter runs anywhere
        if device is not None and device.type != "cuda" and self.kernel in ("fused-ssim", "triton") and not interpreted:
            raise UserInputError(
                f"--pipeline.model.ssim-kernel {self.kernel} runs on CUDA GPUs only, and this run trains on "
                f"{device.type}, where the loss's SSIM is pytorch_msssim",
                "pass --pipeline.model.ssim-kernel auto (or pytorch-msssim), or train on a CUDA GPU",
            )

    def backend(self, device: torch.device) -> Literal["fused-ssim", "triton", "pytorch-msssim"]:
        """What runs for images on ``device`` (unless their shape rules the fused kernels out)."""
        if self.kernel == "pytorch-msssim":
            return "pytorch-msssim"
        if self.kernel in ("auto", "fused-ssim") and device.type == "cuda" and fused_ssim_library() is not None:
            return "fused-ssim"
        return "triton" if self.fused_on(device) else "pytorch-msssim"

    def fused_on(self, device: torch.device) -> bool:
        """Whether the Triton kernels may run for images on ``device`` (the fused loss runs them whenever they
        may, since it asks for them; the SSIM term alone prefers fused-ssim under ``auto``)."""
        if self.kernel not in ("auto", "triton") or not triton_available():
            return False
        return device.type == "cuda" or triton_interpreting()

    def describe(self, device: torch.device) -> str:
        """What the loss's SSIM runs as on ``device``, for the console."""
        return {"fused-ssim": "fused-ssim", "triton": "fused Triton kernels"}.get(
            self.backend(device), "pytorch_msssim"
        )

    def uses_fused(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether ``forward(a, b)`` runs fused kernels (fused-ssim or Triton)."""
        return self._fused_backend(a, b) is not None

    def _fused_backend(self, a: torch.Tensor, b: torch.Tensor) -> Optional[Literal["fused-ssim", "triton"]]:
        """The fused kernels ``forward(a, b)`` runs, or None where it runs pytorch_msssim."""
        backend = self.backend(a.device)
        if backend == "fused-ssim" and (self.recordable or torch.cuda.is_current_stream_capturing()):
            # fused-ssim launches on CUDA's legacy default stream, not torch's current one: a CUDA graph
            # (--cuda-graph) would not record its kernels and would replay a stale SSIM and gradient
            backend = "triton" if triton_available() else "pytorch-msssim"
        if backend == "pytorch-msssim":
            return None
        small_enough = a.numel() < MAX_ELEMENTS  # e.g. eight 8K images per step go to pytorch_msssim
        applies = (
            a.dim() == 4
            and min(a.shape[-2:]) >= WINDOW_SIZE
            and small_enough
            and not (a.requires_grad and b.requires_grad)
            and (backend == "triton" or a.dtype == b.dtype == torch.float32)
        )
        return backend if applies else None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        backend = self._fused_backend(a, b)  # once per call: this is in every training step
        if backend is None:
            return self.reference(a, b)
        # SSIM is symmetric in its two images; the fused passes differentiate their first
        x, y = (b, a) if not a.requires_grad else (a, b)
        if backend == "fused-ssim":
            library = fused_ssim_library()
            with on_device_of(x):
                return library.fused_ssim(x, y.contiguous(), padding="valid", train=x.requires_grad)
        return fused_ssim(x, y)
