"""The Triton SH kernels (ns_splat_plus.kernels.spherical_harmonics) against gsplat's PyTorch SH with the mask's zeros
(upstream.recordable_spherical_harmonics), through autograd: colours, and the gradients of the coefficients and of
the unnormalised directions, degrees 0-3, coefficients per camera and shared. In Triton's interpreter on the CPU (a
child process, tests/interpreted.py)."""

from __future__ import annotations

import importlib

import pytest
import torch
from interpreted import main, run_interpreted

from ns_splat_plus import upstream

TOLERANCE = 1e-5  # float32, another order of the same products: relative to each tensor's largest value


def _close(a, b, name):
    scale = float(b.abs().max()) or 1.0
    assert float((a - b).abs().max()) <= TOLERANCE * scale, (name, float((a - b).abs().max()), scale)


def check_the_kernels_give_gsplat_s_pytorch_sh(degree: int, shared: bool, seed: int) -> None:
    from ns_splat_plus.kernels.spherical_harmonics import spherical_harmonics_triton

    g = torch.Generator().manual_seed(seed)
    cameras, n = 2, 70
    dirs = torch.randn(cameras, n, 3, generator=g) * 3
    coeffs = torch.randn(*(() if shared else (cameras,)), n, 16, 3, generator=g) * 0.4
    masks = torch.rand(cameras, n, generator=g) > 0.25
    weights = torch.randn(cameras, n, 3, generator=g)
    results = []
    for sh in (spherical_harmonics_triton, upstream.recordable_spherical_harmonics):
        d, c = dirs.clone().requires_grad_(), coeffs.clone().requires_grad_()
        expanded = c.expand(cameras, -1, -1, -1) if shared and sh is upstream.recordable_spherical_harmonics else c
        colors = (
            sh(degree, d, expanded, masks=masks)
            if sh is upstream.recordable_spherical_harmonics
            else sh(degree, d, c, masks)
        )
        (colors * weights).sum().backward()
        results.append((colors.detach(), d.grad, c.grad))
    (colors, dirs_grad, coeffs_grad), (want_colors, want_dirs_grad, want_coeffs_grad) = results
    _close(colors, want_colors, "colours")
    _close(coeffs_grad, want_coeffs_grad, "coefficient gradients")
    if degree > 0:
        _close(dirs_grad, want_dirs_grad, "direction gradients")
    assert bool((colors[~masks] == 0).all()) and bool((dirs_grad[~masks] == 0).all())
    assert bool((coeffs_grad[..., (degree + 1) ** 2 :, :] == 0).all())


@pytest.mark.parametrize(
    "degree, shared, seed", [(0, False, 0), (1, True, 1), (2, False, 2), (3, False, 3), (3, True, 4)]
)
def test_the_kernels_give_gsplat_s_pytorch_sh_in_the_interpreter(degree, shared, seed):
    run_interpreted(__file__, "check_the_kernels_give_gsplat_s_pytorch_sh", degree, shared, seed)


def test_degrees_past_three_are_refused():
    from ns_splat_plus.kernels.spherical_harmonics import spherical_harmonics_triton

    with pytest.raises(ValueError, match="0 to 3"):
        spherical_harmonics_triton(4, torch.zeros(1, 2, 3), torch.zeros(2, 25, 3), torch.ones(1, 2, dtype=torch.bool))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_compiled_kernels_give_gsplat_s_pytorch_sh_and_replay_from_a_cuda_graph():
    from ns_splat_plus.kernels.spherical_harmonics import spherical_harmonics_triton

    g = torch.Generator().manual_seed(7)
    dirs = (torch.randn(1, 20_000, 3, generator=g) * 3).cuda().requires_grad_()
    coeffs = (torch.randn(20_000, 16, 3, generator=g) * 0.4).cuda().requires_grad_()
    masks = (torch.rand(1, 20_000, generator=g) > 0.2).cuda()
    weights = torch.randn(1, 20_000, 3, generator=g).cuda()

    def run(sh):
        dirs.grad = coeffs.grad = None
        colors = sh(3, dirs, coeffs.expand(1, -1, -1, -1), masks=masks)
        (colors * weights).sum().backward()
        return colors.detach().clone(), dirs.grad.clone(), coeffs.grad.clone()

    want = run(upstream.recordable_spherical_harmonics)
    eager = run(lambda *a, masks: spherical_harmonics_triton(*a, masks))
    for a, b, name in zip(eager, want, ("colours", "dirs", "coeffs")):
        _close(a, b, name)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run(lambda *a, masks: spherical_harmonics_triton(*a, masks))
    torch.cuda.current_stream().wait_stream(side)
    dirs.grad = coeffs.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        colors = spherical_harmonics_triton(3, dirs, coeffs.expand(1, -1, -1, -1), masks)
        (colors * weights).sum().backward()
    with torch.no_grad():
        dirs.mul_(-1.0)  # other directions: the replay must compute them, not repeat the recording's
    graph.replay()
    torch.cuda.synchronize()
    replayed = (colors.detach().clone(), dirs.grad.clone(), coeffs.grad.clone())
    for a, b, name in zip(replayed, run(upstream.recordable_spherical_harmonics), ("colours", "dirs", "coeffs")):
        _close(a, b, name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("sh_degree, recorded_sh", [(3, "triton"), (4, "pytorch")])
def test_the_recordable_render_takes_the_kernels_up_to_degree_three(monkeypatch, sh_degree, recorded_sh):
    """rasterize(isect_capacity=...) (the render a CUDA graph records) colours with the Triton kernels to degree 3,
    beyond with gsplat's PyTorch SH; the eager render with gsplat's kernel."""
    raster_module = importlib.import_module("ns_splat_plus.raster.rasterize")  # the package exports the function

    calls = []
    triton_sh, pytorch_sh = raster_module._triton_spherical_harmonics, upstream.recordable_spherical_harmonics
    monkeypatch.setattr(raster_module, "_triton_spherical_harmonics",
                        lambda *a, **k: calls.append("triton") or triton_sh(*a, **k))  # fmt: skip
    monkeypatch.setattr(upstream, "recordable_spherical_harmonics",
                        lambda *a, **k: calls.append("pytorch") or pytorch_sh(*a, **k))  # fmt: skip
    g = torch.Generator().manual_seed(3)
    n, k = 500, (sh_degree + 1) ** 2
    camtoworlds = torch.eye(4)[None].cuda()
    camtoworlds[0, 2, 3] = -4.0
    args = dict(
        means=(torch.randn(n, 3, generator=g)).cuda(), quats=torch.nn.functional.normalize(torch.randn(n, 4, generator=g)).cuda(),
        scales=(torch.rand(n, 3, generator=g) * 0.05 + 0.01).cuda(), opacities=torch.rand(n, generator=g).cuda(),
        colors=(torch.randn(n, k, 3, generator=g) * 0.3).cuda(), viewmats=torch.inverse(camtoworlds),
        Ks=torch.tensor([[[60.0, 0, 32], [0, 60.0, 24], [0, 0, 1]]]).cuda(), width=64, height=48, sh_degree=sh_degree,
    )  # fmt: skip
    raster_module.rasterize(**args, isect_capacity=200_000, camtoworlds=camtoworlds)
    assert calls == [recorded_sh]
    raster_module.rasterize(**args)
    assert calls == [recorded_sh]  # the eager render: gsplat's own SH kernel


if __name__ == "__main__":
    main(globals())
