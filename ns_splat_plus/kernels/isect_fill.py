"""The Triton kernel that writes the fixed-capacity tile intersections' keys: :func:`slot_keys_triton`.

:func:`ns_splat_plus.raster.fixed_capacity_isect.isect_tiles_fixed` lists every (Gaussian, tile) entry in
``capacity`` slots before sorting them. Its PyTorch path finds each slot's Gaussian with a search and
computes its key with about twenty elementwise operations over all the slots (2.9M on plush-dog), whether
used or not. This kernel runs one program per Gaussian, which writes its own entries' keys and indices
into its slots; the unused slots keep the padding they were filled with. The keys are the PyTorch
path's, bit for bit, in the same slots (that path is this kernel's oracle).

It runs on CUDA, where it pays: at plush-dog's sizes (18k Gaussians, 1500x1000, 2.9M slots) one
``isect_tiles_fixed`` call takes 0.54 against 0.90 ms inside a CUDA graph (0.94 against 1.25 eager), and
splat-plus-lite's recorded step 2.58 against 3.13 ms with the recorded SH kernels of
:mod:`.spherical_harmonics` (one H200; benchmarks/2026-11-29-h200x2-cuda-graph-lite-default/).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ns_splat_plus.kernels.launch import KernelLauncher

BLOCK = 256
"""Slots a program writes per iteration: a Gaussian covers 1 to a few hundred tiles."""


@functools.lru_cache(maxsize=1)
def _launcher() -> KernelLauncher:
    """The kernel behind a KernelLauncher, defined on first use (Triton imported only where it runs)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n_gaussians", "capacity", "tile_width", "camera_shift", "bias"])
    def fill_slot_keys(
        starts_ptr,
        counts_ptr,
        lower_x_ptr,
        lower_y_ptr,
        widths_ptr,
        owners_ptr,
        keys_ptr,
        ids_ptr,
        n_gaussians,
        capacity,
        tile_width,
        camera_shift,
        bias,
        BLOCK: tl.constexpr,
    ):
        j = tl.program_id(0).to(tl.int64)  # the group: one Gaussian in one camera, in fill order
        count = tl.load(counts_ptr + j)
        start = tl.load(starts_ptr + j)
        lower_x = tl.load(lower_x_ptr + j)
        lower_y = tl.load(lower_y_ptr + j)
        width = tl.maximum(tl.load(widths_ptr + j), 1)
        g = tl.load(owners_ptr + j).to(tl.int64)  # its flattened (camera, Gaussian) index
        camera = g // n_gaussians
        high = camera << camera_shift
        for base in range(0, count, BLOCK):
            local = base + tl.arange(0, BLOCK).to(tl.int64)
            slot = start + local
            inside = (local < count) & (slot < capacity)
            tile = (lower_y + local // width) * tile_width + lower_x + local % width
            key = (high | tile) - bias  # SlotKeyLayout.pack, in int64, then the keys' dtype (values fit)
            tl.store(keys_ptr + slot, key.to(keys_ptr.dtype.element_ty), mask=inside)
            tl.store(ids_ptr + slot, g.to(tl.int32), mask=inside)

    return KernelLauncher(fill_slot_keys)


def slot_keys_triton(
    tiles_per_group: Tensor,
    ends: Tensor,
    lower: Tensor,
    extent: Tensor,
    group_owner: Tensor,
    n_gaussians: int,
    tile_width: int,
    capacity: int,
    *,
    camera_shift: int,
    bias: int,
    padding_key: int,
    key_dtype: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """The unsorted keys of ``capacity`` slots and each slot's (camera, Gaussian) index.

    Args:
        tiles_per_group: [C * N] int64, each group's tile count (0 where it is not listed); a group is one
            (camera, Gaussian), in the order their slots are filled.
        ends: [C * N] int64, their inclusive cumulative sum (slot ``ends[j] - tiles_per_group[j]`` is j's first).
        lower: [C * N, 2] int64, the first tile column and row of each group's rectangle.
        extent: [C * N, 2] int64, the rectangle's columns and rows.
        group_owner: [C * N] int64, each group's flattened (camera, Gaussian) index ``c * N + n``.
        n_gaussians: N. tile_width: the grid's columns. capacity: K.
        camera_shift, bias, padding_key, key_dtype: the keys' layout (a slot's key is
            ``((camera << camera_shift) | tile) - bias`` in ``key_dtype``; see
            :class:`~ns_splat_plus.raster.fixed_capacity_isect.SlotKeyLayout`).

    Returns:
        ``(keys [K] key_dtype, owner [K] int32)``: ``owner`` is 0 in unused slots (C * N < 2**31).
    """
    keys = torch.full((capacity,), padding_key, dtype=key_dtype, device=ends.device)
    owner = torch.zeros(capacity, dtype=torch.int32, device=ends.device)
    starts = (ends - tiles_per_group).contiguous()
    groups = tiles_per_group.numel()
    if groups:
        _launcher()(
            (groups,),
            starts, tiles_per_group.contiguous(), lower[:, 0].contiguous(), lower[:, 1].contiguous(),
            extent[:, 0].contiguous(), group_owner.contiguous(), keys, owner,
            n_gaussians, capacity, tile_width, camera_shift, bias, BLOCK,
        )  # fmt: skip
    return keys, owner
