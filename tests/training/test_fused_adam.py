"""One multi-tensor Adam update for all parameter groups (training/optimizers.py adam_step_all):
bitwise the numbers of one torch.optim.Adam per group, through densification and schedulers."""

from __future__ import annotations

import pytest
import torch
from gsplat.strategy import ops as gsplat_ops
from inprocess import assert_bitwise_equal
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig

from ns_splat_plus.training.optimizers import CheckedOptimizers, adam_fusable, adam_step_all

SHAPES = {
    "means": (3,),
    "scales": (3,),
    "quats": (4,),
    "features_dc": (3,),
    "features_rest": (15, 3),
    "opacities": (1,),
}
LRS = {
    "means": 1.6e-4,
    "scales": 0.005,
    "quats": 0.001,
    "features_dc": 0.0025,
    "features_rest": 0.0025 / 20,
    "opacities": 0.05,
}
STEPS = 30


def _params(n: int = 50, device: str = "cpu"):
    g = torch.Generator().manual_seed(0)
    return {k: torch.nn.Parameter(torch.randn(n, *shape, generator=g).to(device)) for k, shape in SHAPES.items()}


def _grads(params, step: int):
    g = torch.Generator().manual_seed(1000 + step)
    return {k: (torch.randn(p.shape, generator=g) * 10 ** (step % 5 - 2)).to(p.device) for k, p in params.items()}


def _run(fused: bool, foreach: bool, device: str = "cpu"):
    """STEPS steps of six Adams (one per group, splatfacto's learning rates, eps 1e-15), a duplicate
    (gsplat's optimizer-state surgery) at step 10 and a removal at step 20, exponential decay on means."""
    params = _params(device=device)
    optimizers = {k: torch.optim.Adam([p], lr=LRS[k], eps=1e-15, foreach=foreach) for k, p in params.items()}
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizers["means"], gamma=0.9)
    state = {"grad2d": torch.zeros(50, device=device), "count": torch.zeros(50, device=device)}
    for step in range(STEPS):
        for k, grad in _grads(params, step).items():
            params[k].grad = grad
        if step == 5:
            params["quats"].grad = None  # a group without gradient this step: not stepped, as torch does
        if fused:
            adam_step_all(list(optimizers.values()))
        else:
            for optimizer in optimizers.values():
                optimizer.step()
        scheduler.step()
        if step == 10:
            gsplat_ops.duplicate(params, optimizers, state, (torch.arange(len(params["means"])) % 3 == 0).to(device))
        if step == 20:
            gsplat_ops.remove(params, optimizers, state, (torch.arange(len(params["means"])) % 5 == 1).to(device))
    return params, optimizers


@pytest.mark.parametrize("foreach", [False, True])
def test_one_update_is_bitwise_six_adams(foreach, device="cpu"):
    ref_params, ref_opts = _run(fused=False, foreach=foreach, device=device)
    params, opts = _run(fused=True, foreach=foreach, device=device)
    assert params["means"].shape[0] == ref_params["means"].shape[0] != 50  # the surgery happened
    for k in SHAPES:
        assert torch.equal(params[k], ref_params[k]), (k, (params[k] - ref_params[k]).abs().max())
        # per-group state_dict (what checkpoints hold): same keys, same step counts, same moments
        assert_bitwise_equal(opts[k].state_dict(), ref_opts[k].state_dict(), k)
    assert opts["means"].param_groups[0]["lr"] == ref_opts["means"].param_groups[0]["lr"] < LRS["means"]


def test_only_plain_adam_is_fused():
    p = torch.nn.Parameter(torch.zeros(3))
    assert adam_fusable(torch.optim.Adam([p], lr=0.1))
    assert not adam_fusable(torch.optim.Adam([p], lr=0.1, weight_decay=0.01))
    assert not adam_fusable(torch.optim.Adam([p], lr=0.1, amsgrad=True))
    assert not adam_fusable(torch.optim.AdamW([p], lr=0.1))
    assert not adam_fusable(torch.optim.SGD([p], lr=0.1))


def _checked(fused: bool) -> CheckedOptimizers:
    params = _params()
    config = {k: {"optimizer": AdamOptimizerConfig(lr=LRS[k], eps=1e-15), "scheduler": None} for k in SHAPES}
    config["means"]["scheduler"] = ExponentialDecaySchedulerConfig(lr_final=1.6e-6, max_steps=STEPS)
    config["opacities"]["optimizer"] = AdamOptimizerConfig(lr=0.05, eps=1e-15, max_norm=0.01)  # clipped: own step
    return CheckedOptimizers(config, {k: [p] for k, p in params.items()}, fused_adam=fused)


def test_checked_optimizers_fused_and_per_group_agree_bitwise(monkeypatch):
    calls = []
    import ns_splat_plus.training.optimizers as module

    real = module.adam_step_all
    monkeypatch.setattr(module, "adam_step_all", lambda opts: (calls.append(len(opts)), real(opts)))
    results = {}
    for fused in (False, True):
        optimizers = _checked(fused)
        scaler = torch.cuda.amp.GradScaler(enabled=False)
        for step in range(STEPS):
            grads = _grads({k: o.param_groups[0]["params"][0] for k, o in optimizers.optimizers.items()}, step)
            for k, optimizer in optimizers.optimizers.items():
                optimizer.param_groups[0]["params"][0].grad = grads[k]
            optimizers.optimizer_scaler_step_some(scaler, list(SHAPES))
            optimizers.scheduler_step_all(step)
        results[fused] = {k: o.state_dict() for k, o in optimizers.optimizers.items()}
        results[fused]["params"] = {
            k: o.param_groups[0]["params"][0].detach() for k, o in optimizers.optimizers.items()
        }
    assert calls == [5] * STEPS  # one call per step, for the five unclipped groups
    assert_bitwise_equal(results[True], results[False], "optimizers")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_update_is_bitwise_six_adams_on_cuda():
    """torch's default Adam on CUDA is the foreach one: the fused update must match it bitwise there too."""
    test_one_update_is_bitwise_six_adams(foreach=True, device="cuda")


def test_zero_grad_some_clears_exactly_the_named_groups_without_torchs_zero_grad(monkeypatch):
    """The same effect as nerfstudio's (each group's optimizer.zero_grad(): gradients set to None), on the
    Parameters the optimizers hold now (densification replaces them), without torch's per-call zero_grad."""
    from nerfstudio.engine.optimizers import Optimizers

    optimizers, upstream = _checked(False), _checked(False)
    gsplat_ops.duplicate(
        {k: o.param_groups[0]["params"][0] for k, o in optimizers.optimizers.items()}, optimizers.optimizers,
        {"grad2d": torch.zeros(50), "count": torch.zeros(50)}, torch.arange(50) % 2 == 0,
    )  # fmt: skip
    gsplat_ops.duplicate(
        {k: o.param_groups[0]["params"][0] for k, o in upstream.optimizers.items()}, upstream.optimizers,
        {"grad2d": torch.zeros(50), "count": torch.zeros(50)}, torch.arange(50) % 2 == 0,
    )  # fmt: skip
    for optims in (optimizers, upstream):
        for o in optims.optimizers.values():
            o.param_groups[0]["params"][0].grad = torch.ones_like(o.param_groups[0]["params"][0])
    Optimizers.zero_grad_some(upstream, ["means", "quats"])

    def no_torch_zero_grad(self, set_to_none=True):
        raise AssertionError("torch's Optimizer.zero_grad was called")

    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad", no_torch_zero_grad)
    optimizers.zero_grad_some(["means", "quats"])
    cleared = {k for k, o in optimizers.optimizers.items() if o.param_groups[0]["params"][0].grad is None}
    assert cleared == {k for k, o in upstream.optimizers.items() if o.param_groups[0]["params"][0].grad is None}
    assert cleared == {"means", "quats"}


# --- the private torch API changed: torch's own Adam, one warning -----------------------------------------

FALLBACK_WARNING = "torch's own Adam steps"


def _change_torchs_private_adam(monkeypatch, change: str) -> None:
    """Simulate a torch whose ``Adam._init_group`` changed, and forget this process's probe and warnings.

    "signature": one more parameter (torch's own step still works, our call would not mean the same);
    "absent": gone from the class, as if renamed (torch's own step reaches it through the instance)."""
    from ns_splat_plus.upstream import versions

    monkeypatch.setattr(versions, "PROBES", {})
    monkeypatch.setattr(versions, "WARNED", set())
    original = torch.optim.Adam._init_group
    if change == "signature":

        def init_group(
            self, group, params_with_grad, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, has_sparse=False
        ):
            return original(self, group, params_with_grad, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps)

        monkeypatch.setattr(torch.optim.Adam, "_init_group", init_group)
    else:
        monkeypatch.delattr(torch.optim.Adam, "_init_group")
        monkeypatch.setattr(
            torch.optim.Adam,
            "__getattr__",
            lambda self, name: original.__get__(self) if name == "_init_group" else object.__getattribute__(self, name),
            raising=False,
        )


@pytest.mark.parametrize("change", ["signature", "absent"])
def test_a_changed_private_adam_falls_back_to_torchs_adam_with_one_warning(change, monkeypatch, capsys):
    """Fused Adam asked for, torch's Adam._init_group changed: the probe says so once, and every group
    steps torch's own Adam, bitwise what per-group torch Adam gives."""
    import ns_splat_plus.training.optimizers as module
    from ns_splat_plus import upstream

    reference = _checked(fused=False)
    _change_torchs_private_adam(monkeypatch, change)
    monkeypatch.setattr(module, "adam_step_all", lambda opts: pytest.fail("the fused update ran on a changed torch"))
    upstream.check_versions()  # the start-up check probes it
    assert not upstream.fused_adam_available() and upstream.probe_private_apis()["fused_adam"] is not None
    fallback = _checked(fused=True)
    assert not fallback.fused_adam
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    for step in range(STEPS):
        for optimizers in (reference, fallback):
            grads = _grads({k: o.param_groups[0]["params"][0] for k, o in optimizers.optimizers.items()}, step)
            for k, optimizer in optimizers.optimizers.items():
                optimizer.param_groups[0]["params"][0].grad = grads[k]
            optimizers.optimizer_scaler_step_some(scaler, list(SHAPES))
            optimizers.scheduler_step_all(step)
    for k in SHAPES:
        assert_bitwise_equal(fallback.optimizers[k].state_dict(), reference.optimizers[k].state_dict(), k)
        stepped = fallback.optimizers[k].param_groups[0]["params"][0]
        assert torch.equal(stepped, reference.optimizers[k].param_groups[0]["params"][0])
    _checked(fused=True)  # a second set of optimizers (a second run in this process): no second warning
    upstream.check_versions()
    out = capsys.readouterr().out
    assert out.count(FALLBACK_WARNING) == 1, out
    assert "Adam._init_group" in out, out


def test_training_steps_with_torchs_adam_when_the_private_api_changed(tmp_path, monkeypatch, capsys):
    """The whole trainer, --fused-adam on (CPU), torch's Adam._init_group changed: one warning at start-up,
    and training steps with torch's own Adam (the parameters move; the fused update never runs)."""
    from inprocess import build_trainer, close_writers, small_scene, trainer_config

    import ns_splat_plus.training.optimizers as module

    _change_torchs_private_adam(monkeypatch, "signature")
    monkeypatch.setattr(module, "adam_step_all", lambda opts: pytest.fail("the fused update ran on a changed torch"))
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "run", steps=3)
    config.fused_adam = True
    config.warmup_steps = 0
    try:
        trainer = build_trainer(config)
        assert not trainer.optimizers.fused_adam
        before = {k: v.detach().clone() for k, v in trainer.pipeline.model.gauss_params.items()}
        trainer.train()
        after = trainer.pipeline.model.gauss_params
        assert not torch.equal(before["means"], after["means"]) and not torch.equal(
            before["opacities"], after["opacities"]
        )
    finally:
        close_writers()
    out = capsys.readouterr().out
    assert out.count(FALLBACK_WARNING) == 1, out
