"""The Triton kernels of the fused SSIM and of the fused photometric loss, and their launches.

Entry points: :func:`forward` (the mean SSIM, or splatfacto's whole photometric loss, and the
derivative maps of the backward pass) and :func:`backward` (the gradient of the render, and of the
alpha map when the background is composited in the kernels). Callers: :mod:`ns_splat_plus.model.ssim`
(SSIM alone) and the model's fused photometric loss (background composite + L1 + SSIM, as splatfacto's
loss). The kernels are launched through :class:`~ns_splat_plus.kernels.launch.KernelLauncher` (Triton's
per-launch dispatch only once per argument signature).

Five kernels, each memory-bound (``g`` is pytorch_msssim's 11-tap window, valid padding):

1. ``ssim_rows_forward``: x and y are read (x composited over the background from the render and
   its alpha, y converted from uint8 where asked), the five horizontally filtered maps of x, y,
   x*x, y*y, x*y are written, and the L1 sums of |x - y| per block of a row where asked;
2. ``ssim_columns_forward``: the vertical filter, the SSIM map summed per block, and the three
   per-pixel derivatives that the backward pass needs;
3. ``ssim_finish``: the block sums reduced to the value (one program, a fixed order);
4. ``ssim_rows_backward``: the horizontal filter of the three derivative maps, transposed;
5. ``ssim_columns_backward``: the vertical one, transposed, combined with x and y into the gradient
   of x, plus the L1 term's, through the clamp of the composite into the render and alpha.

Gradient of the mean SSIM S (derived here; ``*`` the valid filter, ``g^T *`` its transpose)::

    mu_x = g * x,  s_xx = g * x^2 - mu_x^2,  s_xy = g * (x y) - mu_x mu_y
    S = mean_p l(p) cs(p),  l = (2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2 + C1),
                            cs = (2 s_xy + C2) / (s_xx + s_yy + C2)
    dS/dx = (g^T * A) + 2 x (g^T * B) + y (g^T * C), divided by the number of valid pixels, with
    B = d(l cs)/d s_xx,  C = d(l cs)/d s_xy,  A = d(l cs)/d mu_x - 2 mu_x B - mu_y C.

With the composite ``x = clamp(render + (1 - alpha) * background, 0, 1)`` (splatfacto's), the
gradient of x goes to the render where ``0 <= render + (1 - alpha) * background <= 1`` (torch's
clamp), and ``-sum_c grad_c * background_c`` to alpha.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from ns_splat_plus.kernels.launch import KernelLauncher

WINDOW_SIZE = 11
C1 = 0.01**2  # (K1 * data_range)^2 with data_range 1
C2 = 0.03**2
ROW_BLOCK = 256  # row passes: one row and this many columns per program
COLUMN_TILE = (4, 128)  # column passes: rows x columns per program
FINISH_BLOCK = 1024
MAX_ELEMENTS = 2**31 // 5  # the five filtered maps are indexed with 32-bit offsets (B x 3 x H x W below this)
INPUT_STRIDES = ("sxn", "sxh", "san", "sah", "syn", "syh")
"""The image and row strides of x, alpha and y (read by the forward's row pass and the backward's column pass)."""
OUTER_STRIDES = (*INPUT_STRIDES, "sgn", "sgh", "sga_n", "sga_h")
"""The image and row strides of x, alpha, y and the gradients, left unspecialized (``do_not_specialize``)
with the sizes and the scratch maps' strides: they change with the image size, and Triton would compile
each kernel again for every pattern of their divisibility by 16 (a training size of 375x250 and one of
1500x1000 differ), seconds per kernel on a cold cache. The channel and column strides (1 and 3 for an
HWC image at every size) stay specialized: they do not change with the size."""


@dataclass(frozen=True)
class Images:
    """The two images of one SSIM, [N, C, H, W] views (any strides: a permuted render is read in place).

    Args:
        x: the image that gets the gradient: the render, or with ``alpha`` the render before its
            composite over ``background``.
        y: the other (ground truth): float, or uint8 (divided by 255 in the kernels, as splatfacto's
            ``image.float() / 255.0``).
        alpha: [N, 1, H, W] or None: x is then ``clamp(x + (1 - alpha) * background, 0, 1)``.
        background: [C] with ``alpha``.
    """

    x: torch.Tensor
    y: torch.Tensor
    alpha: Optional[torch.Tensor] = None
    background: Optional[torch.Tensor] = None

    @property
    def composited(self) -> bool:
        return self.alpha is not None

    def strides(self) -> Tuple[int, ...]:
        """x's, alpha's (n, h, w; zeros without alpha) and y's strides, in the kernels' argument order."""
        a = self.alpha.stride() if self.alpha is not None else (0, 0, 0, 0)
        return (*self.x.stride(), a[0], a[2], a[3], *self.y.stride())


@dataclass(frozen=True)
class Weights:
    """What the kernels compute: ``ssim_weight * S + ssim_offset + l1_weight * mean |x - y|``.

    SSIM alone: weight 1, offset 0, no L1. splatfacto's loss ``(1 - lambda) L1 + lambda (1 - S)``:
    SSIM weight -lambda, offset lambda, L1 weight 1 - lambda."""

    ssim_weight: float = 1.0
    ssim_offset: float = 0.0
    l1_weight: float = 0.0

    @property
    def with_l1(self) -> bool:
        return self.l1_weight != 0.0


@functools.lru_cache(maxsize=1)
def _kernels():
    """The Triton kernels, defined on first use (Triton imported only where it runs)."""
    import triton
    import triton.language as tl

    # fmt: off
    @triton.jit(do_not_specialize=["H", "W", "Wv", "maps_stride", "n_col_blocks", *INPUT_STRIDES])
    def ssim_rows_forward(x_ptr, alpha_ptr, bg_ptr, y_ptr, win_ptr, out_ptr, l1_ptr, C, H, W, Wv, maps_stride,
                          n_col_blocks, sxn, sxc, sxh, sxw, san, sah, saw, syn, syc, syh, syw,
                          COMPOSITE: tl.constexpr, Y_U8: tl.constexpr, WITH_L1: tl.constexpr,
                          WIN: tl.constexpr, BLOCK: tl.constexpr):
    # fmt: on
        row = tl.program_id(0).to(tl.int64)  # over N*C*H input rows
        block = tl.program_id(1)
        cols = block * BLOCK + tl.arange(0, BLOCK)
        keep = cols < Wv
        plane = row // H
        r = row % H
        n = plane // C
        c = plane % C
        x_row = x_ptr + n * sxn + c * sxc + r * sxh
        a_row = alpha_ptr + n * san + r * sah
        y_row = y_ptr + n * syn + c * syc + r * syh
        bg = 0.0
        if COMPOSITE:
            bg = tl.load(bg_ptr + c).to(tl.float32)
        mx = tl.zeros([BLOCK], dtype=tl.float32)
        my = tl.zeros([BLOCK], dtype=tl.float32)
        mxx = tl.zeros([BLOCK], dtype=tl.float32)
        myy = tl.zeros([BLOCK], dtype=tl.float32)
        mxy = tl.zeros([BLOCK], dtype=tl.float32)
        for k in tl.static_range(WIN):
            g = tl.load(win_ptr + k)
            inside = cols + k < W
            x = tl.load(x_row + (cols + k) * sxw, mask=inside, other=0.0).to(tl.float32)
            if COMPOSITE:  # splatfacto's clamp(render + (1 - alpha) * background, 0, 1)
                x = x + (1.0 - tl.load(a_row + (cols + k) * saw, mask=inside, other=0.0).to(tl.float32)) * bg
                x = tl.minimum(tl.maximum(x, 0.0), 1.0)
            y = tl.load(y_row + (cols + k) * syw, mask=inside, other=0).to(tl.float32)
            if Y_U8:
                y = tl.math.div_rn(y, 255.0)  # correctly rounded, as torch's image.float() / 255.0
            if WITH_L1:
                if k == 0:  # every pixel of the row once: with L1 the blocks span all W columns
                    l1 = tl.sum(tl.where(inside, tl.abs(x - y), 0.0), axis=0)
                    tl.store(l1_ptr + row * n_col_blocks + block, l1)
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

    # fmt: off
    @triton.jit(do_not_specialize=["H", "Hv", "Wv", "maps_stride", "deriv_stride", "n_row_blocks", "n_col_blocks"])
    def ssim_columns_forward(maps_ptr, win_ptr, partial_ptr, deriv_ptr, H, Hv, Wv, maps_stride, deriv_stride,
                             n_row_blocks, n_col_blocks, C1: tl.constexpr, C2: tl.constexpr, WIN: tl.constexpr,
                             BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, STORE_DERIVATIVES: tl.constexpr):
    # fmt: on
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

    # fmt: off
    @triton.jit(do_not_specialize=["n_ssim", "n_l1"])
    def ssim_finish(ssim_ptr, n_ssim, l1_ptr, n_l1, out_ptr, ssim_scale, ssim_offset, l1_scale,
                    WITH_L1: tl.constexpr, BLOCK: tl.constexpr):
    # fmt: on
        # one program: the block sums in a fixed order (no atomics), the same value on every run
        offsets = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_ssim, BLOCK):
            acc += tl.load(ssim_ptr + start + offsets, mask=start + offsets < n_ssim, other=0.0)
        value = tl.sum(acc, axis=0) * ssim_scale + ssim_offset
        if WITH_L1:
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for start in range(0, n_l1, BLOCK):
                acc += tl.load(l1_ptr + start + offsets, mask=start + offsets < n_l1, other=0.0)
            value += tl.sum(acc, axis=0) * l1_scale
        tl.store(out_ptr, value)

    @triton.jit(do_not_specialize=["W", "Wv", "deriv_stride", "out_stride"])
    def ssim_rows_backward(
        deriv_ptr, win_ptr, out_ptr, W, Wv, deriv_stride, out_stride, WIN: tl.constexpr, BLOCK: tl.constexpr
    ):
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

    # fmt: off
    @triton.jit(do_not_specialize=["H", "W", "Hv", "rows_stride", "n_row_blocks", *OUTER_STRIDES])
    def ssim_columns_backward(rows_ptr, win_ptr, x_ptr, alpha_ptr, bg_ptr, y_ptr, grad_out_ptr, grad_ptr,
                              grad_alpha_ptr, ssim_scale, l1_scale, H, W, Hv, rows_stride, n_row_blocks,
                              sxn, sxc, sxh, sxw, san, sah, saw, syn, syc, syh, syw, sgn, sgc, sgh, sgw,
                              sga_n, sga_h, sga_w, C: tl.constexpr, COMPOSITE: tl.constexpr, Y_U8: tl.constexpr,
                              WITH_L1: tl.constexpr, WIN: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # fmt: on
        pid = tl.program_id(0).to(tl.int64)  # over N images x blocks of BLOCK_R gradient rows; all C channels
        n = pid // n_row_blocks
        q = ((pid % n_row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R))[:, None]
        cols = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C))[None, :]
        keep = (q < H) & (cols < W)
        factor = tl.load(grad_out_ptr).to(tl.float32)
        a_at = alpha_ptr + n * san + q * sah + cols * saw
        grad_alpha = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
        for c in tl.static_range(C):
            plane = n * C + c
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
            bg = 0.0
            if COMPOSITE:
                bg = tl.load(bg_ptr + c).to(tl.float32)
            v = tl.load(x_ptr + n * sxn + c * sxc + q * sxh + cols * sxw, mask=keep, other=0.0).to(tl.float32)
            if COMPOSITE:
                v = v + (1.0 - tl.load(a_at, mask=keep, other=0.0).to(tl.float32)) * bg
            x = v
            if COMPOSITE:
                x = tl.minimum(tl.maximum(v, 0.0), 1.0)
            y = tl.load(y_ptr + n * syn + c * syc + q * syh + cols * syw, mask=keep, other=0).to(tl.float32)
            if Y_U8:
                y = tl.math.div_rn(y, 255.0)
            grad = (factor * ssim_scale) * (a + 2 * x * b + y * cc)
            if WITH_L1:  # d|x - y|/dx: torch's sign, 0 where x == y
                d = x - y
                grad += (factor * l1_scale) * tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
            if COMPOSITE:  # through torch's clamp (inclusive bounds) into the render and alpha
                grad = tl.where((v >= 0.0) & (v <= 1.0), grad, 0.0)
                grad_alpha -= grad * bg
            tl.store(grad_ptr + n * sgn + c * sgc + q * sgh + cols * sgw, grad.to(grad_ptr.dtype.element_ty), mask=keep)
        if COMPOSITE:
            tl.store(
                grad_alpha_ptr + n * sga_n + q * sga_h + cols * sga_w,
                grad_alpha.to(grad_alpha_ptr.dtype.element_ty),
                mask=keep,
            )

    return ssim_rows_forward, ssim_columns_forward, ssim_finish, ssim_rows_backward, ssim_columns_backward


@functools.lru_cache(maxsize=1)
def _launchers():
    """The five kernels behind :class:`~ns_splat_plus.kernels.launch.KernelLauncher` (their
    arguments positional, constexprs last, in the order of the kernels' signatures)."""
    return tuple(KernelLauncher(kernel) for kernel in _kernels())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _y_is_uint8(images: Images) -> bool:
    return images.y.dtype == torch.uint8


def forward(
    images: Images, window: torch.Tensor, weights: Weights, keep_derivatives: bool
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``weights``' combination of the mean SSIM and L1 of ``images`` ([] float32) and, when asked,
    the [3, N*C, H-10, W-10] derivative maps of the backward pass."""
    rows_forward, columns_forward, finish, _, _ = _launchers()
    x = images.x
    N, C, H, W = x.shape
    Hv, Wv = H - WINDOW_SIZE + 1, W - WINDOW_SIZE + 1
    planes = N * C
    device = x.device
    maps = torch.empty((5, planes, H, Wv), device=device, dtype=torch.float32)
    row_blocks_l1 = _cdiv(W if weights.with_l1 else Wv, ROW_BLOCK)  # with L1 the blocks cover every pixel
    l1 = torch.empty((planes * H, row_blocks_l1), device=device, dtype=torch.float32) if weights.with_l1 else maps
    alpha = images.alpha if images.composited else x
    background = images.background if images.composited else x
    rows_forward(
        (planes * H, row_blocks_l1),
        x,
        alpha,
        background,
        images.y,
        window,
        maps,
        l1,
        C,
        H,
        W,
        Wv,
        maps[0].numel(),
        row_blocks_l1,
        *images.strides(),
        images.composited,
        _y_is_uint8(images),
        weights.with_l1,
        WINDOW_SIZE,
        ROW_BLOCK,
    )
    tile_r, tile_c = COLUMN_TILE
    row_blocks, col_blocks = _cdiv(Hv, tile_r), _cdiv(Wv, tile_c)
    partial = torch.empty((planes * row_blocks, col_blocks), device=device, dtype=torch.float32)
    derivatives = torch.empty((3, planes, Hv, Wv), device=device, dtype=torch.float32) if keep_derivatives else partial
    columns_forward(
        (planes * row_blocks, col_blocks),
        maps,
        window,
        partial,
        derivatives,
        H,
        Hv,
        Wv,
        maps[0].numel(),
        derivatives[0].numel() if keep_derivatives else 0,
        row_blocks,
        col_blocks,
        C1,
        C2,
        WINDOW_SIZE,
        tile_r,
        tile_c,
        keep_derivatives,
    )
    value = torch.empty((), device=device, dtype=torch.float32)
    finish(
        (1,),
        partial,
        partial.numel(),
        l1,
        l1.numel() if weights.with_l1 else 0,
        value,
        weights.ssim_weight / (planes * Hv * Wv),
        weights.ssim_offset,
        weights.l1_weight / (planes * H * W),
        weights.with_l1,
        FINISH_BLOCK,
    )
    return value, (derivatives if keep_derivatives else None)


def backward(
    grad_out: torch.Tensor, images: Images, window: torch.Tensor, weights: Weights, derivatives: torch.Tensor
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The gradient of x (laid out like x where x is dense: a permuted render stays so) and, with a
    composite, of alpha ([N, 1, H, W], laid out like alpha), times ``grad_out``."""
    _, _, _, rows_backward, columns_backward = _launchers()
    x = images.x
    N, C, H, W = x.shape
    Hv, Wv = derivatives.shape[-2:]
    planes = N * C
    rows = torch.empty((3, planes, Hv, W), device=x.device, dtype=torch.float32)
    rows_backward(
        (planes * Hv, _cdiv(W, ROW_BLOCK)),
        derivatives,
        window,
        rows,
        W,
        Wv,
        derivatives[0].numel(),
        rows[0].numel(),
        WINDOW_SIZE,
        ROW_BLOCK,
    )
    grad = torch.empty_like(x, memory_format=torch.preserve_format)  # x's strides where x is dense
    grad_alpha = (
        torch.empty_like(images.alpha, memory_format=torch.preserve_format) if images.alpha is not None else None
    )
    ga = grad_alpha if grad_alpha is not None else grad
    alpha = images.alpha if images.composited else x
    background = images.background if images.composited else x
    tile_r, tile_c = COLUMN_TILE
    row_blocks = _cdiv(H, tile_r)
    columns_backward(
        (N * row_blocks, _cdiv(W, tile_c)),
        rows,
        window,
        x,
        alpha,
        background,
        images.y,
        grad_out.detach().to(torch.float32).reshape(1),
        grad,
        ga,
        weights.ssim_weight / (planes * Hv * Wv),
        weights.l1_weight / (planes * H * W),
        H,
        W,
        Hv,
        rows[0].numel(),
        row_blocks,
        *images.strides(),
        *grad.stride(),
        ga.stride(0),
        ga.stride(2),
        ga.stride(3),
        C,
        images.composited,
        _y_is_uint8(images),
        weights.with_l1,
        WINDOW_SIZE,
        tile_r,
        tile_c,
    )
    return grad, grad_alpha
