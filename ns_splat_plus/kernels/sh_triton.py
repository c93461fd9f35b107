"""The Triton code of :mod:`ns_splat_plus.kernels.spherical_harmonics`, imported only where it first runs (Triton
resolves the helpers a kernel calls among its module's globals, so they live at this module's top level)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _add(coeffs_ptr, c, k, K: tl.constexpr, inside, basis, r0, r1, r2):
    """The colour so far plus basis k times its coefficients (3 channels)."""
    at = (c * K + k) * 3
    r0 += basis * tl.load(coeffs_ptr + at, mask=inside, other=0.0)
    r1 += basis * tl.load(coeffs_ptr + at + 1, mask=inside, other=0.0)
    r2 += basis * tl.load(coeffs_ptr + at + 2, mask=inside, other=0.0)
    return r0, r1, r2


@triton.jit
def _term(coeffs_ptr, grad_coeffs_ptr, c, r, k, K: tl.constexpr, inside, g0, g1, g2, basis, bx, by, bz, gx, gy, gz):
    """Basis k's share of the backward: its coefficients' gradients (stored), and the gradient of the
    unit direction so far plus d(colour . g)/d(basis k) times the basis' derivatives bx, by, bz."""
    at = (c * K + k) * 3
    weight = tl.load(coeffs_ptr + at, mask=inside, other=0.0) * g0
    weight += tl.load(coeffs_ptr + at + 1, mask=inside, other=0.0) * g1
    weight += tl.load(coeffs_ptr + at + 2, mask=inside, other=0.0) * g2
    out = (r * K + k) * 3
    tl.store(grad_coeffs_ptr + out, basis * g0, mask=inside)
    tl.store(grad_coeffs_ptr + out + 1, basis * g1, mask=inside)
    tl.store(grad_coeffs_ptr + out + 2, basis * g2, mask=inside)
    return gx + weight * bx, gy + weight * by, gz + weight * bz


@triton.jit
def _unit_direction(dirs_ptr, r, inside):
    x = tl.load(dirs_ptr + 3 * r, mask=inside, other=1.0)
    y = tl.load(dirs_ptr + 3 * r + 1, mask=inside, other=0.0)
    z = tl.load(dirs_ptr + 3 * r + 2, mask=inside, other=0.0)
    inv = 1.0 / tl.maximum(tl.sqrt(x * x + y * y + z * z), 1e-12)  # F.normalize's eps
    return x * inv, y * inv, z * inv, inv


@triton.jit(do_not_specialize=["rows", "coeff_rows"])
def sh_forward(dirs_ptr, coeffs_ptr, masks_ptr, out_ptr, rows, coeff_rows, K: tl.constexpr,
               DEGREE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = r < rows
    visible = inside & (tl.load(masks_ptr + r, mask=inside, other=0) != 0)
    x, y, z, _ = _unit_direction(dirs_ptr, r, inside)
    c = r % coeff_rows  # coefficients shared by the cameras: [N, K, 3] rows repeat every N
    zero = x * 0.0
    r0, r1, r2 = _add(coeffs_ptr, c, 0, K, inside, zero + 0.2820947917738781, zero, zero, zero)
    if DEGREE >= 1:  # gsplat's _eval_sh_bases_fast (Sloan's), the same products in the same order
        a = -0.48860251190292
        r0, r1, r2 = _add(coeffs_ptr, c, 1, K, inside, a * y, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 2, K, inside, -a * z, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 3, K, inside, a * x, r0, r1, r2)
    if DEGREE >= 2:
        z2 = z * z
        tb = -1.092548430592079 * z
        ta = 0.5462742152960395
        c1 = x * x - y * y
        s1 = 2 * x * y
        r0, r1, r2 = _add(coeffs_ptr, c, 4, K, inside, ta * s1, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 5, K, inside, tb * y, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 6, K, inside, 0.9461746957575601 * z2 - 0.3153915652525201, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 7, K, inside, tb * x, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 8, K, inside, ta * c1, r0, r1, r2)
    if DEGREE >= 3:
        tc = -2.285228997322329 * z2 + 0.4570457994644658
        tb3 = 1.445305721320277 * z
        ta3 = -0.5900435899266435
        c2 = x * c1 - y * s1
        s2 = x * s1 + y * c1
        r0, r1, r2 = _add(coeffs_ptr, c, 9, K, inside, ta3 * s2, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 10, K, inside, tb3 * s1, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 11, K, inside, tc * y, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 12, K, inside, z * (1.865881662950577 * z2 - 1.119528997770346), r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 13, K, inside, tc * x, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 14, K, inside, tb3 * c1, r0, r1, r2)
        r0, r1, r2 = _add(coeffs_ptr, c, 15, K, inside, ta3 * c2, r0, r1, r2)
    tl.store(out_ptr + 3 * r, tl.where(visible, r0, 0.0), mask=inside)
    tl.store(out_ptr + 3 * r + 1, tl.where(visible, r1, 0.0), mask=inside)
    tl.store(out_ptr + 3 * r + 2, tl.where(visible, r2, 0.0), mask=inside)


@triton.jit(do_not_specialize=["rows", "coeff_rows"])
def sh_backward(dirs_ptr, coeffs_ptr, masks_ptr, grad_out_ptr, grad_coeffs_ptr, grad_dirs_ptr, rows, coeff_rows,
                K: tl.constexpr, DEGREE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = r < rows
    visible = inside & (tl.load(masks_ptr + r, mask=inside, other=0) != 0)
    x, y, z, inv = _unit_direction(dirs_ptr, r, inside)
    c = r % coeff_rows
    g0 = tl.where(visible, tl.load(grad_out_ptr + 3 * r, mask=inside, other=0.0), 0.0)
    g1 = tl.where(visible, tl.load(grad_out_ptr + 3 * r + 1, mask=inside, other=0.0), 0.0)
    g2 = tl.where(visible, tl.load(grad_out_ptr + 3 * r + 2, mask=inside, other=0.0), 0.0)
    zero = x * 0.0
    # the basis' gradients per camera row; the caller sums the rows of cameras that share coefficients
    gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 0, K, inside, g0, g1, g2,
                       zero + 0.2820947917738781, zero, zero, zero, zero, zero, zero)  # fmt: skip
    if DEGREE >= 1:
        a = -0.48860251190292
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 1, K, inside, g0, g1, g2, a * y, 0.0, a, 0.0, gx, gy, gz)
        gx, gy, gz = _term(
            coeffs_ptr, grad_coeffs_ptr, c, r, 2, K, inside, g0, g1, g2, -a * z, 0.0, 0.0, -a, gx, gy, gz
        )
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 3, K, inside, g0, g1, g2, a * x, a, 0.0, 0.0, gx, gy, gz)
    if DEGREE >= 2:
        z2 = z * z
        tb = -1.092548430592079
        ta = 0.5462742152960395
        c1 = x * x - y * y
        s1 = 2 * x * y
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 4, K, inside, g0, g1, g2, ta * s1,
                           2 * ta * y, 2 * ta * x, 0.0, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 5, K, inside, g0, g1, g2, tb * z * y,
                           0.0, tb * z, tb * y, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 6, K, inside, g0, g1, g2,
                           0.9461746957575601 * z2 - 0.3153915652525201, 0.0, 0.0, 2 * 0.9461746957575601 * z,
                           gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 7, K, inside, g0, g1, g2, tb * z * x,
                           tb * z, 0.0, tb * x, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 8, K, inside, g0, g1, g2, ta * c1,
                           2 * ta * x, -2 * ta * y, 0.0, gx, gy, gz)  # fmt: skip
    if DEGREE >= 3:
        tc = -2.285228997322329 * z2 + 0.4570457994644658
        dtc = 2 * -2.285228997322329 * z
        tb3 = 1.445305721320277
        ta3 = -0.5900435899266435
        c2 = x * c1 - y * s1
        s2 = x * s1 + y * c1
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 9, K, inside, g0, g1, g2, ta3 * s2,
                           6 * ta3 * x * y, 3 * ta3 * c1, 0.0, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 10, K, inside, g0, g1, g2, tb3 * z * s1,
                           2 * tb3 * z * y, 2 * tb3 * z * x, tb3 * s1, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 11, K, inside, g0, g1, g2, tc * y,
                           0.0, tc, dtc * y, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 12, K, inside, g0, g1, g2,
                           z * (1.865881662950577 * z2 - 1.119528997770346), 0.0, 0.0,
                           3 * 1.865881662950577 * z2 - 1.119528997770346, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 13, K, inside, g0, g1, g2, tc * x,
                           tc, 0.0, dtc * x, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 14, K, inside, g0, g1, g2, tb3 * z * c1,
                           2 * tb3 * z * x, -2 * tb3 * z * y, tb3 * c1, gx, gy, gz)  # fmt: skip
        gx, gy, gz = _term(coeffs_ptr, grad_coeffs_ptr, c, r, 15, K, inside, g0, g1, g2, ta3 * c2,
                           3 * ta3 * c1, -6 * ta3 * x * y, 0.0, gx, gy, gz)  # fmt: skip
    # through the normalisation u = d / |d|: (I - u u^T) / |d| applied to the gradient of u
    along = gx * x + gy * y + gz * z
    tl.store(grad_dirs_ptr + 3 * r, (gx - along * x) * inv, mask=inside)
    tl.store(grad_dirs_ptr + 3 * r + 1, (gy - along * y) * inv, mask=inside)
    tl.store(grad_dirs_ptr + 3 * r + 2, (gz - along * z) * inv, mask=inside)
