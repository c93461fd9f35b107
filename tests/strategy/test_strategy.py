"""Instrumented densification (ns_splat_plus.strategy): records, sinks, callbacks, failure detection, MCMC on CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import strategy
from ns_splat_plus.errors import TrainingHealthError
from ns_splat_plus.strategy import mcmc_torch
from ns_splat_plus.strategy.stats import write_step_stats
from ns_splat_plus.training.optimizers import CheckedOptimizers


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("densify_scene"))


def _config(scene, out_dir, steps, method="splat-plus", **model_options):
    config = trainer_config(scene, out_dir, steps=steps, method_name=method)
    config.warmup_steps = 0
    for key, value in model_options.items():
        setattr(config.pipeline.model, key, value)
    return config


def _records(trainer):
    path = trainer.base_dir / strategy.JSONL_NAME
    return [json.loads(line) for line in path.read_text().splitlines()]


CONFIG_CALLBACK_RECORDS = []


def config_callback(record):
    """Registered through --pipeline.model.densify-callbacks test_strategy:config_callback."""
    CONFIG_CALLBACK_RECORDS.append(record)


def test_refine_events_match_gaussian_counts_and_reach_callbacks(scene, tmp_path):
    received = []
    strategy.register_callback(received.append, events=["refine"])
    CONFIG_CALLBACK_RECORDS.clear()
    config = _config(
        scene, tmp_path, steps=45, grad_summary_every=15, densify_callbacks=["test_strategy:config_callback"]
    )
    try:
        trainer = build_trainer(config)
        start_count = trainer.pipeline.model.num_points
        trainer.train()
    finally:
        strategy.unregister_callback(received.append)
        close_writers()

    records = _records(trainer)
    assert all("step" in r and "event" in r for r in records)
    assert records[0]["event"] == "start" and records[0]["num_gaussians"] == start_count
    refines = [r for r in records if r["event"] == "refine"]
    assert [r["step"] for r in refines] == [30, 40]  # refine every 10 after step 10, paused after the step-0 reset
    count = start_count
    for r in refines:
        assert r["num_gaussians_before"] == count
        assert r["num_gaussians"] == r["num_gaussians_before"] + r["duplicated"] + r["split"] - r["pruned"]
        g = r["grad2d"]
        assert 0 < g["num_visible"] <= r["num_gaussians_before"]
        assert g["median"] <= g["p90"] <= g["p99"] <= g["max"] and g["mean"] > 0
        assert g["threshold"] == config.pipeline.model.densify_grad_thresh
        assert g["num_over_threshold"] <= g["num_visible"]
        # every Gaussian over the threshold was duplicated or split (split also takes large-on-screen ones)
        assert r["duplicated"] + r["split"] >= g["num_over_threshold"]
        count = r["num_gaussians"]
    assert count == trainer.pipeline.model.num_points
    assert any(r["duplicated"] + r["split"] > 0 for r in refines)
    summaries = [r for r in records if r["event"] == "gradient_summary"]
    assert [s["step"] for s in summaries] == [14, 29, 44]
    assert all(s["num_steps"] == 15 and s["norm_max"] > 0 and s["zero_steps"] == 0 for s in summaries)
    # the code-registered callback saw exactly the refine records; the config one saw every record
    assert received == refines
    assert CONFIG_CALLBACK_RECORDS == records
    # docs/training-health.md's table names every field these records carry (a trial found six it left out)
    table = Path(__file__).parents[2].joinpath("docs", "training-health.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in table.splitlines() if line.startswith("| `")}
    for record in records:
        row = rows[record["event"]]
        fields = set(record) | set(record.get("grad2d", {}))
        missing = sorted(k for k in fields - {"step", "event", "grad2d"} if f"`{k}`" not in row)
        assert not missing, (record["event"], missing)


def _detached_loss(model, mode):
    def get_loss_dict(outputs, batch, metrics_dict=None):
        gt = model.get_gt_img(batch["image"])[..., :3]
        if mode == "zero":  # the image reaches backward, multiplied by 0: means2d gradients exactly zero
            return {"main_loss": (outputs["rgb"] * 0.0).sum() + (gt * 0).sum()}
        # the image is detached; only a parameter term reaches backward: means2d gets no gradient
        return {"main_loss": (outputs["rgb"].detach() - gt).abs().mean() + 0.0 * model.gauss_params["means"].sum()}

    return get_loss_dict


@pytest.mark.parametrize("mode", ["zero", "missing"])
def test_zero_or_missing_gradients_stop_training_within_patience(scene, tmp_path, mode):
    patience = 6
    config = _config(scene, tmp_path, steps=40, zero_grad_patience=patience)
    try:
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        model.get_loss_dict = _detached_loss(model, mode)
        with pytest.raises(TrainingHealthError) as raised:
            trainer.train()
    finally:
        close_writers()
    message = str(raised.value)
    assert f"for {patience} consecutive steps" in message
    assert "detached" in message
    assert ("no gradient at all" in message) == (mode == "missing")
    assert trainer.step == patience - 1  # stopped on the K-th such step, not later
    errors = [r for r in _records(trainer) if r["event"] == "error"]
    assert len(errors) == 1 and errors[0]["kind"] == "zero_gradient"


def test_warmup_catches_detached_loss_before_step_0(scene, tmp_path):
    config = _config(scene, tmp_path, steps=40)
    config.warmup_steps = 2
    try:
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        model.get_loss_dict = _detached_loss(model, "zero")
        with pytest.raises(TrainingHealthError, match="Warmup"):
            trainer.train()
    finally:
        close_writers()


@pytest.mark.parametrize("where", ["parameter", "loss"])
def test_non_finite_values_are_caught_naming_step_and_parameter(scene, tmp_path, where):
    config = _config(scene, tmp_path, steps=30)
    try:
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        if where == "parameter":
            with torch.no_grad():
                model.gauss_params["opacities"][3] = float("nan")
        else:
            original = model.get_loss_dict

            def nan_loss(outputs, batch, metrics_dict=None):
                losses = original(outputs, batch, metrics_dict)
                if model.step == 7:
                    losses["main_loss"] = losses["main_loss"] * float("nan")
                return losses

            model.get_loss_dict = nan_loss
        with pytest.raises(TrainingHealthError) as raised:
            trainer.train()
    finally:
        close_writers()
    message = str(raised.value)
    if where == "parameter":
        assert "step 0" in message and "values of 'opacities'" in message
    else:
        assert "step 7" in message and "gradient of 'means'" in message and "loss itself" in message
    assert trainer.step == (0 if where == "parameter" else 7)


def test_no_densification_warning_shows_percentiles(scene, tmp_path):
    # stop_split_at 32: the last steps take the statistics-only path (no gsplat accumulation)
    config = _config(
        scene,
        tmp_path,
        steps=35,
        densify_grad_thresh=1e6,
        warn_no_densify_after=1,
        stop_split_at=32,
        grad_summary_every=35,
    )
    try:
        trainer = build_trainer(config)
        trainer.train()
    finally:
        close_writers()
    records = _records(trainer)
    warnings = [r for r in records if r["event"] == "warning"]
    assert len(warnings) == 1 and warnings[0]["step"] == 30 and warnings[0]["kind"] == "no_densification"
    assert "p99" in warnings[0]["message"] and "threshold 1.00e+06" in warnings[0]["message"]
    (summary,) = [r for r in records if r["event"] == "gradient_summary"]
    assert summary["num_steps"] == 35 and summary["zero_steps"] == 0 and summary["missing_steps"] == 0


def test_instrumentation_off_writes_nothing_and_still_densifies(scene, tmp_path):
    # a refine at step 30 (refine every 10 from step 10, after the opacity reset's pause of an epoch + 10
    # steps); a threshold every visible Gaussian crosses, so a refine that runs must change the count
    config = _config(scene, tmp_path, steps=35, instrumentation=False, densify_grad_thresh=1e-12)
    try:
        trainer = build_trainer(config)
        start = trainer.pipeline.model.num_points
        assert not trainer.optimizers.check_finite
        trainer.train()
    finally:
        close_writers()
    assert not (trainer.base_dir / strategy.JSONL_NAME).exists()
    assert trainer.step == 34 and trainer.pipeline.model.num_points > start


def test_mcmc_trains_on_cpu_with_records(scene, tmp_path):
    config = _config(scene, tmp_path, steps=35, method="splat-plus-mcmc", grad_summary_every=10)
    after_refine = []
    dead_before_refine = []  # counted by the test from the raw parameters, before each refine
    min_opacity = config.pipeline.model.cull_alpha_thresh  # the option MCMC relocates at (nerfstudio's)
    try:
        trainer = build_trainer(config)
        start = trainer.pipeline.model.num_points
        mcmc = trainer.pipeline.model.strategy
        assert isinstance(mcmc, strategy.InstrumentedMCMCStrategy)
        with torch.no_grad():  # 10 dead Gaussians (opacity ~5e-5): the first refine must relocate them
            trainer.pipeline.model.gauss_params["opacities"][:10] = -10.0
        refine = mcmc._refine

        def count_dead_then_refine(params, *args, **kwargs):
            dead_before_refine.append(int((torch.sigmoid(params["opacities"].detach()) <= min_opacity).sum()))
            return refine(params, *args, **kwargs)

        mcmc._refine = count_dead_then_refine
        mcmc.log.add_callback(
            lambda r: after_refine.append(
                int((torch.sigmoid(trainer.pipeline.model.opacities) < 0.5 * min_opacity).sum())
            ),
            events=["refine"],
        )
        trainer.train()
    finally:
        close_writers()
    records = _records(trainer)
    refines = [r for r in records if r["event"] == "refine"]
    assert [r["step"] for r in refines] == [20, 30]
    summaries = [r for r in records if r["event"] == "gradient_summary"]
    assert [s["step"] for s in summaries] == [9, 19, 29]
    assert all(s["norm_max"] > 0 and s["zero_steps"] == 0 and s["visible_mean"] > 0 for s in summaries)
    count = start
    for r in refines:
        assert r["strategy"] == "mcmc" and r["num_gaussians_before"] == count
        assert r["num_gaussians"] == count + r["added"] and r["added"] == int(1.05 * count) - count
        assert 0 < r["grad2d"]["num_visible"] <= count and r["grad2d"]["max"] > 0
        count = r["num_gaussians"]
    assert trainer.pipeline.model.num_points == count
    assert all(torch.isfinite(p).all() for p in trainer.pipeline.model.gauss_params.values())
    # every Gaussian at or below --pipeline.model.cull-alpha-thresh just before a refine was relocated, and only
    # those: counted by the test, not by the strategy's own statistic (which shares the relocation's predicate)
    assert [r["relocated"] for r in refines] == dead_before_refine
    assert [r["opacity"]["num_below_threshold"] for r in refines] == dead_before_refine
    assert dead_before_refine[0] >= 10  # the dead ones set above
    assert all(r["opacity"]["threshold"] == min_opacity for r in refines)
    assert after_refine == [0, 0]  # and nothing at or below min_opacity is left right after a refine


def test_mcmc_recipe_is_upstreams_with_its_regularisers(scene, tmp_path):
    """nerfstudio main's splatfacto-mcmc: relocation at opacity 0.005, refine until 25000, max_gs_num /
    noise_lr names, opacity and scale regularisers of weight 0.01 (in the loss only with MCMC)."""
    from ns_splat_plus.method import splat_plus_mcmc

    model_config = splat_plus_mcmc.config.pipeline.model
    assert (model_config.cull_alpha_thresh, model_config.stop_split_at) == (0.005, 25000)
    assert (model_config.max_gs_num, model_config.noise_lr) == (1_000_000, 5e5)
    assert (model_config.mcmc_opacity_reg, model_config.mcmc_scale_reg) == (0.01, 0.01)
    config = _config(scene, tmp_path, steps=1, method="splat-plus-mcmc")
    try:
        trainer = build_trainer(config)
    finally:
        close_writers()
    model = trainer.pipeline.model
    strat = model.strategy
    assert (strat.cap_max, strat.noise_lr, strat.min_opacity, strat.refine_stop_iter) == (1_000_000, 5e5, 0.005, 25000)
    camera, batch = trainer.pipeline.datamanager.next_train(0)
    model.eval()  # a forward pass outside training: no strategy hooks
    with torch.no_grad():
        outputs = model(camera)
        losses = model.get_loss_dict(outputs, batch)
    opacity_mean = float(torch.sigmoid(model.gauss_params["opacities"]).mean())
    scale_mean = float(torch.exp(model.gauss_params["scales"]).mean())
    assert float(losses["mcmc_opacity_reg"]) == pytest.approx(0.01 * opacity_mean, rel=1e-5)
    assert float(losses["mcmc_scale_reg"]) == pytest.approx(0.01 * scale_mean, rel=1e-5)
    model.config.strategy = "default"  # the regularisers belong to the MCMC recipe only
    with torch.no_grad():
        assert "mcmc_opacity_reg" not in model.get_loss_dict(outputs, batch)


def test_relocation_formula_matches_the_paper_loop():
    from gsplat.strategy.mcmc import MCMCStrategy

    binoms = MCMCStrategy().initialize_state()["binoms"]
    g = torch.Generator().manual_seed(0)
    opacities = torch.rand(64, generator=g) * 0.98 + 0.01
    scales = torch.rand(64, 3, generator=g) + 0.1
    ratios = torch.randint(1, 60, (64,), generator=g)  # above n_max gets clamped as in gsplat
    new_opacities, new_scales = mcmc_torch.compute_relocation_torch(opacities, scales, ratios, binoms)
    for i in range(64):
        n = min(int(ratios[i]), 51)
        o = 1.0 - (1.0 - float(opacities[i])) ** (1.0 / n)
        denom = sum(
            math.comb(a - 1, k) * (-1) ** k / math.sqrt(k + 1) * o ** (k + 1) for a in range(1, n + 1) for k in range(a)
        )
        assert new_opacities[i].item() == pytest.approx(o, rel=1e-4)  # float32, as the CUDA kernel
        assert new_scales[i].tolist() == pytest.approx((float(opacities[i]) / denom * scales[i]).tolist(), rel=1e-3)


def test_strategy_draws_depend_only_on_seed_and_step():
    before = torch.get_rng_state()
    with strategy.seeded_rng(7, 1200, torch.device("cpu"), numpy_too=True):
        a = torch.randn(5)
    torch.manual_seed(123)  # another rank's global generator is elsewhere
    with strategy.seeded_rng(7, 1200, torch.device("cpu"), numpy_too=True):
        b = torch.randn(5)
    with strategy.seeded_rng(7, 1300, torch.device("cpu")):
        c = torch.randn(5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.set_rng_state(before)
    with strategy.seeded_rng(7, 1200, torch.device("cpu")):
        torch.randn(100)
    assert torch.equal(torch.get_rng_state(), before)  # the global stream is untouched


def test_callback_paths_are_checked_at_build_time():
    with pytest.raises(ValueError, match="pkg.module:function"):
        strategy.load_callback("no_colon_here")
    with pytest.raises(ValueError, match="cannot be loaded"):
        strategy.load_callback("ns_splat_plus.strategy:does_not_exist")
    assert strategy.load_callback("test_strategy:config_callback") is config_callback


def _one_param_optimizers(device, step):
    from nerfstudio.engine.optimizers import AdamOptimizerConfig

    param = torch.nn.Parameter(torch.zeros(10, device=device))
    config = {"x": {"optimizer": AdamOptimizerConfig(lr=1e-3, eps=1e-15), "scheduler": None}}
    return param, CheckedOptimizers(config, {"x": [param]}, step_source=lambda: step["now"])


def test_checked_optimizers_refuse_a_nan_gradient_before_the_step_on_cpu():
    step = {"now": 0}
    param, optimizers = _one_param_optimizers("cpu", step)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    param.grad = torch.ones_like(param)
    optimizers.optimizer_scaler_step_some(scaler, ["x"])
    step["now"] = 1
    param.grad = torch.ones_like(param)
    param.grad[4] = float("inf")
    before = param.detach().clone()
    with pytest.raises(TrainingHealthError, match=r"step 1, before its optimizer step.*gradient of 'x'"):
        optimizers.optimizer_scaler_step_some(scaler, ["x"])
    assert torch.equal(param.detach(), before)  # the bad step was never applied


cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@cuda_only
def test_checked_optimizers_read_cuda_checks_in_batches_naming_the_step():
    step = {"now": 0}
    param, optimizers = _one_param_optimizers("cuda", step)
    optimizers.check_every = 4
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    for now in range(3):  # steps 0, 1, 2: step 1's gradient is NaN, recorded on the device only
        step["now"] = now
        param.grad = torch.full_like(param, float("nan")) if now == 1 else torch.ones_like(param)
        optimizers.optimizer_scaler_step_some(scaler, ["x"])
    step["now"] = 3
    param.grad = torch.ones_like(param)
    with pytest.raises(TrainingHealthError, match=r"step 1 \(read at step 3.*gradient of 'x'"):
        optimizers.optimizer_scaler_step_some(scaler, ["x"])  # the 4th row: the host reads all four


@pytest.mark.gpu
@cuda_only
def test_checked_optimizers_resolve_pending_reads_the_last_steps():
    step = {"now": 0}
    param, optimizers = _one_param_optimizers("cuda", step)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    param.grad = torch.full_like(param, float("inf"))
    optimizers.optimizer_scaler_step_some(scaler, ["x"])  # fewer rows than check_every: nothing read yet
    with pytest.raises(TrainingHealthError, match=r"step 0 .*gradient of 'x'"):
        optimizers.resolve_pending()  # what the trainer does before a checkpoint and after the last step


@pytest.mark.gpu
@cuda_only
def test_cpu_mcmc_paths_match_gsplat_cuda_kernels():
    from gsplat import quat_scale_to_covar_preci
    from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci
    from gsplat.relocation import compute_relocation
    from gsplat.strategy.mcmc import MCMCStrategy

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(1)
    n = 4096
    binoms = MCMCStrategy().initialize_state()["binoms"].to(device)
    opacities = (torch.rand(n, generator=g) * 0.98 + 0.01).to(device)
    scales = (torch.rand(n, 3, generator=g) + 0.05).to(device)
    ratios = torch.randint(1, 60, (n,), generator=g).to(device)
    cuda_opacities, cuda_scales = compute_relocation(opacities, scales, ratios.clone(), binoms)
    torch_opacities, torch_scales = mcmc_torch.compute_relocation_torch(opacities, scales, ratios, binoms)
    torch.testing.assert_close(torch_opacities, cuda_opacities, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(torch_scales, cuda_scales, rtol=2e-3, atol=1e-6)
    quats = torch.randn(n, 4, generator=g).to(device)
    covars_cuda, _ = quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False, triu=False)
    covars_torch, _ = _quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False, triu=False)
    torch.testing.assert_close(covars_torch, covars_cuda, rtol=1e-4, atol=1e-6)


def test_mcmc_relocation_and_addition_on_cpu_keep_optimizer_state_aligned():
    g = torch.Generator().manual_seed(3)
    n = 50
    params = torch.nn.ParameterDict(
        {
            "means": torch.nn.Parameter(torch.randn(n, 3, generator=g)),
            "scales": torch.nn.Parameter(torch.randn(n, 3, generator=g) * 0.1 - 3),
            "quats": torch.nn.Parameter(torch.randn(n, 4, generator=g)),
            "opacities": torch.nn.Parameter(torch.randn(n, generator=g)),
        }
    )
    with torch.no_grad():
        params["opacities"][:7] = -20.0  # dead: sigmoid below min_opacity
    optimizers = {k: torch.optim.Adam([p], lr=1e-3) for k, p in params.items()}
    for p in params.values():
        p.grad = torch.ones_like(p)
    for opt in optimizers.values():
        opt.step()
    mcmc = strategy.InstrumentedMCMCStrategy(cap_max=60, min_opacity=0.005)
    binoms = mcmc.initialize_state(scene_scale=1.0)["binoms"]
    with strategy.seeded_rng(0, 600, torch.device("cpu"), numpy_too=True):
        relocated = mcmc._relocate(params, optimizers, binoms)
        added = mcmc._add(params, optimizers, binoms)
    assert relocated == 7 and added == int(1.05 * n) - n
    assert len(params["means"]) == n + added
    assert (torch.sigmoid(params["opacities"][:7]) > 0.005).all()  # the dead ones took live Gaussians' place
    for name, p in params.items():
        assert torch.isfinite(p).all(), name
        state = optimizers[name].state[p]
        assert state["exp_avg"].shape == p.shape and optimizers[name].param_groups[0]["params"][0] is p
    # position noise moves (nearly) transparent Gaussians only, as gsplat's
    with torch.no_grad():
        params["opacities"][:3] = -10.0
        params["opacities"][3:] = 5.0
    means_before = params["means"].detach().clone()
    mcmc_torch.inject_noise_torch(params, scaler=10.0)
    moved = (params["means"] != means_before).any(dim=-1)
    assert moved[:3].all() and not moved[3:].any() and torch.isfinite(params["means"]).all()


def _fake_info(device, n, absgrad, packed, seed=0):
    """gsplat-shaped ``info`` after backward: means2d with .grad (and .absgrad), radii, one camera."""
    g = torch.Generator().manual_seed(seed)
    radii = torch.randint(0, 9, (1, n), generator=g, dtype=torch.int32)
    radii[0, : n // 4] = 0  # a quarter not visible
    grad = torch.randn(1, n, 2, generator=g) * (radii > 0)[..., None]
    means2d = torch.zeros(1, n, 2, device=device, requires_grad=True)
    means2d.grad = grad.to(device)
    means2d.absgrad = grad.abs().to(device)
    info = {
        "width": 96,
        "height": 64,
        "n_cameras": 1,
        "means2d": means2d,
        "radii": radii.to(device),
        "gaussian_ids": None,
    }
    if packed:
        ids = torch.nonzero(radii[0] > 0).squeeze(1)
        packed_grad = grad[0, ids]
        means2d = torch.zeros_like(packed_grad, device=device, requires_grad=True)
        means2d.grad, means2d.absgrad = packed_grad.to(device), packed_grad.abs().to(device)
        info.update(means2d=means2d, radii=radii[0, ids].to(device), gaussian_ids=ids.to(device))
    return info


def _assert_update_state_matches_gsplat(device):
    from gsplat.strategy import DefaultStrategy

    n = 1000
    params = {"means": torch.zeros(n, 3, device=device)}
    for absgrad in (False, True):
        for packed in (False, True):
            ours = strategy.InstrumentedDefaultStrategy(absgrad=absgrad, refine_scale2d_stop_iter=100, verbose=False)
            theirs = DefaultStrategy(absgrad=absgrad, refine_scale2d_stop_iter=100, verbose=False)
            our_state, their_state = ours.initialize_state(), theirs.initialize_state()
            for step in range(3):  # accumulates over several steps, as between refines
                info = _fake_info(device, n, absgrad, packed, seed=step)
                ours._update_state(params, our_state, info, packed=packed)
                theirs._update_state(params, their_state, info, packed=packed)
            for key in ("grad2d", "count", "radii"):
                assert torch.equal(our_state[key], their_state[key]), (key, absgrad, packed)
            assert our_state["count"].max() == 3 and our_state["grad2d"].abs().sum() > 0  # the fake scene was seen
            # and this step's statistics: (sum, max, count) of the visible norms
            row = torch.full((3,), -1.0, device=device)
            write_step_stats(row, ours._step_grads)
            sum_, max_, count = row.tolist()
            norms = info["means2d"].absgrad if absgrad else info["means2d"].grad
            norms = norms * torch.tensor([info["width"] / 2.0, info["height"] / 2.0], device=device)
            norms = norms.norm(dim=-1)[info["radii"] > 0]
            assert count == norms.numel()
            assert math.isclose(sum_, norms.sum().item(), rel_tol=1e-5) and max_ == norms.max().item()


def test_update_state_is_gsplats_accumulation_without_a_sync():
    """The dense (boolean-index-free) accumulation gives bitwise gsplat's grad2d / count / radii."""
    _assert_update_state_matches_gsplat(torch.device("cpu"))


@pytest.mark.gpu
@cuda_only
def test_update_state_is_gsplats_accumulation_on_cuda():
    _assert_update_state_matches_gsplat(torch.device("cuda"))


@pytest.mark.parametrize("method", ["splat-plus", "splat-plus-mcmc"])
def test_statistics_are_sampled_once_refinement_has_stopped(scene, tmp_path, method):
    """Until --pipeline.model.stop-split-at every step's gradient statistics are taken; after it, every
    --pipeline.model.grad-stats-every-after-refine steps (here 10: steps 20, 30, 40, 50), 1 restores every step."""
    sampled = {}
    for every in (10, 1):
        config = _config(
            scene, tmp_path / f"every{every}", steps=60, method=method, stop_split_at=20, grad_summary_every=20,
            grad_stats_every_after_refine=every,
        )  # fmt: skip
        try:
            trainer = build_trainer(config)
            trainer.train()
        finally:
            close_writers()
        summaries = [r for r in _records(trainer) if r["event"] == "gradient_summary"]
        assert [(s["step"], s["first_step"], s["num_steps"]) for s in summaries] == [
            (19, 0, 20),
            (39, 20, 20),
            (59, 40, 20),
        ]
        assert all(s["norm_max"] > 0 and s["zero_steps"] == 0 for s in summaries)
        sampled[every] = [s["sampled_steps"] for s in summaries]
    assert sampled == {10: [20, 2, 2], 1: [20, 20, 20]}


def test_zero_gradients_after_refinement_still_stop_training(scene, tmp_path):
    """Sampled every 10 steps after refinement stops at step 5, an all-zero run is still measured in steps:
    patience 30 trips at the first sample 30 or more steps after the run began (step 35, since step 0)."""
    config = _config(
        scene, tmp_path, steps=60, zero_grad_patience=30, stop_split_at=5, grad_stats_every_after_refine=10
    )
    try:
        trainer = build_trainer(config)
        model = trainer.pipeline.model
        model.get_loss_dict = _detached_loss(model, "zero")
        with pytest.raises(TrainingHealthError) as raised:
            trainer.train()
    finally:
        close_writers()
    message = str(raised.value)
    assert "for 36 consecutive steps (since step 0" in message and "all exactly zero" in message
    assert trainer.step == 35
