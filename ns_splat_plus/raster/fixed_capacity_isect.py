"""Tile intersections in buffers of a fixed capacity, without a host read: :func:`isect_tiles_fixed`.

gsplat 1.4.0's ``isect_tiles`` reads the number of (Gaussian, tile) entries on the host
(``cum_tiles_per_gauss[-1].item()``, ``isect_tiles.cu``) to size its buffers: one synchronisation in
every training step, and output shapes that change from step to step. Neither can be recorded in a
CUDA graph. :func:`isect_tiles_fixed` writes the same entries, in the same order, into ``capacity``
slots chosen by the caller, with PyTorch operations whose shapes depend only on ``C``, ``N``, the tile
grid and ``capacity``:

- the slots past the true count hold a padding key above every real key, so the sort leaves them at
  the end;
- the tile grid gets one more row of tiles below the image. Each of its tiles starts where the next
  camera's entries start (the last camera's: at the true count), so every real tile's range is
  gsplat's, and the very last tile of the grid spans the padding. That row lies outside the image and
  ``masks`` marks it off, so gsplat's ``rasterize_to_pixels`` skips its tiles in the forward (no
  pixel inside) and in the backward (the mask). gsplat's wrapper accepts the taller grid (it asserts
  ``tile_height * tile_size >= image_height``).

A count above ``capacity`` drops the entries of the farthest Gaussians of the last cameras (``overflow`` says so,
on the device): the caller reads ``overflow`` where a synchronisation costs nothing, or sizes ``capacity`` from
the count (``n_isects``) of an earlier render.

Each Gaussian's tiles are gsplat's: ``floor`` / ``ceil`` of ``(mean2d -+ radius) / tile_size`` in float32,
clamped to the grid, listed row by row. gsplat writes its entries in (camera, Gaussian) order and sorts them
by (camera, tile, the depth's 32 float bits). Here the slots are filled camera by camera with each camera's
Gaussians nearest first (a stable sort of the same bits, so equal depths keep the index order, as gsplat's
stable sort keeps them), and a stable sort by (camera, tile) alone gives gsplat's order: ``flatten_ids`` and
``isect_offsets``, all the rasterizer reads, are gsplat's bit for bit. The keys take the bits (camera, tile)
need: int16 on one camera up to 65,535 tiles (1080p at 16-pixel tiles: 8,280), so the sort of the
``capacity`` slots runs 2 radix passes over 2-byte keys where gsplat's keys would take 8 over 8 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SlotKeyLayout:
    """How a slot's key packs its entry's (camera, tile): ``((camera << camera_shift) | tile) - bias`` in ``dtype``;
    ``padding``, an unused slot's key, sorts after every real key and every tile's first key."""

    camera_shift: int
    dtype: torch.dtype
    bias: int
    padding: int

    def pack(self, camera: Tensor, tile: Tensor) -> Tensor:
        """The keys of entries of ``camera`` and ``tile`` (int64 tensors that broadcast together), in int64."""
        return ((camera << self.camera_shift) | tile) - self.bias


def slot_key_layout(cameras: int, grid_tiles: int) -> SlotKeyLayout:
    """The narrowest layout for ``cameras`` over ``grid_tiles`` tiles (both >= 1) whose largest key stays below the
    padding (the type's largest value): int16 or int32 with the keys shifted down by half the type's range into
    its signed range, else int64."""
    camera_shift = (grid_tiles - 1).bit_length()
    largest = ((cameras - 1) << camera_shift) | (grid_tiles - 1)
    for dtype, bias in ((torch.int16, 2**15), (torch.int32, 2**31), (torch.int64, 0)):
        padding = torch.iinfo(dtype).max
        if largest - bias < padding:
            return SlotKeyLayout(camera_shift, dtype, bias, padding)
    raise ValueError(f"{cameras} cameras of {grid_tiles} tiles do not fit a 63-bit key")


@dataclass
class FixedCapacityIntersections:
    """The sorted entries and the tile ranges of :func:`isect_tiles_fixed` (``K`` = capacity)."""

    isect_ids: Tensor
    """[K] the sorted keys, in ``key_layout``; padding last."""
    key_layout: SlotKeyLayout
    """How ``isect_ids`` pack (camera, tile)."""
    flatten_ids: Tensor
    """[K] int32, the flattened (camera, Gaussian) index ``c * N + n`` of each entry (0 in padding)."""
    isect_offsets: Tensor
    """[C, tile_height + 1, tile_width] int32, where each tile's entries start (gsplat's offsets, one row more)."""
    masks: Tensor
    """[C, tile_height + 1, tile_width] bool, False on the added row."""
    tiles_per_gauss: Tensor
    """[C, N] int32, the tiles each Gaussian is listed in (0 where its radius is 0)."""
    n_isects: Tensor
    """[] int64 on the device, the number of real entries (the true count, also when it overflows)."""
    overflow: Tensor
    """[] bool on the device: ``n_isects > capacity``, entries were dropped."""


def slot_keys_torch(
    tiles_per_group: Tensor,
    ends: Tensor,
    lower: Tensor,
    extent: Tensor,
    group_owner: Tensor,
    n_gaussians: int,
    tile_width: int,
    layout: SlotKeyLayout,
    capacity: int,
) -> tuple[Tensor, Tensor]:
    """The unsorted keys of ``capacity`` slots and each slot's (camera, Gaussian) index, from a
    search over the slots (arguments and returns: :func:`~ns_splat_plus.kernels.isect_fill.slot_keys_triton`,
    whose shift, bias, padding and key dtype ``layout`` gives). The path on the CPU, and the kernel's oracle."""
    groups = tiles_per_group.numel()
    # slot k belongs to the group whose [start, end) holds it; slots from the true count on are padding
    slots = torch.arange(capacity, device=ends.device)
    group = torch.searchsorted(ends, slots, right=True).clamp_(max=groups - 1)
    used = slots < ends[-1]
    local = slots - (ends[group] - tiles_per_group[group])
    width = extent[:, 0][group].clamp(min=1)
    tile_y = lower[:, 1][group] + torch.div(local, width, rounding_mode="floor")
    tile_x = lower[:, 0][group] + torch.remainder(local, width)
    owner = group_owner[group]
    camera = torch.div(owner, n_gaussians, rounding_mode="floor")
    keys = layout.pack(camera, tile_y * tile_width + tile_x)
    return torch.where(used, keys, layout.padding).to(layout.dtype), torch.where(used, owner, 0).to(torch.int32)


def _slot_keys_triton(
    tiles_per_group: Tensor, ends: Tensor, lower: Tensor, extent: Tensor, group_owner: Tensor, n_gaussians: int,
    tile_width: int, layout: SlotKeyLayout, capacity: int,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    # on CUDA: one program per Gaussian instead of ~20 operations over every slot; at plush-dog's sizes 0.54
    # against 0.90 ms per call inside a CUDA graph, the same keys bit for bit
    # (benchmarks/2026-11-29-h200x2-cuda-graph-lite-default/)
    from ns_splat_plus.kernels.isect_fill import slot_keys_triton

    return slot_keys_triton(
        tiles_per_group, ends, lower, extent, group_owner, n_gaussians, tile_width, capacity,
        camera_shift=layout.camera_shift, bias=layout.bias, padding_key=layout.padding, key_dtype=layout.dtype,
    )  # fmt: skip


@torch.no_grad()
def isect_tiles_fixed(
    means2d: Tensor, radii: Tensor, depths: Tensor, tile_size: int, tile_width: int, tile_height: int, capacity: int
) -> FixedCapacityIntersections:
    """gsplat's ``isect_tiles(sort=True)`` and ``isect_offset_encode`` into ``capacity`` slots.

    Args:
        means2d: [C, N, 2] float32, projected centres in pixels.
        radii: [C, N] int32, the half-side in pixels of the square of tiles each Gaussian is listed in
            (gsplat's radii, or :func:`~ns_splat_plus.raster.tile_bounds.tile_radii`); 0 skips it.
        depths: [C, N] float32, positive camera-space depths (their bits order the entries of a tile).
        tile_size: pixels per tile side. tile_width, tile_height: the image's tile grid.
        capacity: K, the number of slots (>= 1).

    Returns:
        :class:`FixedCapacityIntersections`; pass ``isect_offsets``, ``flatten_ids`` and ``masks`` to
        gsplat's ``rasterize_to_pixels``.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, got {capacity}")
    C, N = radii.shape
    device = means2d.device
    masks = torch.ones(C, tile_height + 1, tile_width, dtype=torch.bool, device=device)
    masks[:, tile_height] = False
    grid_tiles = (tile_height + 1) * tile_width
    layout = slot_key_layout(max(C, 1), grid_tiles)
    if C * N == 0:  # nothing to list: every slot is padding, every tile empty
        zero = torch.zeros((), dtype=torch.int64, device=device)
        return FixedCapacityIntersections(
            isect_ids=torch.full((capacity,), layout.padding, dtype=layout.dtype, device=device),
            key_layout=layout,
            flatten_ids=torch.zeros(capacity, dtype=torch.int32, device=device),
            isect_offsets=torch.zeros(C, tile_height + 1, tile_width, dtype=torch.int32, device=device),
            masks=masks,
            tiles_per_gauss=torch.zeros(C, N, dtype=torch.int32, device=device),
            n_isects=zero,
            overflow=zero > capacity,
        )

    # gsplat's tile range per Gaussian, in float32 as its kernel computes it; its float-to-uint32 casts
    # saturate (NaN to 0), which nan_to_num and the clamps reproduce before the integer conversion
    # (limits as Python numbers: a tensor made from a list would be a host-to-device copy)
    tile_radius = radii.to(torch.float32)[..., None] / tile_size
    tile_xy = means2d.to(torch.float32) / tile_size

    def tile_index(x: Tensor) -> Tensor:
        x = torch.nan_to_num(x, nan=0.0)
        return torch.stack([x[..., 0].clamp(0.0, tile_width), x[..., 1].clamp(0.0, tile_height)], -1).to(torch.int64)

    lower, upper = tile_index(torch.floor(tile_xy - tile_radius)), tile_index(torch.ceil(tile_xy + tile_radius))
    extent = upper - lower  # [C, N, 2]
    tiles_per_gauss = torch.where(radii > 0, extent[..., 0] * extent[..., 1], 0)  # [C, N]

    # the slots are filled camera by camera, each camera's Gaussians nearest first: the float bits of positive
    # depths order them as the floats, and the stable sort keeps equal depths in index order, as gsplat's stable
    # sort of its (camera, tile, depth bits) keys does. A stable sort of the (camera, tile) keys alone then leaves
    # each tile's entries in gsplat's order.
    by_depth = torch.sort(depths.to(torch.float32).contiguous().view(torch.int32), dim=-1, stable=True).indices
    fill = (by_depth + torch.arange(C, device=device)[:, None] * N).reshape(-1)  # (camera, Gaussian) in fill order
    tiles_in_fill = tiles_per_gauss.reshape(-1)[fill]
    ends = torch.cumsum(tiles_in_fill, 0)
    n_isects = ends[-1]
    slot_keys = _slot_keys_triton if device.type == "cuda" else slot_keys_torch
    keys, owner = slot_keys(tiles_in_fill, ends, lower.reshape(-1, 2)[fill], extent.reshape(-1, 2)[fill], fill,
                            N, tile_width, layout, capacity)  # fmt: skip
    isect_ids, order = torch.sort(keys, stable=True)
    del keys  # the slot buffers are the recorded step's largest: hold as few of them at once as possible
    flatten_ids = owner[order]
    del owner, order

    # each tile's first entry: gsplat's offsets, and the added row's tiles start where the next camera does
    queries = layout.pack(torch.arange(C, device=device)[:, None], torch.arange(grid_tiles, device=device))
    isect_offsets = torch.searchsorted(isect_ids, queries.reshape(-1).to(layout.dtype)).to(torch.int32)
    return FixedCapacityIntersections(
        isect_ids=isect_ids,
        key_layout=layout,
        flatten_ids=flatten_ids,
        isect_offsets=isect_offsets.reshape(C, tile_height + 1, tile_width),
        masks=masks,
        tiles_per_gauss=tiles_per_gauss.reshape(C, N).to(torch.int32),
        n_isects=n_isects,
        overflow=n_isects > capacity,
    )
