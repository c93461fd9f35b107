"""Tile intersections of a fixed capacity (ns_splat_plus/raster/fixed_capacity_isect.py): gsplat's entries
in gsplat's order and gsplat's tile ranges (against gsplat 1.4.0's own PyTorch implementation of
isect_tiles / isect_offset_encode), in int16 and int64 keys alike, equal depths in gsplat's order, the padding
sorted last and spanned by the masked extra tile row, overflow reported (the nearest Gaussians' entries kept),
and no host read. On the GPU: gsplat's rasterizer gives the same pixels with these
buffers as with its own, and the intersection is recorded in a CUDA graph and replayed."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ns_splat_plus import upstream
from ns_splat_plus.raster import fixed_capacity_isect as isect
from ns_splat_plus.raster.fixed_capacity_isect import SlotKeyLayout, isect_tiles_fixed, slot_key_layout

TILE = 16
WIDTH, HEIGHT = 100, 70  # a 7 x 5 tile grid, the last column and row partly outside the image
TILE_W, TILE_H = (WIDTH + TILE - 1) // TILE, (HEIGHT + TILE - 1) // TILE


def _projected(C: int = 2, N: int = 200, seed: int = 0, device: str = "cpu"):
    """Projected Gaussians as the projection leaves them: centres in and around the image (some far
    outside), integer radii from 0 (culled) to 40 px, distinct positive depths."""
    g = torch.Generator().manual_seed(seed)
    means2d = torch.rand(C, N, 2, generator=g) * torch.tensor([WIDTH + 80.0, HEIGHT + 80.0]) - 40.0
    radii = torch.randint(0, 41, (C, N), generator=g, dtype=torch.int32)
    radii[torch.rand(C, N, generator=g) < 0.2] = 0
    depths = torch.randperm(C * N, generator=g).reshape(C, N).float() * 0.01 + 0.5
    return means2d.to(device), radii.to(device), depths.to(device)


def _gsplat_reference(means2d, radii, depths):
    """gsplat 1.4.0's PyTorch isect_tiles (sorted and in write order) and isect_offset_encode."""
    ops = upstream.torch_reference_ops()
    tiles_per_gauss, ids, flat = ops._isect_tiles(means2d, radii, depths, TILE, TILE_W, TILE_H, sort=True)
    _, ids_written, flat_written = ops._isect_tiles(means2d, radii, depths, TILE, TILE_W, TILE_H, sort=False)
    offsets = ops._isect_offset_encode(ids, means2d.shape[0], TILE_W, TILE_H)
    return tiles_per_gauss, ids, flat, ids_written, flat_written, offsets


def _decode_gsplat(keys: torch.Tensor, tile_bits: int):
    """(camera, tile, depth bits) of gsplat's sorted keys."""
    return keys >> (32 + tile_bits), (keys >> 32) & ((1 << tile_bits) - 1), keys & 0xFFFFFFFF


def _decode(keys: torch.Tensor, layout: SlotKeyLayout):
    """(camera, tile) of isect_tiles_fixed's sorted keys."""
    unbiased = keys.to(torch.int64) + layout.bias
    return unbiased >> layout.camera_shift, unbiased & ((1 << layout.camera_shift) - 1)


def _wide(layout: SlotKeyLayout) -> SlotKeyLayout:
    """The int64 layout of the same shift (what a grid of more than 65,535 tiles gets)."""
    return SlotKeyLayout(layout.camera_shift, torch.int64, 0, 2**63 - 1)


def _ranges(offsets: torch.Tensor, n_total: int):
    """Each tile's [start, end) as gsplat's rasterizer reads it: the next tile's start, and for the very
    last tile of the grid the length of flatten_ids."""
    starts = offsets.reshape(-1).long()
    ends = torch.cat([starts[1:], torch.tensor([n_total])])
    return starts.reshape(offsets.shape), ends.reshape(offsets.shape)


@pytest.mark.parametrize("wide", [False, True], ids=["int32 keys", "int64 keys"])
def test_entries_order_and_tile_ranges_are_gsplats(monkeypatch, wide):
    means2d, radii, depths = _projected()
    if wide:
        monkeypatch.setattr(isect, "slot_key_layout", lambda *sizes: _wide(slot_key_layout(*sizes)))
    tiles_per_gauss, ids, flat, _, _, offsets = _gsplat_reference(means2d, radii, depths)
    n = ids.numel()
    assert n > 500  # the scene lists many entries, some Gaussians in several tiles
    capacity = n + 37
    out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, capacity)

    assert int(out.n_isects) == n and not bool(out.overflow)
    assert torch.equal(out.tiles_per_gauss, tiles_per_gauss)
    assert out.isect_ids.shape == (capacity,) and out.flatten_ids.dtype == torch.int32
    assert out.isect_ids.dtype == (torch.int64 if wide else torch.int16) == out.key_layout.dtype
    assert torch.equal(out.flatten_ids[:n], flat), "not gsplat's order of entries"
    camera, tile = _decode(out.isect_ids[:n], out.key_layout)
    gsplat_camera, gsplat_tile, _ = _decode_gsplat(ids, (TILE_H * TILE_W).bit_length())
    assert torch.equal(camera, gsplat_camera) and torch.equal(tile, gsplat_tile)
    assert bool((out.isect_ids[n:] == out.key_layout.padding).all()) and bool((out.flatten_ids[n:] == 0).all())

    # every real tile's range is gsplat's; the added row holds no entry but the padding, at the very end
    assert out.isect_offsets.shape == out.masks.shape == (2, TILE_H + 1, TILE_W)
    start, end = _ranges(out.isect_offsets, capacity)
    ref_start, ref_end = _ranges(offsets, n)
    assert torch.equal(start[:, :TILE_H], ref_start) and torch.equal(end[:, :TILE_H], ref_end)
    added_start, added_end = start[:, TILE_H].reshape(-1), end[:, TILE_H].reshape(-1)
    assert bool((added_start[:-1] == added_end[:-1]).all()), "an added tile other than the last has entries"
    assert (int(added_start[-1]), int(added_end[-1])) == (n, capacity)
    assert torch.equal(out.masks[:, :TILE_H], torch.ones(2, TILE_H, TILE_W, dtype=torch.bool))
    assert not bool(out.masks[:, TILE_H].any())


def test_equal_depths_keep_gsplats_order_by_index():
    """Many Gaussians at one of three depths: a tile's entries of equal depth in (camera, Gaussian) index order,
    as a stable sort of gsplat's keys (camera, tile, depth bits) in the order gsplat writes them leaves them."""
    means2d, radii, depths = _projected(seed=6)
    levels = torch.randint(0, 3, depths.shape, generator=torch.Generator().manual_seed(6))
    depths = torch.tensor([0.5, 1.0, 2.0])[levels]
    _, _, _, ids_written, flat_written, offsets = _gsplat_reference(means2d, radii, depths)
    want = flat_written[torch.sort(ids_written, stable=True).indices]
    out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, want.numel() + 5)
    assert torch.equal(out.flatten_ids[: want.numel()], want)
    start, end = _ranges(out.isect_offsets, want.numel() + 5)
    ref_start, ref_end = _ranges(offsets, want.numel())
    assert torch.equal(start[:, :TILE_H], ref_start) and torch.equal(end[:, :TILE_H], ref_end)


def test_one_camera_and_capacity_equal_to_the_count():
    means2d, radii, depths = _projected(C=1, N=120, seed=3)
    _, ids, flat, _, _, offsets = _gsplat_reference(means2d, radii, depths)
    out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, ids.numel())
    assert not bool(out.overflow)
    assert torch.equal(out.flatten_ids, flat)
    start, end = _ranges(out.isect_offsets, ids.numel())
    ref_start, ref_end = _ranges(offsets, ids.numel())
    assert torch.equal(start[:, :TILE_H], ref_start) and torch.equal(end[:, :TILE_H], ref_end)


def test_overflow_is_reported_and_keeps_the_nearest_gaussians_entries():
    """Half the room: the slots hold the entries of each camera's nearest Gaussians, camera by camera (gsplat's
    written entries ordered by (camera, depth) with each Gaussian's tiles in their row order), sorted by tile."""
    means2d, radii, depths = _projected(seed=1)
    _, ids, _, ids_written, flat_written, _ = _gsplat_reference(means2d, radii, depths)
    capacity = ids.numel() // 2
    out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, capacity)
    assert bool(out.overflow) and int(out.n_isects) == ids.numel()
    tile_bits = (TILE_H * TILE_W).bit_length()
    camera, tile, depth_bits = _decode_gsplat(ids_written, tile_bits)
    fill_order = torch.sort((camera << 32) | depth_bits, stable=True).indices  # (camera, depth), tiles in row order
    kept = fill_order[:capacity]
    by_tile = torch.sort((camera << tile_bits | tile)[kept], stable=True).indices
    assert torch.equal(out.flatten_ids, flat_written[kept][by_tile])
    start, end = _ranges(out.isect_offsets, capacity)
    assert int(end.reshape(-1)[-1]) == capacity and int(start.reshape(-1)[-1]) == capacity  # no padding left


def test_a_gaussian_with_a_non_finite_centre_lists_no_tile_and_an_empty_scene_only_padding():
    means2d, radii, depths = _projected(C=1, N=50, seed=2)
    means2d[0, 7] = float("nan")
    radii[0, 7] = 12
    out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, 4096)
    assert int(out.tiles_per_gauss[0, 7]) == 0 and not bool((out.flatten_ids[: int(out.n_isects)] == 7).any())

    empty = isect_tiles_fixed(torch.zeros(1, 0, 2), torch.zeros(1, 0, dtype=torch.int32), torch.zeros(1, 0), TILE,
                              TILE_W, TILE_H, 64)  # fmt: skip
    assert int(empty.n_isects) == 0 and bool((empty.isect_ids == empty.key_layout.padding).all())
    assert not bool(empty.isect_offsets.any())


def test_no_host_read_and_shapes_that_depend_only_on_the_capacity():
    """No operator that reads a tensor on the host or gives a shape from the data (what a CUDA graph
    cannot record), and the same output shapes for two scenes of different entry counts."""
    data_dependent = {"_local_scalar_dense", "item", "nonzero", "unique_consecutive", "_unique2", "masked_select",
                      "repeat_interleave", "is_nonzero", "equal"}  # fmt: skip
    seen = set()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    shapes = []
    for seed in (0, 4):
        means2d, radii, depths = _projected(seed=seed)
        with Recorder():
            out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, 5000)
        shapes.append([tuple(t.shape) for t in (out.isect_ids, out.flatten_ids, out.isect_offsets, out.masks)])
    assert "searchsorted" in seen and "sort" in seen, seen  # the recorder saw the work
    assert not (seen & data_dependent), seen & data_dependent
    assert shapes[0] == shapes[1]


def test_a_bad_capacity_is_refused():
    means2d, radii, depths = _projected(C=1, N=4)
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, 0)


def test_the_keys_take_the_narrowest_type_that_camera_and_tile_fit():
    fox = slot_key_layout(1, 69 * 120)  # 1080x1920 at 16-pixel tiles, with the added row
    assert (fox.dtype, fox.camera_shift, fox.bias, fox.padding) == (torch.int16, 14, 2**15, 2**15 - 1)
    assert slot_key_layout(4, 69 * 120).dtype == torch.int16  # 4 cameras per step: 3 << 14 | 8279 = 57,431
    assert slot_key_layout(1, 2**16).dtype == torch.int32  # a 4096x4096 image (257 x 256 tiles) and beyond
    # the largest real key must stay below the padding: 65,535 itself (every bit one) goes to int32
    assert slot_key_layout(1, 2**16 - 1).dtype == torch.int16
    assert slot_key_layout(2, 2**15).dtype == torch.int32
    assert slot_key_layout(2**20, 2**20).dtype == torch.int64
    with pytest.raises(ValueError, match="63-bit key"):
        slot_key_layout(2**40, 2**30)


# --- on the GPU: gsplat's rasterizer with these buffers, and a CUDA graph ------------------------------

gpu_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")


def _rasterizer_inputs(seed: int = 0):
    """A projected scene on the GPU, with conics, colours and opacities for gsplat's rasterizer."""
    means2d, radii, depths = _projected(C=2, N=3000, seed=seed, device="cuda")
    g = torch.Generator().manual_seed(seed + 100)
    scale = torch.rand(2, 3000, generator=g) * 20 + 0.5
    conics = torch.stack([1 / scale**2, torch.zeros_like(scale), 1 / scale**2], -1).cuda()
    colors = torch.rand(2, 3000, 3, generator=g).cuda()
    opacities = (torch.rand(2, 3000, generator=g) * 0.9 + 0.05).cuda()
    radii = torch.minimum(radii.cuda(), torch.ceil(3 * scale).int().cuda())
    return means2d, radii, depths, conics, colors, opacities


@pytest.mark.gpu
@gpu_only
def test_gsplats_rasterizer_renders_the_same_pixels_from_the_fixed_buffers():
    kernels = upstream.gsplat_kernels()
    means2d, radii, depths, conics, colors, opacities = _rasterizer_inputs()
    results = []
    for fixed in (False, True):
        leaves = [t.clone().requires_grad_() for t in (means2d, conics, colors, opacities)]
        if fixed:
            out = isect_tiles_fixed(means2d, radii, depths, TILE, TILE_W, TILE_H, 300_000)
            assert not bool(out.overflow)
            offsets, flatten_ids, masks = out.isect_offsets, out.flatten_ids, out.masks
        else:
            _, ids, flatten_ids = kernels.isect_tiles(means2d, radii, depths, TILE, TILE_W, TILE_H)
            offsets, masks = kernels.isect_offset_encode(ids, 2, TILE_W, TILE_H), None
        render, alpha = kernels.rasterize_to_pixels(*leaves, WIDTH, HEIGHT, TILE, offsets, flatten_ids, masks=masks)
        weights = torch.linspace(0.5, 1.5, render.numel(), device="cuda").reshape(render.shape)
        ((render * weights).sum() + alpha.sum()).backward()
        results.append((render.detach(), alpha.detach(), [leaf.grad for leaf in leaves]))
    (render_a, alpha_a, grads_a), (render_b, alpha_b, grads_b) = results
    assert torch.equal(render_a, render_b) and torch.equal(alpha_a, alpha_b)
    for a, b in zip(grads_a, grads_b):  # the backward's atomic adds may sum in another order
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # measured: 3.9e-7 off, 1 element of 12,000
        assert bool(a.abs().sum() > 0)


@pytest.mark.gpu
@gpu_only
def test_the_intersection_records_in_a_cuda_graph_and_replays_for_new_centres():
    means2d, radii, depths, *_ = _rasterizer_inputs()
    static_means = means2d.clone()
    isect_tiles_fixed(static_means, radii, depths, TILE, TILE_W, TILE_H, 300_000)  # warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # raises if anything in it synchronises with the host
        recorded = isect_tiles_fixed(static_means, radii, depths, TILE, TILE_W, TILE_H, 300_000)
    moved = means2d + torch.tensor([7.5, -3.25], device="cuda")
    static_means.copy_(moved)
    graph.replay()
    eager = isect_tiles_fixed(moved, radii, depths, TILE, TILE_W, TILE_H, 300_000)
    for name in ("isect_ids", "flatten_ids", "isect_offsets", "n_isects"):
        assert torch.equal(getattr(recorded, name), getattr(eager, name)), name
