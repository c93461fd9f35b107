"""The Triton kernel of the fixed-capacity slots' keys (ns_splat_plus.kernels.isect_fill) against the PyTorch path
it replaces on CUDA (raster.fixed_capacity_isect.slot_keys_torch, the CPU's path), bit for bit: in Triton's
interpreter on the CPU (a child process, tests/interpreted.py), compiled on the GPU."""

from __future__ import annotations

import pytest
import torch
from interpreted import main, run_interpreted

from ns_splat_plus.raster import fixed_capacity_isect as isect

TILE_WIDTH, TILE_HEIGHT = 9, 7


def _inputs(cameras: int, n: int, seed: int, device: str = "cpu"):
    """Rectangles of tiles as isect_tiles_fixed makes them: some Gaussians in no tile, two cameras' counts, and
    the groups' owners in a fill order (camera by camera, each camera's Gaussians permuted)."""
    g = torch.Generator().manual_seed(seed)
    lower = torch.stack([torch.randint(0, TILE_WIDTH, (cameras * n,), generator=g),
                         torch.randint(0, TILE_HEIGHT + 1, (cameras * n,), generator=g)], -1)  # fmt: skip
    extent = torch.stack([torch.randint(0, 5, (cameras * n,), generator=g),
                          torch.randint(0, 4, (cameras * n,), generator=g)], -1)  # fmt: skip
    extent = torch.minimum(extent, torch.tensor([TILE_WIDTH, TILE_HEIGHT + 1]) - lower)
    tiles = extent[:, 0] * extent[:, 1]
    owners = torch.cat([c * n + torch.randperm(n, generator=g) for c in range(cameras)])
    args = [tiles, torch.cumsum(tiles, 0), lower, extent, owners]
    return [a.to(device) for a in args]


def _layout(cameras: int, n: int, wide: bool) -> isect.SlotKeyLayout:
    """The layout isect_tiles_fixed picks at these sizes (int16), or the int64 layout of the same shift."""
    narrow = isect.slot_key_layout(cameras, (TILE_HEIGHT + 1) * TILE_WIDTH)
    assert narrow.dtype == torch.int16
    return isect.SlotKeyLayout(narrow.camera_shift, torch.int64, 0, 2**63 - 1) if wide else narrow


def check_the_kernel_writes_the_pytorch_path_s_keys(
    cameras: int, n: int, seed: int, capacity_fraction: float, wide: bool
) -> None:
    tiles, ends, lower, extent, owners = _inputs(cameras, n, seed)
    layout = _layout(cameras, n, wide)
    capacity = max(int(int(ends[-1]) * capacity_fraction), 1)
    args = (tiles, ends, lower, extent, owners, n, TILE_WIDTH, layout, capacity)
    want = isect.slot_keys_torch(*args)
    got = isect._slot_keys_triton(*args)
    for name, a, b in zip(("keys", "owner"), got, want, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b), (name, a.dtype, b.dtype, int((a != b).sum()))
    assert got[0].dtype == layout.dtype
    assert bool((want[0] == layout.padding).any()) == (capacity > int(ends[-1]))


@pytest.mark.parametrize(
    "cameras, n, seed, capacity_fraction, wide",
    # room to spare; two cameras; overflow: entries dropped; int64 keys
    [(1, 40, 0, 1.5, False), (2, 30, 1, 1.2, False), (2, 30, 2, 0.6, False), (2, 30, 3, 1.2, True)],
)
def test_the_kernel_writes_the_pytorch_path_s_keys_in_the_interpreter(cameras, n, seed, capacity_fraction, wide):
    run_interpreted(
        __file__, "check_the_kernel_writes_the_pytorch_path_s_keys", cameras, n, seed, capacity_fraction, wide
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_compiled_kernel_gives_isect_tiles_fixed_the_same_entries(monkeypatch):
    g = torch.Generator().manual_seed(5)
    means2d = (torch.rand(2, 20_000, 2, generator=g) * torch.tensor([1500.0, 1000.0])).cuda()
    radii = torch.randint(0, 40, (2, 20_000), generator=g, dtype=torch.int32).cuda()
    depths = (torch.rand(2, 20_000, generator=g) * 5 + 0.1).cuda()
    tile_w, tile_h = 94, 63
    kernel_calls = []
    kernel = isect._slot_keys_triton
    monkeypatch.setattr(isect, "_slot_keys_triton", lambda *args: kernel_calls.append(1) or kernel(*args))
    a = isect.isect_tiles_fixed(means2d, radii, depths, 16, tile_w, tile_h, 3_000_000)
    assert kernel_calls == [1]  # on CUDA the slots' keys come from the kernel
    monkeypatch.setattr(isect, "_slot_keys_triton", isect.slot_keys_torch)
    b = isect.isect_tiles_fixed(means2d, radii, depths, 16, tile_w, tile_h, 3_000_000)
    for name in ("isect_ids", "flatten_ids", "isect_offsets", "n_isects", "overflow"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


if __name__ == "__main__":
    main(globals())
