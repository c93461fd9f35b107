"""Data-parallel training: camera shards, schedule rule, collectives, rank death, and a real 2-rank run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import clirun
import numpy as np
import pytest
import torch
from clirun import console_script, free_port, ns_train_cmd, torchrun_cmd
from inprocess import run_config, train

from ns_splat_plus import parallel
from ns_splat_plus.parallel import devices
from ns_splat_plus.parallel.devices import DeviceResolutionError
from splatbench.scenes import SceneSpec, make_scene

# --- camera shards ------------------------------------------------------------------------------------


def test_camera_shards_are_disjoint_and_cover_every_epoch():
    from ns_splat_plus.parallel.sharding import camera_shard

    n, world, seed = 10, 2, 7
    shards = [set(camera_shard(r, world, n, seed)) for r in range(world)]
    assert not shards[0] & shards[1] and shards[0] | shards[1] == set(range(n))  # a fixed partition
    steps_per_epoch = n // world
    for epoch in range(3):
        seen = []
        for step in range(epoch * steps_per_epoch, (epoch + 1) * steps_per_epoch):
            step_cams = [parallel.camera_for_step(step, r, world, n, seed) for r in range(world)]
            assert len(set(step_cams)) == world  # ranks render different cameras at each step
            assert all(c in shards[r] for r, c in enumerate(step_cams))  # each from its own shard
            seen += step_cams
        assert sorted(seen) == list(range(n))  # every camera once per epoch
    # one rank: the order of earlier releases, one seeded permutation of all cameras per epoch
    single = [parallel.camera_for_step(s, 0, 1, n, seed) for s in range(2 * n)]
    assert single[:n] == np.random.default_rng([seed, 0]).permutation(n).tolist()
    assert single[n:] == np.random.default_rng([seed, 1]).permutation(n).tolist()
    # each rank reshuffles its shard every epoch; seeds differ
    rank0 = [parallel.camera_for_step(s, 0, world, n, seed) for s in range(3 * steps_per_epoch)]
    assert len({tuple(rank0[e * steps_per_epoch : (e + 1) * steps_per_epoch]) for e in range(3)}) > 1
    assert [parallel.camera_for_step(s, 0, 1, n, seed + 1) for s in range(n)] != single[:n]


# --- schedule scaling rule -------------------------------------------------------------------------------


def test_scale_schedule_rule():
    from ns_splat_plus.method import splat_plus_trainer_config

    config = splat_plus_trainer_config()
    base = splat_plus_trainer_config()
    changes = parallel.scale_schedule(config, 4, config.data_parallel)
    assert changes
    m, b = config.pipeline.model, base.pipeline.model
    assert config.max_num_iterations == math.ceil(base.max_num_iterations / 4)
    for name in (
        "warmup_length",
        "refine_every",
        "stop_split_at",
        "stop_screen_size_at",
        "sh_degree_interval",
        "resolution_schedule",
    ):
        assert getattr(m, name) == math.ceil(getattr(b, name) / 4), name
    assert m.reset_alpha_every == b.reset_alpha_every  # counted in refine intervals: follows refine_every
    means, base_means = config.optimizers["means"], base.optimizers["means"]
    assert means["optimizer"].lr == pytest.approx(base_means["optimizer"].lr * 2.0)  # sqrt(4)
    assert means["scheduler"].lr_final == pytest.approx(base_means["scheduler"].lr_final * 2.0)
    assert means["scheduler"].max_steps == math.ceil(base_means["scheduler"].max_steps / 4)
    assert means["optimizer"].betas == pytest.approx((0.9**4, 0.999**4))
    adam = means["optimizer"].setup([torch.nn.Parameter(torch.zeros(3))])
    assert adam.defaults["betas"] == pytest.approx((0.9**4, 0.999**4))
    assert adam.defaults["lr"] == pytest.approx(base_means["optimizer"].lr * 2.0)
    # applied once: a second call changes nothing, a different W is refused
    assert parallel.scale_schedule(config, 4, config.data_parallel) == []
    with pytest.raises(DeviceResolutionError, match="already scaled for 4"):
        parallel.scale_schedule(config, 2, config.data_parallel)


def test_scale_schedule_switches():
    from ns_splat_plus.method import splat_plus_trainer_config

    config = splat_plus_trainer_config()
    config.data_parallel.lr_scaling = "none"
    config.data_parallel.scale_adam_betas = False
    base_lr = config.optimizers["means"]["optimizer"].lr
    parallel.scale_schedule(config, 2, config.data_parallel)
    assert config.optimizers["means"]["optimizer"].lr == base_lr
    assert not hasattr(config.optimizers["means"]["optimizer"], "betas")
    assert config.max_num_iterations == 15000
    off = splat_plus_trainer_config()
    off.data_parallel.scale_schedule = False
    assert parallel.scale_schedule(off, 2, off.data_parallel) == []
    assert off.max_num_iterations == 30000
    assert parallel.scale_schedule(splat_plus_trainer_config(), 1, off.data_parallel) == []


def test_steps_scaler_compresses_the_whole_schedule():
    from ns_splat_plus.method import splat_plus_trainer_config

    config, base = splat_plus_trainer_config(), splat_plus_trainer_config()
    config.steps_scaler = 0.8
    assert parallel.scale_schedule(config, 1, config.data_parallel)
    m, b = config.pipeline.model, base.pipeline.model
    assert config.max_num_iterations == 24000
    for name in (
        "warmup_length",
        "refine_every",
        "stop_split_at",
        "stop_screen_size_at",
        "sh_degree_interval",
        "resolution_schedule",
        "efficient_late_prune_every",
    ):
        assert getattr(m, name) == math.ceil(getattr(b, name) * 0.8), name
    means, base_means = config.optimizers["means"], base.optimizers["means"]
    assert means["scheduler"].max_steps == 24000  # the learning rate decays over the shorter run
    assert config.optimizers["camera_opt"]["scheduler"].warmup_steps == 800
    # one camera per step: step counts only, learning rates and betas untouched
    assert means["optimizer"].lr == base_means["optimizer"].lr
    assert not hasattr(means["optimizer"], "betas")
    assert config.data_parallel.scaled_for_steps_scaler == 0.8 and config.data_parallel.scaled_for_world_size == 0
    # applied once; another scaler on the same config is refused
    assert parallel.scale_schedule(config, 1, config.data_parallel) == []
    assert config.max_num_iterations == 24000
    config.steps_scaler = 0.5
    with pytest.raises(DeviceResolutionError, match="already scaled by --steps-scaler 0.8"):
        parallel.scale_schedule(config, 1, config.data_parallel)


def test_steps_scaler_composes_with_cameras_per_step():
    from ns_splat_plus.method import splat_plus_fast_trainer_config

    config = splat_plus_fast_trainer_config()
    config.steps_scaler = 0.8
    parallel.scale_schedule(config, 4, config.data_parallel)
    assert config.max_num_iterations == 6000  # 30000 x 0.8 / 4
    assert config.pipeline.model.refine_every == 20 and config.pipeline.model.resolution_schedule == 600
    assert config.optimizers["means"]["scheduler"].max_steps == 6000
    assert config.optimizers["means"]["optimizer"].lr == pytest.approx(1.6e-4 * 2)  # sqrt(4): from B, not the scaler
    assert config.optimizers["means"]["optimizer"].betas == pytest.approx((0.9**4, 0.999**4))
    # the scaler is the decimal it was written as: 100 x 0.07 is 7 steps (the float product is 7.000000000000001)
    assert parallel.scaled_steps(100, 1, 0.07) == 7
    assert parallel.scaled_steps(30000, 4, 0.8) == 6000 and parallel.scaled_steps(10, 4, 1.5) == 4
    assert parallel.scaled_steps(0, 4, 0.5) == 0 and parallel.scaled_steps(1, 4, 0.1) == 1


def test_messages_quote_the_max_num_iterations_that_was_typed_not_the_scaled_one():
    """splat-plus-lite scales by 1/3 unasked: a resume refused at "--max-num-iterations 200" puzzled a user who
    typed 600. The count to type is the smallest whose scaled count reaches the steps, checked by scaling it."""
    from ns_splat_plus.method import splat_plus_lite_trainer_config, splat_plus_trainer_config
    from ns_splat_plus.parallel import schedule

    config = splat_plus_lite_trainer_config()
    config.max_num_iterations = 600
    parallel.scale_schedule(config, 2, config.data_parallel)
    assert config.max_num_iterations == 100
    assert schedule.describe_max_num_iterations(config) == (
        "the run's 100 steps (--max-num-iterations x 1/6: 2 cameras per step (2 ranks x 1) and --steps-scaler 0.333)"
    )  # lite's B is 1: the 2 cameras are 2 ranks ("2 cameras per step" alone read as B = 2 to a user of 2 ranks)
    assert schedule.typed_max_num_iterations(config, 100) == 595  # 595 x 1/6 rounds up to 100 as well
    config.pipeline.datamanager.cameras_per_step = 2  # one rank of 2 cameras: no ranks to name
    assert "x 1/6: 2 cameras per step and --steps-scaler" in schedule.describe_max_num_iterations(config)
    for scaled in range(1, 400):
        typed = schedule.typed_max_num_iterations(config, scaled)
        assert parallel.scaled_steps(typed, 2, config.steps_scaler) >= scaled
        assert typed == 1 or parallel.scaled_steps(typed - 1, 2, config.steps_scaler) < scaled, scaled
    plain = splat_plus_trainer_config()
    assert parallel.scale_schedule(plain, 1, plain.data_parallel) == []
    assert schedule.describe_max_num_iterations(plain) == "--max-num-iterations 30000"
    assert schedule.typed_max_num_iterations(plain, 123) == 123


def test_steps_scaler_must_be_positive():
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.method import splat_plus_trainer_config
    from ns_splat_plus.training import inputs

    config = splat_plus_trainer_config()
    config.steps_scaler = 2.0
    inputs.check_options(config)  # a longer schedule is fine
    for bad in (0.0, -0.5, float("nan"), float("inf")):
        config.steps_scaler = bad
        with pytest.raises(UserInputError, match="--steps-scaler must be a positive number"):
            inputs.check_options(config)


# --- collectives on two gloo ranks ---------------------------------------------------------------------


def _collectives_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    result = {}
    try:
        a = torch.nn.Parameter(torch.zeros(4, 3))
        b = torch.nn.Parameter(torch.zeros(5))
        only_rank1 = torch.nn.Parameter(torch.zeros(2))
        never = torch.nn.Parameter(torch.zeros(2))
        a.grad = torch.full((4, 3), float(rank + 1))  # 1 and 2 -> mean 1.5
        b.grad = torch.arange(5.0) * (rank + 1)  # mean 1.5 * arange
        if rank == 1:
            only_rank1.grad = torch.full((2,), 4.0)  # rank 0 contributes zeros -> mean 2
        parallel.average_gradients([a, b, only_rank1, never])
        result["a"] = a.grad.tolist()
        result["b"] = b.grad.tolist()
        result["only_rank1"] = only_rank1.grad.tolist() if only_rank1.grad is not None else None
        result["never"] = never.grad is None
        # replica check: identical parameters pass, one perturbed value fails on every rank
        params = {"means": torch.linspace(0, 1, 30).reshape(10, 3), "opacities": torch.ones(10, 1)}
        parallel.check_replicas(params, step=5)
        if rank == 1:
            params["opacities"][3, 0] += 1e-6
        try:
            parallel.check_replicas(params, step=10)
            result["divergence"] = None
        except parallel.ReplicaDivergenceError as error:
            result["divergence"] = str(error)
        result["checksum"] = parallel.parameter_checksum({"means": params["means"]})
    finally:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


@pytest.mark.slow
def test_average_gradients_and_replica_check_on_two_ranks(tmp_path):
    torch.multiprocessing.spawn(_collectives_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for res in results:
        assert res["a"] == [[1.5] * 3] * 4
        assert res["b"] == pytest.approx([1.5 * i for i in range(5)])
        assert res["only_rank1"] == [2.0, 2.0]  # created on rank 0 too: every rank steps the same
        assert res["never"] is True  # no gradient anywhere stays None
        assert res["divergence"] is not None
        assert "step 10" in res["divergence"] and "rank 1" in res["divergence"] and "opacities" in res["divergence"]
        assert "means" not in res["divergence"]
    assert results[0]["checksum"] == results[1]["checksum"]


def test_average_gradients_is_a_noop_in_one_process():
    p = torch.nn.Parameter(torch.zeros(3))
    p.grad = torch.ones(3)
    parallel.average_gradients([p])
    assert p.grad.tolist() == [1.0, 1.0, 1.0]


# --- a rank that dies -------------------------------------------------------------------------------------

DYING_RANK_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from datetime import timedelta
    import torch
    from ns_splat_plus import parallel
    from ns_splat_plus.parallel import devices, launch

    plan = devices.resolve_devices(0, "cpu", os.environ, 0)
    launch.init_process_group(plan, timedelta(seconds=30))
    p = torch.nn.Parameter(torch.zeros(100))
    for step in range(1000):
        if plan.rank == 1 and step == 3:
            raise RuntimeError("rank 1 fails on purpose at step 3")
        p.grad = torch.ones(100)
        parallel.average_gradients([p])
        time.sleep(0.01)
    print("rank", plan.rank, "finished without noticing")
    """
)


@pytest.mark.slow
def test_a_dying_rank_stops_the_others(tmp_path):
    script = tmp_path / "dying_rank.py"
    script.write_text(DYING_RANK_SCRIPT)
    start = time.monotonic()
    proc = subprocess.run(
        [console_script("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - start
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "rank 1 fails on purpose at step 3" in output
    assert "finished without noticing" not in output
    assert elapsed < 60, f"took {elapsed:.0f} s to stop"


STOPPING_RANK_SCRIPT = textwrap.dedent(
    """
    import atexit, sys
    from datetime import timedelta
    from pathlib import Path

    rank, port, mode, marker = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    atexit.register(marker.write_text, "finalized")  # registered first, so it runs after splat-plus's (LIFO)
    from ns_splat_plus.errors import UserInputError, exit_on_user_error
    from ns_splat_plus.parallel import collectives, launch
    from ns_splat_plus.parallel.devices import DevicePlan

    plan = DevicePlan(
        launcher="torchrun", device_type="cpu", world_size=2, rank=rank, local_rank=rank, local_world_size=2,
        num_nodes=1, num_devices_for_launch=1, device_index=None, gpus_visible=0, message="",
        master_addr="127.0.0.1", master_port=port,
    )
    launch.init_process_group(plan, timedelta(seconds=30))
    collectives.all_gather_object(rank)  # a collective just before the stop, like the start-up agreement
    if mode == "stop":
        with exit_on_user_error(rank):
            raise UserInputError(f"rank {rank} stops on purpose")
    if mode == "bug":  # an uncaught exception: Python prints its traceback, then the same race at finalization
        raise RuntimeError(f"rank {rank} has a bug")
    # an ordinary end, as a training run's: its final replica check marks the finish clean, so the group is torn
    # down at exit, before finalization (without it gloo's threads can abort finalization too, as seen in CI)
    launch.mark_finished_cleanly()
    """
)


@pytest.mark.slow
def test_a_rank_that_stops_after_a_collective_ends_with_its_status_before_finalization(tmp_path):
    """A stop (exit status 2) right after a collective ends the rank before the interpreter is finalized,
    where gloo's worker threads releasing the collective's tensors can abort it (SIGABRT, about once in
    25 runs of tests/parallel/test_rank_errors.py on a loaded machine): the handler registered before the
    process group never runs. An uncaught exception (a bug) ends so too, with Python's status 1 after its
    traceback. An ordinary end (no stop, the finish marked clean as training marks it) is finalized as usual."""
    script = tmp_path / "stopping_rank.py"
    script.write_text(STOPPING_RANK_SCRIPT)
    env = {**clirun.cli_env(), "OMP_NUM_THREADS": "1"}
    procs = {}
    for mode in ("stop", "bug", "return"):
        port = free_port()
        for rank in (0, 1):
            marker = tmp_path / f"{mode}-{rank}.finalized"
            cmd = [sys.executable, str(script), str(rank), str(port), mode, str(marker)]
            procs[mode, rank] = subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
    outputs = {key: proc.communicate(timeout=120)[0] for key, proc in procs.items()}
    for rank in (0, 1):
        assert procs["stop", rank].returncode == 2, outputs["stop", rank]
        assert not (tmp_path / f"stop-{rank}.finalized").exists(), outputs["stop", rank]
        assert procs["bug", rank].returncode == 1, outputs["bug", rank]
        assert f"RuntimeError: rank {rank} has a bug" in outputs["bug", rank], outputs["bug", rank]
        assert not (tmp_path / f"bug-{rank}.finalized").exists(), outputs["bug", rank]
        assert procs["return", rank].returncode == 0, outputs["return", rank]
        assert (tmp_path / f"return-{rank}.finalized").read_text() == "finalized"
    assert "rank 0 stops on purpose" in outputs["stop", 0] and "stops on purpose" not in outputs["stop", 1]


# --- the real CLI --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_rejects_cpu_spawn_and_points_to_torchrun(tmp_path):
    proc = subprocess.run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            str(tmp_path),
            "--output-dir",
            str(tmp_path / "out"),
            "--machine.device-type",
            "cpu",
            "--machine.num-devices",
            "2",
            "colmap",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "torchrun --nproc-per-node 2" in proc.stderr  # on stderr, as every user error (a trial found stdout)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()  # stopped before anything started


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cli_cuda_without_gpu_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            str(tmp_path),
            "--output-dir",
            str(tmp_path / "out"),
            "--machine.num-devices",
            "2",
            "colmap",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 2
    assert "no CUDA GPU is visible" in proc.stderr and "--machine.device-type cpu" in proc.stderr  # where errors go
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("method", ["splat-plus", "splat-plus-mcmc"])
def test_torchrun_two_cpu_ranks_stay_identical_through_densification(tmp_path, method):
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=24, width=64, height=48))
    # the single-process schedule below, run by 2 ranks: scaled to 30 steps, refine every 5 from step 5
    extra = ("--pipeline.model.warmup-length", "10", "--pipeline.model.refine-every", "10")
    extra += ("--data-parallel.replica-check-every", "5")
    cmd = torchrun_cmd(2, ns_train_cmd(scene, tmp_path / "out", "dp", 60, *extra, method=method, warmup_steps=None))
    proc = clirun.run(cmd)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-5000:]
    assert "splat-plus: using 2 CPU processes (0 GPUs) via torchrun" in output
    run = tmp_path / "out" / "dp" / method / "run"
    ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(2)]
    # initial Gaussians: identical, verified by every rank, and logged by each
    assert ranks[0]["initial_checksum"] == ranks[1]["initial_checksum"] is not None
    assert all(r["initial_match"] for r in ranks)
    assert output.count(f"initial Gaussians checksum {ranks[0]['initial_checksum']}") == 2
    # densification happened at least twice and changed the count
    records = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
    start = next(r for r in records if r["event"] == "start")["num_gaussians"]
    refines = [r for r in records if r["event"] == "refine"]
    assert len(refines) >= 2, refines
    assert refines[0]["num_gaussians_before"] == start
    assert refines[-1]["num_gaussians"] != start
    # both ranks hold identical parameters at the end: count and values (bitwise checksum)
    assert ranks[0]["final_num_gaussians"] == ranks[1]["final_num_gaussians"] == refines[-1]["num_gaussians"]
    assert ranks[0]["final_checksum"] == ranks[1]["final_checksum"]
    assert ranks[0]["final_step"] == ranks[1]["final_step"] == 29
    assert all(r["replica_checks_passed"] >= 5 for r in ranks)
    # rank 0 alone wrote the checkpoint, with that many Gaussians
    ckpts = list((run / "nerfstudio_models").glob("*.ckpt"))
    assert len(ckpts) == 1
    state = torch.load(ckpts[0], map_location="cpu", weights_only=True)
    assert state["pipeline"]["_model.gauss_params.means"].shape[0] == ranks[0]["final_num_gaussians"]
    assert state["training"]["world_size"] == 2 and len(state["rng_per_rank"]) == 2
    if method == "splat-plus":
        # resume with another number of ranks: refused (its learning rates, betas and schedule are 2-rank ones)
        resumed = subprocess.run(
            [
                console_script("ns-train"),
                method,
                "--data",
                str(scene),
                "--output-dir",
                str(tmp_path / "one"),
                "--machine.device-type",
                "cpu",
                "--vis",
                "tensorboard",
                "--max-num-iterations",
                "60",
                "--load-dir",
                str(run / "nerfstudio_models"),
                "colmap",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        text = resumed.stdout + resumed.stderr
        assert resumed.returncode != 0 and "Traceback" not in text, text[-3000:]
        assert "written by a run on 2 rank(s) and this run has 1" in text, text[-3000:]
        # on the CPU only torchrun starts several ranks (ns-train --machine.num-devices 2 is refused there)
        assert "resume on 2 rank(s) (torchrun --nproc-per-node 2 $(which ns-train) ...)" in text, text[-3000:]


@pytest.mark.slow
def test_a_one_process_checkpoint_is_refused_on_two_ranks(tmp_path):
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=8, width=32, height=24, focal=28.0, n_points=200))
    common = [
        "--data",
        str(scene),
        "--machine.device-type",
        "cpu",
        "--vis",
        "tensorboard",
        "--pipeline.model.num-downscales",
        "0",
        "--warmup-steps",
        "0",
    ]
    # the one-process run, trained in this process (its checkpoint is what the 2-rank ns-train must refuse)
    load_dir = train(run_config(scene, tmp_path / "one", "e", 4, timestamp="t")).checkpoint_dir
    assert list(load_dir.glob("step-*.ckpt"))
    resumed = subprocess.run(
        [
            console_script("torchrun"),
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            console_script("ns-train"),
            "splat-plus",
            *common,
            "--output-dir",
            str(tmp_path / "two"),
            "--max-num-iterations",
            "20",
            "--load-dir",
            str(load_dir),
            "colmap",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = resumed.stdout + resumed.stderr
    assert resumed.returncode != 0, text[-3000:]
    assert "written by a run on 1 rank(s) and this run has 2" in text, text[-3000:]
    assert not list((tmp_path / "two").rglob("*.ckpt"))  # nothing trained, nothing written


SRUN_TASK_SCRIPT = textwrap.dedent(
    """
    import os
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from ns_splat_plus import parallel
    from ns_splat_plus.parallel import devices, launch

    plan = devices.resolve_devices(0, "cpu", os.environ, 0)
    assert plan.launcher == "slurm" and plan.external_ranks, plan
    launch.init_process_group(plan, timedelta(seconds=60))
    t = torch.tensor([float(plan.rank + 1)])
    dist.all_reduce(t)
    print(f"task {plan.rank} of {dist.get_world_size()} (local {plan.local_rank}, master {plan.master_addr}): sum {t.item():g}")
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_srun_tasks_form_one_process_group(tmp_path):
    """Two processes with the variables srun sets (no torchrun) join one gloo group."""
    script = tmp_path / "srun_task.py"
    script.write_text(SRUN_TASK_SCRIPT)
    port = free_port()
    procs = []
    for procid in range(2):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
        }
        env.update({
            "SLURM_JOB_ID": "4242", "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(procid), "SLURM_NODEID": "0",
            "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
            "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": "localhost", "MASTER_PORT": str(port),
        })  # fmt: skip
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for procid, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, out
        assert f"task {procid} of 2 (local {procid}, master localhost): sum 3" in out


# --- GPU (run on the device machine) ---------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("launcher", ["spawn", "torchrun"])
def test_two_gpus_train_identical_replicas(tmp_path, launcher):
    """ns-train --machine.num-devices 2 (spawn) and torchrun --nproc-per-node 2, NCCL, through refines."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=24, width=64, height=48))
    train_args = [
        "splat-plus", "--data", str(scene), "--output-dir", str(tmp_path / "out"),
        "--experiment-name", "dp", "--timestamp", "run", "--vis", "tensorboard",
        "--viewer.quit-on-train-completion", "True", "--logging.local-writer.enable", "False",
        "--max-num-iterations", "400", "--pipeline.model.num-downscales", "0",
        "--pipeline.model.warmup-length", "40", "--pipeline.model.refine-every", "40",
        "--data-parallel.replica-check-every", "10",
    ]  # fmt: skip
    if launcher == "spawn":
        cmd = [console_script("ns-train"), *train_args, "--machine.num-devices", "2", "colmap"]
        expected = "splat-plus: using 2 of 2 GPUs via ns-train (spawned processes, NCCL)"
    else:
        cmd = [console_script("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()),
               console_script("ns-train"), *train_args, "colmap"]  # fmt: skip
        expected = "splat-plus: using 2 of 2 GPUs via torchrun (1 node x 2 processes, NCCL)"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0,1")}
    if len(env["CUDA_VISIBLE_DEVICES"].split(",")) > 2:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(env["CUDA_VISIBLE_DEVICES"].split(",")[:2])
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast on shared hosts (the device machines set it too)
    # its own process group: a hang (e.g. NCCL) ends in a failure with the output, and no rank is left holding a GPU
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=360)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        pytest.fail(f"{launcher}: no exit after 360 s\n{output[-6000:]}")
    assert proc.returncode == 0, output[-6000:]
    assert expected in output, output[-6000:]
    run = tmp_path / "out" / "dp" / "splat-plus" / "run"
    ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world_size"], r["device"]) for r in ranks] == [(0, 2, "cuda:0"), (1, 2, "cuda:1")]
    assert ranks[0]["initial_checksum"] == ranks[1]["initial_checksum"] and ranks[0]["initial_match"]
    # the replicas densified: refines that changed the Gaussian count, decided alike on both ranks
    refines = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
    refines = [r for r in refines if r["event"] == "refine"]
    assert len(refines) >= 2 and any(r["num_gaussians"] != r["num_gaussians_before"] for r in refines), refines
    assert all(r["world_size"] == 2 for r in refines)
    final_step = 400 // 2 - 1  # --max-num-iterations 400 counts one camera per step: 200 steps of 2 cameras
    assert ranks[0]["final_step"] == ranks[1]["final_step"] == final_step
    # the replica check (every 10 steps, parameters compared across ranks) ran on both, and the ends agree bitwise
    assert ranks[0]["replica_checks_passed"] == ranks[1]["replica_checks_passed"] == final_step // 10
    assert ranks[0]["final_num_gaussians"] == ranks[1]["final_num_gaussians"] == refines[-1]["num_gaussians"]
    assert ranks[0]["final_checksum"] == ranks[1]["final_checksum"] and len(set(ranks[0]["final_checksums"])) == 1


def test_node_local_groups_follow_the_placement_not_rank_blocks():
    """SLURM's cyclic distribution puts ranks 0, 2 on node 0 and 1, 3 on node 1: nerfstudio's
    per-node group must follow SLURM_NODEID, not contiguous blocks of ranks."""
    from ns_splat_plus.parallel.launch import node_groups

    assert node_groups([0, 1, 0, 1]) == [[0, 2], [1, 3]]  # cyclic
    assert node_groups([0, 0, 1, 1]) == [[0, 1], [2, 3]]  # block
    assert node_groups([1, 0, 1, 0, 2]) == [[0, 2], [1, 3], [4]]  # uneven, nodes in order of first rank
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_PROCID": "2",
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_NODEID": "0",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NODELIST": "gpu[01-02]",
    }
    plan = devices.resolve_devices(0, "cpu", env, 0)
    assert (plan.rank, plan.node_rank, plan.local_rank) == (2, 0, 1)  # rank 2 on node 0: cyclic placement


# One viewer on global rank 0 of two torchrun "nodes" (nerfstudio would start one on local rank 0 of each):
# tests/parallel/test_multinode.py::test_two_simulated_nodes_match_one_node[splat-plus-1] (2 nodes x 2 processes).


@pytest.mark.slow
def test_an_option_refused_at_launch_under_torchrun_is_said_once(tmp_path):
    """Each rank reads the command line before the ranks know each other: rank 0 alone says what is wrong (a
    fresh-eyes trial saw the line once per rank). torchrun then prints its own summary of the failed workers."""
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=4, width=16, height=12, focal=14.0, n_points=50))
    proc = clirun.run(torchrun_cmd(2, ns_train_cmd(scene, tmp_path, "zero", 0)), timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert output.count("--max-num-iterations must be at least 1, got 0") == 1, output[-3000:]
    assert not (tmp_path / "zero").exists()  # refused before any run folder
