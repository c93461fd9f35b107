"""Opacity-aware tile bounds (ns_splat_plus/raster/tile_bounds.py): every pixel where the rasterizer lets
a Gaussian contribute stays inside its square, the squares are smaller than gsplat's, and the Triton
kernel computes what the PyTorch formula does. The GPU comparison with gsplat is in test_raster.py."""

from __future__ import annotations

import math

import torch

from ns_splat_plus.raster.tile_bounds import tile_radii_torch

ALPHA_MIN = torch.tensor(1.0 / 255.0, dtype=torch.float32)  # the rasterizer's float 1.f / 255.f


def _gaussians(n: int, seed: int = 0):
    """Projected Gaussians as gsplat's projection leaves them: conics of covariances + 0.3 (float32),
    3-sigma radii of the largest eigenvalue, centres at random sub-pixel positions, opacities from
    1e-3 to 1 (log-uniform); standard deviations 0.3 to 40 px, axis ratios up to 1000, any angle."""
    g = torch.Generator().manual_seed(seed)
    major = torch.exp(torch.rand(n, generator=g, dtype=torch.float64) * math.log(40.0 / 0.3)) * 0.3
    ratio = torch.exp(torch.rand(n, generator=g, dtype=torch.float64) * math.log(1000.0))
    angle = torch.rand(n, generator=g, dtype=torch.float64) * math.pi
    cos, sin = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    variances = torch.stack([major**2, (major / ratio) ** 2], -1)
    cov = rotation @ torch.diag_embed(variances) @ rotation.transpose(-1, -2) + 0.3 * torch.eye(2, dtype=torch.float64)
    conic_matrix = torch.linalg.inv(cov)
    conics = torch.stack([conic_matrix[:, 0, 0], conic_matrix[:, 0, 1], conic_matrix[:, 1, 1]], -1).float()
    half_trace = 0.5 * (cov[:, 0, 0] + cov[:, 1, 1])
    det = torch.linalg.det(cov)
    largest = half_trace + torch.sqrt(torch.clamp(half_trace**2 - det, min=0.01))
    radii = torch.ceil(3.0 * torch.sqrt(largest)).to(torch.int32)  # gsplat's
    opacities = torch.exp(torch.rand(n, generator=g) * math.log(1e-3)).float()
    centres = (torch.rand(n, 2, generator=g) * 16.0 + 500.0).float()
    return radii[None], conics[None], opacities[None], centres


def _reached(conic, opacity, centre, radius):
    """Pixel centres (x, y) around the centre, out to one pixel beyond gsplat's square, where the
    rasterizer's float32 arithmetic gives alpha >= 1/255."""
    span = torch.arange(-radius - 1, radius + 2, dtype=torch.float32)
    px = torch.floor(centre[0]) + span + 0.5
    py = torch.floor(centre[1]) + span + 0.5
    dx = (centre[0] - px)[None, :].expand(len(py), -1)
    dy = (centre[1] - py)[:, None].expand(-1, len(px))
    a, b, c = conic
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    alpha = torch.clamp_max(opacity * torch.exp(-sigma), 0.999)
    hit = (sigma >= 0) & (alpha >= ALPHA_MIN)
    return px[None, :].expand(len(py), -1)[hit], py[:, None].expand(-1, len(px))[hit]


def _tiles(centre, radius):
    """isect_tiles' tile range [min, max) on x and y for a square of half-side ``radius`` (float32)."""
    tile_radius = torch.tensor(float(radius), dtype=torch.float32) / 16.0
    low = torch.floor(centre / 16.0 - tile_radius)
    high = torch.ceil(centre / 16.0 + tile_radius)
    return low, high


def test_every_pixel_a_gaussian_can_reach_lies_inside_its_square():
    """The property the images rest on: a tile of gsplat's square that holds a pixel the Gaussian can
    reach is a tile of the tight square too; and where the square shrank, every reached pixel is inside."""
    radii, conics, opacities, centres = _gaussians(400)
    tight = tile_radii_torch(radii, conics, opacities)
    assert tight.dtype == torch.int32 and tight.shape == radii.shape
    assert (tight <= radii).all()
    checked = 0
    for i in range(radii.shape[1]):
        px, py = _reached(conics[0, i], opacities[0, i], centres[i], int(radii[0, i]))
        if px.numel() == 0:
            continue
        checked += 1
        pixel_tiles = torch.stack([torch.floor(px / 16.0), torch.floor(py / 16.0)], -1)  # [P, 2]
        low, high = _tiles(centres[i], int(radii[0, i]))
        in_gsplat = ((pixel_tiles >= low) & (pixel_tiles < high)).all(-1)
        low, high = _tiles(centres[i], int(tight[0, i]))
        in_tight = ((pixel_tiles >= low) & (pixel_tiles < high)).all(-1)
        assert not (in_gsplat & ~in_tight).any(), (i, tight[0, i].item(), radii[0, i].item())
        if tight[0, i] < radii[0, i]:
            farthest = torch.maximum((px - centres[i, 0]).abs().max(), (py - centres[i, 1]).abs().max()).item()
            assert farthest <= tight[0, i].item(), (i, farthest, tight[0, i].item(), radii[0, i].item())
    assert checked > 300  # the checks above ran on most of them
    # and the squares are smaller: area of the tight squares against gsplat's
    area = lambda r: (2.0 * r.double() + 1.0) ** 2  # noqa: E731
    shrink = (area(tight) / area(radii)).mean().item()
    print(f"mean area of the tight squares: {shrink:.3f} of gsplat's")
    assert shrink < 0.6


def test_squares_follow_the_opacity_and_the_orientation():
    """An isotropic Gaussian of opacity 0.05 reaches 1/255 at sqrt(2 ln 12.75) = 2.26 sigma, not 3; an
    opaque one elongated along the diagonal reaches sqrt(2 ln 255 / 2) = 2.35 of its major sigma on x
    and y; an opaque round one is held to gsplat's 3 sigma; below 1/255 nothing is listed."""

    def conic_of(cov):
        inverse = torch.linalg.inv(torch.tensor(cov, dtype=torch.float64) + 0.3 * torch.eye(2, dtype=torch.float64))
        return [inverse[0, 0].item(), inverse[0, 1].item(), inverse[1, 1].item()]

    sigma = 20.0
    round_var = sigma**2 - 0.3
    diagonal = [[round_var / 2 + 0.01, round_var / 2 - 0.01], [round_var / 2 - 0.01, round_var / 2 + 0.01]]
    conics = torch.tensor(
        [
            [conic_of([[round_var, 0], [0, round_var]])] * 2
            + [conic_of(diagonal)]
            + [conic_of([[round_var, 0], [0, round_var]])]
        ],
        dtype=torch.float32,
    )
    opacities = torch.tensor([[0.05, 1.0, 1.0, 0.9 / 255.0]])
    radii = torch.full((1, 4), math.ceil(3 * sigma), dtype=torch.int32)
    tight = tile_radii_torch(radii, conics, opacities)[0].tolist()
    assert tight[0] == math.ceil(math.sqrt(2 * math.log(255 * 0.05)) * sigma + 0.01)  # 46, not 60
    assert tight[1] == 60  # 3.33 sigma reaches further: gsplat's square is kept
    assert tight[2] == math.ceil(math.sqrt(math.log(255.0)) * sigma + 0.01)  # 48
    assert tight[3] == 0


def test_what_cannot_be_bounded_keeps_gsplats_radius():
    radii = torch.tensor([[10, 0, 9, 11, 13]], dtype=torch.int32)  # conic 0.1: sigma 3.16 px, 3 sigma 10
    conics = torch.tensor([[[0.1, 0.0, 0.1], [0.1, 0.0, 0.1], [0.1, 0.2, 0.1], [0.1, 0.0, 0.1], [-0.1, 0.0, 0.1]]])
    opacities = torch.tensor([[0.1, 0.5, 0.5, float("nan"), 0.5]])
    tight = tile_radii_torch(radii, conics, opacities)[0].tolist()
    assert tight[0] == 9  # a bounded one for contrast: sqrt(2 ln 25.5) sigma = 8.05
    assert tight[1] == 0  # culled by gsplat stays culled
    assert tight[2:] == [9, 11, 13]  # not positive definite, NaN opacity (it must still reach the image)


def test_the_triton_kernel_computes_the_pytorch_formula():
    from interpreted import run_interpreted

    run_interpreted(__file__, "check_kernel_matches_torch")


def check_kernel_matches_torch():
    from ns_splat_plus.raster import tile_bounds

    radii, conics, opacities, _ = _gaussians(3000, seed=1)
    radii = torch.cat([radii, radii // 2], 0)  # [2, N]: two cameras
    conics = torch.cat([conics, conics], 0)
    opacities = torch.cat([opacities, opacities.flip(-1)], 0)
    radii[0, :5] = 0
    opacities[1, :3] = torch.tensor([0.0, float("nan"), 0.5 / 255.0])
    expected = tile_bounds.tile_radii_torch(radii, conics, opacities)
    got = tile_bounds._tile_radii_triton(radii, conics, opacities)
    assert got.dtype == torch.int32 and got.shape == radii.shape
    differ = (got != expected).sum().item()
    assert (got - expected).abs().max().item() <= 1 and differ <= 3, differ  # log/sqrt may round apart at a ceil
    assert (got < radii).float().mean() > 0.5


if __name__ == "__main__":
    from interpreted import main

    main(globals())
