"""The reference rasterizer: gsplat's info contract on CPU, and agreement with gsplat on the GPU."""

from __future__ import annotations

import math

import pytest
import torch

from ns_splat_plus import upstream
from ns_splat_plus.raster import rasterize
from ns_splat_plus.raster.tile_bounds import tile_radii_torch
from splatbench.scenes import SceneSpec, camera_poses


def _scene(n: int = 300, seed: int = 0, device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) - 0.5) * 5.0  # some fall outside the views
    quats = torch.randn(n, 4, generator=g)
    scales = torch.exp(torch.randn(n, 3, generator=g) * 0.3 - 2.2)
    opacities = torch.rand(n, generator=g) * 0.9 + 0.05
    shs = torch.randn(n, 16, 3, generator=g) * 0.3
    spec = SceneSpec(width=72, height=56, focal=60.0)
    w2c, K = camera_poses(spec)
    viewmats = torch.from_numpy(w2c[:2]).float()
    Ks = torch.from_numpy(K).float()[None].repeat(2, 1, 1)
    tensors = dict(means=means, quats=quats, scales=scales, opacities=opacities, colors=shs, viewmats=viewmats, Ks=Ks)
    return {k: v.to(device) for k, v in tensors.items()}, spec


def _render(t, spec, backend, sh_degree=3, absgrad=True, mode="RGB+ED", tight_tiles=True):
    leaves = {k: v.detach().clone().requires_grad_(k not in ("viewmats", "Ks")) for k, v in t.items()}
    render, alpha, info = rasterize(
        **leaves,
        width=spec.width,
        height=spec.height,
        sh_degree=sh_degree,
        render_mode=mode,
        absgrad=absgrad,
        backend=backend,
        tight_tiles=tight_tiles,
    )
    info["means2d"].retain_grad()
    weights = torch.linspace(0.5, 1.5, render.numel(), device=render.device).reshape(render.shape)
    ((render * weights).sum() + alpha.sum()).backward()
    return render.detach(), alpha.detach(), info, leaves


def test_reference_fills_the_info_gsplat_strategies_read():
    t, spec = _scene()
    render, alpha, info, leaves = _render(t, spec, "reference")
    assert render.shape == (2, spec.height, spec.width, 4)
    assert alpha.shape == (2, spec.height, spec.width, 1)
    for key in ("width", "height", "n_cameras", "radii", "gaussian_ids", "means2d"):
        assert key in info
    assert info["n_cameras"] == 2 and info["width"] == spec.width
    visible = info["radii"] > 0
    assert 0 < visible.sum() < visible.numel()
    grad = info["means2d"].grad
    absgrad = info["means2d"].absgrad
    assert grad.shape == absgrad.shape == (2, 300, 2)
    # gradients only where a Gaussian is visible, and |sum| <= sum |.| per Gaussian
    assert grad[~visible].abs().max() == 0
    assert (grad[visible].abs() <= absgrad[visible] + 1e-6).all()
    assert absgrad[visible].sum() > 0
    for name in ("means", "scales", "quats", "opacities", "colors"):
        g = leaves[name].grad
        assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0, name


def test_tight_tiles_render_the_same_image_and_gradients_on_the_reference(monkeypatch):
    """The reference lists each Gaussian in the tiles of its opacity-aware square (tile_bounds.py), as
    the gsplat path does: the pixels and gradients are those of gsplat's 3-sigma squares."""
    from ns_splat_plus.raster import reference

    listed = []  # the half-sides each camera's tile lists were built from, as the compositor received them
    composite = reference._composite_camera

    def spy(*args, **kwargs):
        listed.append(args[5].clone())  # tile_radii [N]
        return composite(*args, **kwargs)

    monkeypatch.setattr(reference, "_composite_camera", spy)
    t, spec = _scene()
    tight = _render(t, spec, "reference", tight_tiles=True)
    tight_listed, listed[:] = torch.stack(listed), []
    loose = _render(t, spec, "reference", tight_tiles=False)
    loose_listed = torch.stack(listed)
    radii = tight[2]["radii"]
    assert torch.equal(radii, loose[2]["radii"])  # what the strategies read is gsplat's
    # the tiles were listed from the opacity-aware squares, computed here from the projection's outputs...
    info = tight[2]
    expected = tile_radii_torch(radii, info["conics"].detach(), info["opacities"].detach())
    assert torch.equal(tight_listed, expected)
    visible = radii > 0
    shrunk = (tight_listed < radii)[visible].float().mean().item()
    assert shrunk > 0.3, shrunk  # ...which are smaller than gsplat's 3-sigma squares for many Gaussians
    assert torch.equal(loose_listed, radii)  # and without tight_tiles, from gsplat's squares
    assert torch.allclose(tight[0], loose[0], rtol=1e-6, atol=1e-6)
    assert torch.allclose(tight[1], loose[1], rtol=1e-6, atol=1e-6)
    for name in ("means", "scales", "quats", "opacities", "colors"):
        a, b = tight[3][name].grad, loose[3][name].grad
        assert b.norm() > 0 and ((a - b).norm() / b.norm()).item() < 1e-5, name


def test_culled_gaussians_get_zero_gradient_not_nan():
    """A Gaussian on camera 0's plane (depth 0; seen by camera 1) and one behind both cameras: gsplat's
    PyTorch projection gives them infinite Jacobians, and backward used to turn their zero gradient
    into NaN in means, quats and scales (training stopped on a synthetic CPU scene at step 31)."""
    g = torch.Generator().manual_seed(3)
    n = 40
    means = (torch.rand(n, 3, generator=g) - 0.5) * 0.6 + torch.tensor([0.0, 0.0, 3.0])
    means[0] = torch.tensor([0.1, 0.05, 0.0])  # camera 0's plane; depth 3 for camera 1
    means[1] = torch.tensor([0.1, 0.05, -5.0])  # behind both
    viewmats = torch.eye(4).repeat(2, 1, 1)
    viewmats[1, 2, 3] = 3.0  # camera 1 sits 3 units further back
    K = torch.tensor([[50.0, 0.0, 32.0], [0.0, 50.0, 24.0], [0.0, 0.0, 1.0]])
    t = dict(
        means=means, quats=torch.randn(n, 4, generator=g), scales=torch.full((n, 3), 0.05),
        opacities=torch.rand(n, generator=g) * 0.9 + 0.05, colors=torch.rand(n, 3, generator=g),
        viewmats=viewmats, Ks=K[None].repeat(2, 1, 1),
    )  # fmt: skip
    spec = SceneSpec(width=64, height=48, focal=50.0)
    render, _, info, leaves = _render(t, spec, "reference", sh_degree=None, absgrad=False, mode="RGB")
    assert info["radii"][0, 0] == 0 and info["radii"][1, 0] > 0 and (info["radii"][:, 1] == 0).all()
    for name in ("means", "quats", "scales", "opacities", "colors"):
        grad = leaves[name].grad
        assert torch.isfinite(grad).all(), name
        assert grad[1].abs().max() == 0, name  # culled everywhere: no gradient, as gsplat's kernels give
    assert leaves["means"].grad[0].abs().sum() > 0  # camera 1 still sees Gaussian 0
    # camera 0 sees neither: its image and the others' gradients are those of the scene without them
    rest = {k: (v[2:] if k not in ("viewmats", "Ks") else v[:1]) for k, v in t.items()}
    render_rest, _, _, leaves_rest = _render(rest, spec, "reference", sh_degree=None, absgrad=False, mode="RGB")
    assert torch.equal(render[0], render_rest[0])
    assert render[0].abs().sum() > 0
    # nothing in view of any camera (diverged Gaussians): means2d is still in the graph, so gsplat's
    # step_pre_backward can retain its gradient and the loop names the step instead of crashing
    away = {**{k: v.detach() for k, v in t.items()}, "means": t["means"].detach() - torch.tensor([0.0, 0.0, 50.0])}
    leaves_away = {k: v.clone().requires_grad_(k not in ("viewmats", "Ks")) for k, v in away.items()}
    _, _, info_away = rasterize(**leaves_away, width=spec.width, height=spec.height, backend="reference")
    assert (info_away["radii"] == 0).all() and info_away["means2d"].requires_grad
    info_away["means2d"].retain_grad()


def test_reference_matches_alpha_compositing_of_one_gaussian():
    # one opaque round Gaussian in front of the camera: the centre pixel has alpha = opacity
    spec = SceneSpec(width=32, height=32, focal=32.0)
    viewmat = torch.eye(4)[None]
    K = torch.tensor([[32.0, 0, 16.0], [0, 32.0, 16.0], [0, 0, 1]])[None]
    render, alpha, _ = rasterize(
        means=torch.tensor([[0.0, 0.0, 2.0]]),
        quats=torch.tensor([[1.0, 0, 0, 0]]),
        scales=torch.full((1, 3), 0.2),
        opacities=torch.tensor([0.7]),
        colors=torch.tensor([[0.2, 0.4, 0.6]]),
        viewmats=viewmat,
        Ks=K,
        width=spec.width,
        height=spec.height,
        backend="reference",
    )
    # pixel centre (15.5, 15.5) is 0.5 px from the mean at (16, 16); sigma^2 = (32*0.2/2)^2 + 0.3
    var = (32 * 0.2 / 2) ** 2 + 0.3
    expected = 0.7 * math.exp(-0.5 * (0.25 + 0.25) / var)
    assert alpha[0, 15, 15, 0].item() == pytest.approx(expected, rel=1e-4)
    assert render[0, 15, 15].tolist() == pytest.approx([0.2 * expected, 0.4 * expected, 0.6 * expected], rel=1e-4)
    assert alpha[0, 0, 0, 0].item() < 1e-3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
def test_reference_agrees_with_gsplat_on_gpu():
    """Images within 1e-3 (max abs), means2d grads and absgrads within 1e-3 relative (L2) of gsplat."""
    t, spec = _scene(device="cuda")
    ref = _render(t, spec, "reference")
    gs = _render(t, spec, "gsplat")
    img_err = (ref[0][..., :3] - gs[0][..., :3]).abs().max().item()
    alpha_err = (ref[1] - gs[1]).abs().max().item()
    assert torch.equal(ref[2]["radii"], gs[2]["radii"])
    g_ref, g_gs = ref[2]["means2d"].grad, gs[2]["means2d"].grad
    grad_rel = ((g_ref - g_gs).norm() / g_gs.norm()).item()
    abs_rel = ((ref[2]["means2d"].absgrad - gs[2]["means2d"].absgrad).norm() / gs[2]["means2d"].absgrad.norm()).item()
    print(
        f"max|img| {img_err:.2e} max|alpha| {alpha_err:.2e} means2d grad rel {grad_rel:.2e} absgrad rel {abs_rel:.2e}"
    )
    assert img_err < 1e-3 and alpha_err < 1e-3
    assert grad_rel < 1e-3 and abs_rel < 1e-3
    for name in ("means", "scales", "quats", "opacities", "colors"):
        a, b = ref[3][name].grad, gs[3][name].grad
        rel = ((a - b).norm() / b.norm()).item()
        print(f"{name} grad rel {rel:.2e}")
        assert rel < 5e-3, name


def test_strip_rendering_gives_the_same_image():
    """Evaluation renders large images in strips on tile boundaries: the pixels must not change."""
    import tempfile
    from pathlib import Path

    from inprocess import build_trainer, close_writers, small_scene, trainer_config

    with tempfile.TemporaryDirectory() as tmp:
        scene = small_scene(Path(tmp) / "scene")
        config = trainer_config(scene, Path(tmp) / "out", steps=1)
        config.warmup_steps = 0
        trainer = build_trainer(config)
        try:
            model = trainer.pipeline.model
            model.eval()
            camera = trainer.pipeline.datamanager.eval_dataset.cameras[0:1]
            batch = trainer.pipeline.datamanager.cached_eval[0]
            model.config.eval_max_pixels = 0
            whole = model.get_outputs_for_camera(camera)
            whole_metrics, _ = model.get_image_metrics_and_images(whole, batch)
            model.config.eval_max_pixels = 16 * 48  # one tile row per strip at width 48
            strips = model.get_outputs_for_camera(camera)
            strips_metrics, _ = model.get_image_metrics_and_images(strips, batch)  # the host-side metric path
        finally:
            close_writers()
    assert whole["rgb"].shape == strips["rgb"].shape == (36, 48, 3)
    assert torch.allclose(whole["rgb"], strips["rgb"], atol=1e-5)
    assert torch.allclose(whole["accumulation"], strips["accumulation"], atol=1e-5)
    assert torch.allclose(whole["depth"], strips["depth"], atol=1e-4, rtol=1e-4)
    assert strips_metrics["psnr"] == pytest.approx(whole_metrics["psnr"], abs=1e-3)
    assert strips_metrics["ssim"] == pytest.approx(whole_metrics["ssim"], abs=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
@pytest.mark.parametrize("backend", ["gsplat", "reference"])
def test_strips_render_the_same_pixels_on_gpu(backend):
    t, spec = _scene(device="cuda")
    args = dict(width=spec.width, height=spec.height, sh_degree=3, render_mode="RGB+ED", backend=backend)
    with torch.no_grad():
        whole, whole_alpha, _ = rasterize(**t, **args)
        strips, strips_alpha, _ = rasterize(**t, **args, rows=[(0, 16), (16, 32), (32, 48), (48, 56)])
    assert (whole - strips).abs().max().item() < 1e-5
    assert (whole_alpha - strips_alpha).abs().max().item() < 1e-6


def _gsplat_upstream(t, spec, sh_degree, mode, rasterize_mode):
    """gsplat 1.4.0's own ``rasterization``, as splatfacto calls it, with gradients."""
    from gsplat.rendering import rasterization

    leaves = {k: v.detach().clone().requires_grad_(k not in ("viewmats", "Ks")) for k, v in t.items()}
    render, alpha, info = rasterization(
        **leaves,
        width=spec.width,
        height=spec.height,
        sh_degree=sh_degree,
        render_mode=mode,
        absgrad=True,
        rasterize_mode=rasterize_mode,
        packed=False,
        sparse_grad=False,
    )
    return render, alpha, info, leaves


def _backward(render, alpha, info):
    info["means2d"].retain_grad()
    weights = torch.linspace(0.5, 1.5, render.numel(), device=render.device).reshape(render.shape)
    ((render * weights).sum() + alpha.sum()).backward()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
@pytest.mark.parametrize("cameras,sh_degree,mode,rasterize_mode,elongated", [
    (1, 3, "RGB", "classic", False), (2, 3, "RGB+ED", "antialiased", False), (1, None, "RGB+ED", "classic", False),
    (2, 1, "RGB", "classic", False), (2, 3, "RGB", "antialiased", True),
])  # fmt: skip
def test_gsplat_stages_match_gsplat_rasterization(cameras, sh_degree, mode, rasterize_mode, elongated):
    """rasterize()'s composition of gsplat's stages (with the camera centres handed in, as the model
    does, and without; with gsplat's tiles and with the opacity-aware ones) against
    gsplat.rasterization: the same images and radii bitwise, and with gsplat's tiles the same tile
    buffers; the gradients up to the order of gsplat's atomic adds."""
    t, spec = _scene(device="cuda")
    t["viewmats"], t["Ks"] = t["viewmats"][:cameras], t["Ks"][:cameras]
    if elongated:  # axis ratios up to ~100 and opacities down to 0.005
        t["scales"] = torch.exp((torch.log(t["scales"]) + 2.2) * 5.0 - 2.2)
        t["opacities"] = t["opacities"] ** 2
    if sh_degree is None:
        t["colors"] = torch.sigmoid(t["colors"][:, 0, :])  # [N, 3] colours, as splatfacto's sh_degree 0
    upstream_run = _gsplat_upstream(t, spec, sh_degree, mode, rasterize_mode)
    _backward(*upstream_run[:3])
    for camtoworlds, tight_tiles in (
        (None, False),
        (torch.inverse(t["viewmats"]), False),
        (None, True),
        (torch.inverse(t["viewmats"]), True),
    ):
        leaves = {k: v.detach().clone().requires_grad_(k not in ("viewmats", "Ks")) for k, v in t.items()}
        render, alpha, info = rasterize(
            **leaves,
            width=spec.width,
            height=spec.height,
            sh_degree=sh_degree,
            render_mode=mode,
            absgrad=True,
            rasterize_mode=rasterize_mode,
            backend="gsplat",
            camtoworlds=camtoworlds,
            tight_tiles=tight_tiles,
        )
        assert torch.equal(render, upstream_run[0]) and torch.equal(alpha, upstream_run[1])
        assert set(info) == set(upstream_run[2]) | {"tile_radii"}
        assert torch.equal(info["radii"], upstream_run[2]["radii"])
        if tight_tiles:  # fewer entries in the tile lists, none added
            entries, upstream_entries = info["isect_ids"].numel(), upstream_run[2]["isect_ids"].numel()
            print(f"tile entries {entries} of gsplat's {upstream_entries}")
            assert entries < (0.9 if elongated else 0.99) * upstream_entries  # reference on CPU: 0.86, 0.94
            assert (info["tile_radii"] <= info["radii"]).all()
            oracle = tile_radii_torch(info["radii"], info["conics"], info["opacities"])  # float64 log/sqrt of torch
            assert (info["tile_radii"] - oracle).abs().max() <= 1 and (info["tile_radii"] != oracle).sum() <= 2
        else:
            for key in ("isect_ids", "flatten_ids", "isect_offsets"):
                assert torch.equal(info[key], upstream_run[2][key]), key
        visible = info["radii"] > 0  # gsplat leaves the other entries of its projection unwritten
        for key in ("means2d", "depths", "conics"):
            assert torch.equal(info[key][visible], upstream_run[2][key][visible]), key
        for key in ("width", "height", "n_cameras", "tile_width", "tile_height", "tile_size"):
            assert info[key] == upstream_run[2][key], key
        _backward(render, alpha, info)
        pairs = [
            (info["means2d"].grad, upstream_run[2]["means2d"].grad),
            (info["means2d"].absgrad, upstream_run[2]["means2d"].absgrad),
        ]
        pairs += [
            (leaves[k].grad, upstream_run[3][k].grad) for k in ("means", "quats", "scales", "opacities", "colors")
        ]
        # the order of gsplat's atomic adds: long Gaussians sum over many more pixels per tile
        tolerance = 1e-4 if elongated else 1e-5  # measured: up to 2.6e-5 (quats) with elongated Gaussians
        for ours, theirs in pairs:
            assert theirs.norm() > 0
            assert ((ours - theirs).norm() / theirs.norm()).item() < tolerance


def test_the_recordable_spherical_harmonics_are_gsplat_s_pytorch_ones_with_the_mask_s_zeros():
    """upstream.recordable_spherical_harmonics (the render a CUDA graph records): gsplat's PyTorch SH, and zero
    colour and gradient where the mask is False, as gsplat's kernel."""
    g = torch.Generator().manual_seed(3)
    dirs = torch.randn(2, 50, 3, generator=g)
    coeffs = (torch.randn(2, 50, 16, 3, generator=g) * 0.3).requires_grad_()
    masks = torch.rand(2, 50, generator=g) > 0.3
    colors = upstream.recordable_spherical_harmonics(2, dirs, coeffs, masks=masks)
    expected = upstream.torch_reference_ops()._spherical_harmonics(2, dirs, coeffs)
    assert torch.equal(colors[masks], expected[masks]) and bool((colors[masks].abs() > 0).any())
    assert bool((colors[~masks] == 0).all())
    colors.sum().backward()
    assert bool((coeffs.grad[~masks] == 0).all()) and bool((coeffs.grad[masks][:, :9].abs() > 0).any())
    assert bool((coeffs.grad[:, :, 9:] == 0).all())  # degree 2: the third band's coefficients play no part


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
def test_the_recordable_render_replays_from_a_cuda_graph_as_it_runs_eagerly():
    """rasterize(..., isect_capacity=) recorded once, replayed after new Gaussians, coefficients and cameras:
    the eager render and gradients of the new inputs (a kernel the recording missed, such as gsplat 1.4.0's SH
    kernels on the legacy stream, would leave the recording's numbers)."""
    t, spec = _scene(n=2000, device="cuda")
    static = {k: v.detach().clone().requires_grad_(k not in ("viewmats", "Ks")) for k, v in t.items()}
    camtoworlds = torch.inverse(static["viewmats"])  # as the trainer: computed outside the recording

    def render_and_backward():
        render, alpha, info = rasterize(**static, width=spec.width, height=spec.height, sh_degree=3,
                                        backend="gsplat", isect_capacity=200_000, camtoworlds=camtoworlds)  # fmt: skip
        weights = torch.linspace(0.5, 1.5, render.numel(), device="cuda").reshape(render.shape)
        ((render * weights).sum() + alpha.sum()).backward()
        return render, alpha, info

    side = torch.cuda.Stream()  # the recipe: run once outside the recording, on a side stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        render_and_backward()
    torch.cuda.current_stream().wait_stream(side)
    for leaf in static.values():
        leaf.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        recorded = render_and_backward()
    moved, _ = _scene(n=2000, seed=1, device="cuda")  # other Gaussians, colours and cameras
    with torch.no_grad():
        for name, leaf in static.items():
            leaf.copy_(moved[name])
        camtoworlds.copy_(torch.inverse(moved["viewmats"]))
    graph.replay()
    torch.cuda.synchronize()
    eager = _render(moved, spec, "gsplat", mode="RGB", absgrad=False)
    assert not bool(recorded[2]["isect_overflow"])
    torch.testing.assert_close(recorded[0], eager[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(recorded[1], eager[1], rtol=1e-5, atol=1e-6)
    for name in ("means", "quats", "scales", "opacities", "colors"):  # SH: gsplat's kernel against PyTorch's sums
        replayed, expected = static[name].grad, eager[3][name].grad  # and atomics: one of 8,000 was 2.2e-3 off
        assert expected.norm() > 0
        assert float((replayed - expected).norm() / expected.norm()) < 1e-4, name


def test_a_recordable_render_with_spherical_harmonics_asks_for_the_camera_centres():
    t, spec = _scene()
    with pytest.raises(ValueError, match="needs camtoworlds"):
        rasterize(**t, width=spec.width, height=spec.height, sh_degree=3, isect_capacity=1000)
