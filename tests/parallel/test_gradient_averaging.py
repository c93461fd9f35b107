"""Gradient averaging overlapped with the backward pass, and the replica checksum of raw bits.

Three gloo ranks (the smallest world where gloo's ring all-reduce sums an element in an order that
depends on the buffer layout), a real ``torchrun ns-train`` on three CPU ranks with and without the
overlap, and the checksum's properties in one process.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from clirun import console_script, free_port

from ns_splat_plus import parallel
from ns_splat_plus.parallel import gradients, replicas
from ns_splat_plus.parallel.replicas import _bits_checksum
from splatbench.scenes import SceneSpec, make_scene


def _make_params(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    shapes = {"means": (n, 3), "features_rest": (n, 15, 3), "opacities": (n, 1), "only_rank1": (4,), "never": (2,)}
    return {k: torch.nn.Parameter(torch.randn(*s, generator=g)) for k, s in shapes.items()}


def _loss(params, rank: int):
    """A graph like the model's: every gradient arrives late in the backward pass, values differ per rank."""
    g = torch.Generator().manual_seed(100 + rank)
    # magnitudes spread over 1e-4..1e4: float sums in a different order would differ in the last bits
    weight = lambda *s: torch.randn(*s, generator=g) * 10.0 ** torch.randint(-4, 5, s, generator=g)  # noqa: E731
    x = (params["means"] * weight(*params["means"].shape)).sum(1)
    x = x + (params["features_rest"] * weight(*params["features_rest"].shape)).sum((1, 2))
    loss = (x * torch.sigmoid(params["opacities"]).squeeze(1)).sum()
    if rank == 1:  # a parameter only one rank's loss reaches (no Gaussian of it in the others' views)
        loss = loss + (params["only_rank1"] * weight(4)).sum()
    return loss


def _grads(params):
    return {k: None if p.grad is None else p.grad.clone() for k, p in params.items()}


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    result = {}
    try:
        for refine, n in enumerate((1000, 1733)):  # a second "refine": new Parameter objects of another size
            params = _make_params(n, seed=refine)
            order = list(params.values())
            _loss(params, rank).backward()  # one-shot: all after the backward pass
            gradients.average_gradients(order)
            one_shot = _grads(params)
            for p in order:
                p.grad = None
            averaging = gradients.start_gradient_averaging(order)
            _loss(params, rank).backward()
            result[f"launched_during_backward_{refine}"] = averaging._launched
            gradients.average_gradients(order)
            overlapped = _grads(params)
            result[f"bitwise_{refine}"] = {
                k: (one_shot[k] is None and overlapped[k] is None)
                or (one_shot[k] is not None and overlapped[k] is not None and torch.equal(one_shot[k], overlapped[k]))
                for k in params
            }
            result[f"none_{refine}"] = [k for k, v in overlapped.items() if v is None]
            # the mean itself: every rank's gradient gathered, summed in float64
            local = {k: p.grad for k, p in params.items()}
            for p in order:
                p.grad = None
            _loss(params, rank).backward()
            errors = {}
            for k, p in params.items():
                mine = p.grad if p.grad is not None else torch.zeros_like(p)
                gathered = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(gathered, mine)
                mean = torch.stack(gathered).double().sum(0) / world
                errors[k] = (
                    None if local[k] is None else float((local[k].double() - mean).abs().max() / mean.abs().max())
                )
            result[f"relative_error_{refine}"] = errors
            # replica checksums: identical parameters pass; rows swapped on one rank fail on every rank
            named = {k: p.detach().clone() for k, p in params.items()}
            parallel.check_replicas(named, step=3)
            if rank == 2:
                named["means"][[0, 1]] = named["means"][[1, 0]]
            try:
                parallel.check_replicas(named, step=4)
                result[f"divergence_{refine}"] = None
            except parallel.ReplicaDivergenceError as error:
                result[f"divergence_{refine}"] = str(error)
        # a second backward pass into gradients whose all-reduce is in flight is refused
        params = _make_params(10, seed=7)
        averaging = gradients.start_gradient_averaging(list(params.values()))
        _loss(params, rank).backward()
        try:
            _loss(params, rank).backward()
            result["second_backward"] = None
        except RuntimeError as error:
            result["second_backward"] = str(error)
        gradients.average_gradients(list(params.values()))  # drains what was started, on every rank alike
    finally:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


@pytest.mark.slow
def test_overlapped_averaging_is_bitwise_the_one_shot_average_on_three_gloo_ranks(tmp_path):
    torch.multiprocessing.spawn(_worker, args=(3, free_port(), str(tmp_path)), nprocs=3, join=True)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    for rank, res in enumerate(results):
        for refine in (0, 1):
            assert all(res[f"bitwise_{refine}"].values()), res[f"bitwise_{refine}"]
            # started from the hooks: means, features_rest, opacities everywhere, only_rank1 on rank 1
            # (on the others its missing gradient holds back its all-reduce until average_gradients)
            assert res[f"launched_during_backward_{refine}"] == (4 if rank == 1 else 3)
            assert res[f"none_{refine}"] == ["never"]  # no gradient on any rank stays None
            errors = res[f"relative_error_{refine}"]
            assert errors["never"] is None
            assert all(e < 1e-6 for k, e in errors.items() if k != "never"), errors  # the mean, only_rank1 too
            divergence = res[f"divergence_{refine}"]
            assert divergence is not None and "step 4" in divergence and "rank 2" in divergence
            assert "means" in divergence and "opacities" not in divergence
        assert "accumulated twice in one step" in res["second_backward"]


def test_bits_checksum_sees_every_bit_and_every_reordering_without_wider_copies(monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    t = torch.randn(1000, 15, 3)
    base = _bits_checksum(t)
    assert base.dtype == torch.int64 and base.shape == (3,) and base[0] == t.numel()
    assert torch.equal(_bits_checksum(t.clone()), base)
    for index in ((0, 0, 0), (517, 7, 1), (999, 14, 2)):  # one ulp, anywhere
        changed = t.clone()
        changed[index] = torch.nextafter(changed[index], torch.tensor(float("inf")))
        assert not torch.equal(_bits_checksum(changed), base), index
    swapped = t[[1, 0, *range(2, 1000)]]
    assert not torch.equal(_bits_checksum(swapped), base)  # the same values, Gaussians reordered
    assert not torch.equal(_bits_checksum(torch.zeros(4)), _bits_checksum(-torch.zeros(4)))  # bits, not values
    assert not torch.equal(_bits_checksum(torch.zeros(4)), _bits_checksum(torch.zeros(5)))
    assert _bits_checksum(torch.zeros(0, 3)).tolist() == [0, 0, 0]
    assert _bits_checksum(torch.tensor(2.0, dtype=torch.float64))[0] == 1
    assert not torch.equal(
        _bits_checksum(torch.ones(8, dtype=torch.bfloat16)), _bits_checksum(torch.ones(8, dtype=torch.float16))
    )

    class Allocations(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.outputs = []
            self.widened = []  # elements of each reduction that sums into a wider type (a hidden copy)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.outputs += [
                o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)
            ]
            if func.overloadpacket is torch.ops.aten.sum and out.dtype != args[0].dtype:
                self.widened.append(args[0].numel())
            return out

    monkeypatch.setattr(replicas, "_CHUNK_ELEMENTS", 4096)  # widened 4096 elements at a time
    with Allocations() as seen:
        assert torch.equal(_bits_checksum(t), base)  # the same sums, in chunks
    assert not any(o.dtype == torch.float64 for o in seen.outputs)
    assert seen.widened and max(seen.widened) <= 4096
    fresh = [o for o in seen.outputs if o.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()]
    # never a copy of the whole tensor (45000 elements): a chunk of rows in int64, or one int64 per row
    assert max(o.numel() * o.element_size() for o in fresh) <= 8 * max(4096, t.shape[0])


@pytest.mark.slow
def test_torchrun_three_ranks_overlapped_and_one_shot_train_bitwise_the_same_model(tmp_path):
    """Through densification (new Parameters at every refine): the final parameters of the default
    (overlapped) run and of --data-parallel.overlap-gradient-averaging False are bit for bit equal."""
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=12, width=48, height=36, focal=42.0))
    finals = {}
    for overlap in ("True", "False"):
        cmd = [
            console_script("torchrun"), "--nproc-per-node", "3", "--master-port", str(free_port()),
            console_script("ns-train"), "splat-plus", "--data", str(scene), "--output-dir", str(tmp_path / "out"),
            "--experiment-name", "avg", "--timestamp", overlap, "--machine.device-type", "cpu", "--vis", "tensorboard",
            "--logging.local-writer.enable", "False", "--max-num-iterations", "45", "--warmup-steps", "0",
            "--pipeline.model.num-downscales", "0", "--pipeline.model.warmup-length", "6",
            "--pipeline.model.refine-every", "6", "--pipeline.model.sh-degree-interval", "6",
            "--data-parallel.replica-check-every", "3", "--data-parallel.overlap-gradient-averaging", overlap, "colmap",
        ]  # fmt: skip
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
        run = tmp_path / "out" / "avg" / "splat-plus" / overlap
        ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(3)]
        assert len({r["final_checksum"] for r in ranks}) == 1
        assert all(r["replica_checks_passed"] >= 4 for r in ranks)
        refines = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
        assert sum(r["event"] == "refine" for r in refines) >= 2
        finals[overlap] = (ranks[0]["final_checksum"], ranks[0]["final_num_gaussians"])
    assert finals["True"] == finals["False"]
