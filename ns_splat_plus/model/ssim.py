"""The SSIM term of the training loss: four fused Triton kernels on CUDA, pytorch_msssim elsewhere.

Why: splatfacto's SSIM (``pytorch_msssim.SSIM``: an 11-tap Gaussian window, sigma 1.5, valid
padding) runs as ten cuDNN grouped convolutions per step plus their backward kernels and a dozen
elementwise ones. At full size on fox that is 2.2 of 5.9 ms of GPU work per step at one camera,
and 9.7 of 22.0 ms for four (benchmarks/h200-2026-11-24/kernels-fullres). Here the same function
takes two passes forward and two backward, one kernel each, every one of them memory-bound:

1. rows: the five horizontally filtered maps of x, y, x*x, y*y, x*y;
2. columns: the vertical filter, the SSIM map summed per block, and the three per-pixel
   derivatives the backward pass needs;
3. rows, transposed: the horizontal filter of those three maps, back to full width;
4. columns, transposed: back to full height, combined with x and y into the gradient of x.

Trainers such as FastGS use the CUDA package ``fused-ssim`` for the same reason; this one is
Triton (no compiler at install time) and keeps pytorch_msssim's valid padding, so that the loss is
splatfacto's.

The function is pytorch_msssim's, ``SSIM(data_range=1.0, size_average=True, channel=C)``: the
mean over images, channels and valid pixels of ``l * cs`` with C1 = 0.01**2 and C2 = 0.03**2.
It is not bitwise the same (other summation order; cuDNN may also run its convolutions in TF32):
tests/test_ssim.py compares both with a float64 reference. Gradients flow to one input (the
render); with both inputs requiring gradients, images under 11 pixels on a side (where
pytorch_msssim skips the filter), batches of 429M values or more (32-bit offsets), or no Triton,
pytorch_msssim runs instead.

Gradient (derived here; ``g`` is the window, ``*`` the valid filter, ``g^T *`` its transpose)::

    mu_x = g * x,  s_xx = g * x^2 - mu_x^2,  s_xy = g * (x y) - mu_x mu_y
    S = mean_p l(p) cs(p),  l = (2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2 + C1),
                            cs = (2 s_xy + C2) / (s_xx + s_yy + C2)
    dS/dx = (g^T * A) + 2 x (g^T * B) + y (g^T * C), divided by the number of valid pixels, with
    B = d(l cs)/d s_xx,  C = d(l cs)/d s_xy,  A = d(l cs)/d mu_x - 2 mu_x B - mu_y C.
"""

from __future__ import annotations

import functools
import os
from typing import Literal, Optional, Tuple

import torch
from pytorch_msssim import SSIM

SsimKernel = Literal["auto", "triton", "pytorch-msssim"]

WINDOW_SIZE = 11
WINDOW_SIGMA = 1.5
C1 = 0.01**2  # (K1 * data_range)^2 with data_range 1
C2 = 0.03**2
ROW_BLOCK = 256  # row passes: one row and this many columns per program
COLUMN_TILE = (4, 128)  # column passes: rows x columns per program
MAX_ELEMENTS = 2**31 // 5  # the five filtered maps are indexed with 32-bit offsets (B x 3 x H x W below this)


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


@functools.lru_cache(maxsize=1)
def _kernels():
    """The four Triton kernels, defined on first use (Triton imported only where it runs)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["H", "W", "Wv"])
    def ssim_rows_forward(x_ptr, y_ptr, win_ptr, out_ptr, C, H, W, Wv, maps_stride,
                          sxn, sxc, sxh, sxw, syn, syc, syh, syw, WIN: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)  # over N*C*H input rows
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        keep = cols < Wv
        plane = row // H
        r = row % H
        n = plane // C
        c = plane % C
        x_row = x_ptr + n * sxn + c * sxc + r * sxh
        y_row = y_ptr + n * syn + c * syc + r * syh
        mx = tl.zeros([BLOCK], dtype=tl.float32)
        my = tl.zeros([BLOCK], dtype=tl.float32)
        mxx = tl.zeros([BLOCK], dtype=tl.float32)
        myy = tl.zeros([BLOCK], dtype=tl.float32)
        mxy = tl.zeros([BLOCK], dtype=tl.float32)
        for k in tl.static_range(WIN):
            g = tl.load(win_ptr + k)
            x = tl.load(x_row + (cols + k) * sxw, mask=keep, other=0.0).to(tl.float32)
            y = tl.load(y_row + (cols + k) * syw, mask=keep, other=0.0).to(tl.float32)
            mx += g * x
            my += g * y
            mxx += g * (x * x)
            myy += g * (y * y)
            mxy += g * (x * y)
        out = out_ptr + row * Wv + cols
        tl.store(out, mx, mask=keep)
        tl.store(out + maps_stride, my, mask=keep)
        tl.store(out + 2 * maps_stride, mxx, mask=keep)
        tl.store(out + 3 * maps_stride, myy, mask=keep)
        tl.store(out + 4 * maps_stride, mxy, mask=keep)

    @triton.jit(do_not_specialize=["H", "Hv", "Wv", "n_row_blocks", "n_col_blocks"])
    def ssim_columns_forward(maps_ptr, win_ptr, partial_ptr, deriv_ptr, H, Hv, Wv, maps_stride, deriv_stride,
                             n_row_blocks, n_col_blocks, C1: tl.constexpr, C2: tl.constexpr, WIN: tl.constexpr,
                             BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, STORE_DERIVATIVES: tl.constexpr):
        # a tile of BLOCK_R output rows: the 11 shifted loads of one map overlap and come from L1
        pid = tl.program_id(0).to(tl.int64)  # over N*C planes x row blocks
        block = tl.program_id(1)
        plane = pid // n_row_blocks
        rows = (pid % n_row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = block * BLOCK_C + tl.arange(0, BLOCK_C)
        keep = (rows[:, None] < Hv) & (cols[None, :] < Wv)
        first = maps_ptr + (plane * H + rows[:, None]) * Wv + cols[None, :]
        mu_x = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        mu_y = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        e_xx = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        e_yy = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        e_xy = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        for k in tl.static_range(WIN):
            g = tl.load(win_ptr + k)
            at = first + k * Wv
            mu_x += g * tl.load(at, mask=keep, other=0.0)
            mu_y += g * tl.load(at + maps_stride, mask=keep, other=0.0)
            e_xx += g * tl.load(at + 2 * maps_stride, mask=keep, other=0.0)
            e_yy += g * tl.load(at + 3 * maps_stride, mask=keep, other=0.0)
            e_xy += g * tl.load(at + 4 * maps_stride, mask=keep, other=0.0)
        # the same expressions, in the same order, as pytorch_msssim's _ssim
        mu_xx = mu_x * mu_x
        mu_yy = mu_y * mu_y
        mu_xy = mu_x * mu_y
        s_xx = e_xx - mu_xx
        s_yy = e_yy - mu_yy
        s_xy = e_xy - mu_xy
        cs_num = 2 * s_xy + C2
        cs_den = s_xx + s_yy + C2
        cs = cs_num / cs_den
        l_num = 2 * mu_xy + C1
        l_den = mu_xx + mu_yy + C1
        lum = l_num / l_den
        value = lum * cs
        tl.store(partial_ptr + pid * n_col_blocks + block, tl.sum(tl.sum(tl.where(keep, value, 0.0), axis=1), axis=0))
        if STORE_DERIVATIVES:
            d_mu_x = cs * (2 * mu_y - 2 * mu_x * lum) / l_den  # d(l cs)/d mu_x with the sigmas held
            d_s_xx = -value / cs_den
            d_s_xy = 2 * lum / cs_den
            a = d_mu_x - 2 * mu_x * d_s_xx - mu_y * d_s_xy
            out = deriv_ptr + (plane * Hv + rows[:, None]) * Wv + cols[None, :]
            tl.store(out, a, mask=keep)
            tl.store(out + deriv_stride, d_s_xx, mask=keep)
            tl.store(out + 2 * deriv_stride, d_s_xy, mask=keep)

    @triton.jit(do_not_specialize=["W", "Wv"])
    def ssim_rows_backward(deriv_ptr, win_ptr, out_ptr, W, Wv, deriv_stride, out_stride,
                           WIN: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)  # over N*C*Hv rows
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        keep = cols < W
        src_row = deriv_ptr + row * Wv
        a = tl.zeros([BLOCK], dtype=tl.float32)
        b = tl.zeros([BLOCK], dtype=tl.float32)
        c = tl.zeros([BLOCK], dtype=tl.float32)
        for k in tl.static_range(WIN):
            g = tl.load(win_ptr + k)
            src = cols - k
            ok = keep & (src >= 0) & (src < Wv)
            a += g * tl.load(src_row + src, mask=ok, other=0.0)
            b += g * tl.load(src_row + deriv_stride + src, mask=ok, other=0.0)
            c += g * tl.load(src_row + 2 * deriv_stride + src, mask=ok, other=0.0)
        out = out_ptr + row * W + cols
        tl.store(out, a, mask=keep)
        tl.store(out + out_stride, b, mask=keep)
        tl.store(out + 2 * out_stride, c, mask=keep)

    @triton.jit(do_not_specialize=["H", "W", "Hv", "n_row_blocks"])
    def ssim_columns_backward(rows_ptr, win_ptr, x_ptr, y_ptr, grad_out_ptr, grad_ptr, scale, C, H, W, Hv,
                              rows_stride, n_row_blocks, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
                              sgn, sgc, sgh, sgw, WIN: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)  # over N*C planes x blocks of BLOCK_R gradient rows
        plane = pid // n_row_blocks
        n = plane // C
        c = plane % C
        q = ((pid % n_row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R))[:, None]
        cols = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C))[None, :]
        keep = (q < H) & (cols < W)
        a = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        b = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        cc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        for k in tl.static_range(WIN):
            g = tl.load(win_ptr + k)
            src = q - k
            ok = keep & (src >= 0) & (src < Hv)
            at = rows_ptr + (plane * Hv + src) * W + cols
            a += g * tl.load(at, mask=ok, other=0.0)
            b += g * tl.load(at + rows_stride, mask=ok, other=0.0)
            cc += g * tl.load(at + 2 * rows_stride, mask=ok, other=0.0)
        x = tl.load(x_ptr + n * sxn + c * sxc + q * sxh + cols * sxw, mask=keep, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + n * syn + c * syc + q * syh + cols * syw, mask=keep, other=0.0).to(tl.float32)
        factor = tl.load(grad_out_ptr).to(tl.float32) * scale
        grad = factor * (a + 2 * x * b + y * cc)
        tl.store(grad_ptr + n * sgn + c * sgc + q * sgh + cols * sgw, grad.to(grad_ptr.dtype.element_ty), mask=keep)

    return ssim_rows_forward, ssim_columns_forward, ssim_rows_backward, ssim_columns_backward


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _ssim_forward(x: torch.Tensor, y: torch.Tensor, window: torch.Tensor, keep_derivatives: bool
                  ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Mean SSIM and, when asked, the [3, N*C, H-10, W-10] derivative maps of the backward pass."""
    rows_forward, columns_forward, _, _ = _kernels()
    N, C, H, W = x.shape
    Hv, Wv = H - WINDOW_SIZE + 1, W - WINDOW_SIZE + 1
    planes = N * C
    maps = torch.empty((5, planes, H, Wv), device=x.device, dtype=torch.float32)
    rows_forward[(planes * H, _cdiv(Wv, ROW_BLOCK))](
        x, y, window, maps, C, H, W, Wv, maps[0].numel(), *x.stride(), *y.stride(),
        WIN=WINDOW_SIZE, BLOCK=ROW_BLOCK)
    tile_r, tile_c = COLUMN_TILE
    row_blocks, col_blocks = _cdiv(Hv, tile_r), _cdiv(Wv, tile_c)
    partial = torch.empty((planes * row_blocks, col_blocks), device=x.device, dtype=torch.float32)
    derivatives = torch.empty((3, planes, Hv, Wv), device=x.device, dtype=torch.float32) if keep_derivatives else partial
    columns_forward[(planes * row_blocks, col_blocks)](
        maps, window, partial, derivatives, H, Hv, Wv, maps[0].numel(),
        derivatives[0].numel() if keep_derivatives else 0, row_blocks, col_blocks,
        C1=C1, C2=C2, WIN=WINDOW_SIZE, BLOCK_R=tile_r, BLOCK_C=tile_c, STORE_DERIVATIVES=keep_derivatives)
    value = partial.sum() / (planes * Hv * Wv)
    return value, (derivatives if keep_derivatives else None)


def _ssim_backward(grad_out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, window: torch.Tensor,
                   derivatives: torch.Tensor) -> torch.Tensor:
    """d(mean SSIM)/dx times grad_out, laid out like x where x is dense (a permuted render stays so)."""
    _, _, rows_backward, columns_backward = _kernels()
    N, C, H, W = x.shape
    Hv, Wv = derivatives.shape[-2:]
    planes = N * C
    rows = torch.empty((3, planes, Hv, W), device=x.device, dtype=torch.float32)
    rows_backward[(planes * Hv, _cdiv(W, ROW_BLOCK))](
        derivatives, window, rows, W, Wv, derivatives[0].numel(), rows[0].numel(),
        WIN=WINDOW_SIZE, BLOCK=ROW_BLOCK)
    grad = torch.empty_like(x, memory_format=torch.preserve_format)  # x's strides where x is dense
    tile_r, tile_c = COLUMN_TILE
    row_blocks = _cdiv(H, tile_r)
    columns_backward[(planes * row_blocks, _cdiv(W, tile_c))](
        rows, window, x, y, grad_out.detach().to(torch.float32).reshape(1), grad, 1.0 / (planes * Hv * Wv),
        C, H, W, Hv, rows[0].numel(), row_blocks, *x.stride(), *y.stride(), *grad.stride(),
        WIN=WINDOW_SIZE, BLOCK_R=tile_r, BLOCK_C=tile_c)
    return grad


class _FusedSSIM(torch.autograd.Function):
    """Mean SSIM of x and y, [N, C, H, W] each; the gradient goes to x only."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
        value, derivatives = _ssim_forward(x, y, window, keep_derivatives=ctx.needs_input_grad[0])
        if derivatives is not None:
            ctx.save_for_backward(x, y, window, derivatives)
        return value

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, y, window, derivatives = ctx.saved_tensors
        return _ssim_backward(grad_out, x, y, window, derivatives), None, None


def fused_ssim(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean SSIM (pytorch_msssim's, data range 1) with the fused kernels; the gradient flows to ``x``.

    Args:
        x: [N, C, H, W], H and W >= 11, any strides (a permuted [N, H, W, C] render is read in place).
        y: [N, C, H, W] on x's device, no gradient.

    Returns:
        [] float32.
    """
    if x.shape != y.shape or x.dim() != 4:
        raise ValueError(f"fused_ssim needs two [N, C, H, W] images of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if min(x.shape[-2:]) < WINDOW_SIZE:
        raise ValueError(f"fused_ssim needs images of at least {WINDOW_SIZE} pixels on a side, got {tuple(x.shape)}")
    if y.requires_grad:
        raise ValueError("fused_ssim gives no gradient to its second image; pass the one that needs it first")
    if x.numel() >= MAX_ELEMENTS:
        raise ValueError(f"fused_ssim takes at most {MAX_ELEMENTS - 1} elements (its offsets are 32-bit), got {tuple(x.shape)}")
    if x.is_cuda and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):  # Triton launches on the current device
            return _FusedSSIM.apply(x, y, _window_on(x.device))
    return _FusedSSIM.apply(x, y, _window_on(x.device))


@functools.lru_cache(maxsize=8)
def _window_on(device: torch.device) -> torch.Tensor:
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
            raise RuntimeError("--pipeline.model.ssim-kernel triton: Triton does not import here "
                               "(pip install triton, or use auto / pytorch-msssim)")
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
        return a.dim() == 4 and min(a.shape[-2:]) >= WINDOW_SIZE and small_enough and not (a.requires_grad and b.requires_grad)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not self.uses_fused(a, b):
            return self.reference(a, b)
        # SSIM is symmetric in its two images; the fused pass differentiates its first
        return fused_ssim(b, a) if not a.requires_grad else fused_ssim(a, b)
