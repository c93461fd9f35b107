"""Device-count resolution under simulated SLURM / torchrun / CUDA_VISIBLE_DEVICES environments."""

from __future__ import annotations

import pytest

from ns_splat_plus.parallel.devices import (
    DeviceResolutionError,
    expand_hostlist,
    parse_device_list,
    rank_environment,
    resolve_devices,
    slurm_gpu_allocation,
)


def torchrun_env(rank, world, local_rank, local_world, **extra):
    env = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world),
        "GROUP_RANK": str(rank // local_world),
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "none",
    }
    env.update(extra)
    return env


def srun_env(procid, ntasks, localid, nodeid=0, **extra):
    env = {
        "SLURM_JOB_ID": "123456",
        "SLURM_PROCID": str(procid),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_LOCALID": str(localid),
        "SLURM_NODEID": str(nodeid),
        "SLURM_STEP_ID": "0",
    }
    env.update(extra)
    return env


# --- plain ns-train: spawn over the GPUs this job has -------------------------------------------------


def test_default_uses_every_visible_gpu():
    plan = resolve_devices(0, "cuda", {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, cuda_device_count=4)
    assert plan.launcher == "ns-train"
    assert plan.world_size == 4 and plan.num_devices_for_launch == 4
    assert plan.message.startswith("splat-plus: using 4 of 4 GPUs via ns-train")
    assert plan.warnings == ()
    assert not plan.external_ranks


def test_single_gpu_message():
    plan = resolve_devices(0, "cuda", {}, cuda_device_count=1)
    assert plan.num_devices_for_launch == 1 and plan.device_index == 0
    assert "using 1 of 1 GPUs via ns-train (one process)" in plan.message


def test_explicit_more_than_exist_is_a_clear_error():
    with pytest.raises(DeviceResolutionError) as error:
        resolve_devices(4, "cuda", {"CUDA_VISIBLE_DEVICES": "2,3"}, cuda_device_count=2)
    text = str(error.value)
    assert "--machine.num-devices 4" in text and "only 2 GPUs" in text
    assert "CUDA_VISIBLE_DEVICES=2,3" in text


def test_explicit_fewer_is_a_warning():
    plan = resolve_devices(2, "cuda", {}, cuda_device_count=4)
    assert plan.num_devices_for_launch == 2
    assert "using 2 of 4 GPUs" in plan.message
    assert len(plan.warnings) == 1 and "2 of this job's 4 GPUs stay idle" in plan.warnings[0]


def test_no_gpu_visible_points_to_cpu():
    with pytest.raises(DeviceResolutionError, match="device-type cpu"):
        resolve_devices(0, "cuda", {"CUDA_VISIBLE_DEVICES": ""}, cuda_device_count=0)


def test_cpu_spawn_points_to_torchrun():
    plan = resolve_devices(0, "cpu", {}, cuda_device_count=0)
    assert plan.num_devices_for_launch == 1 and "1 CPU process" in plan.message
    with pytest.raises(DeviceResolutionError) as error:
        resolve_devices(2, "cpu", {}, cuda_device_count=0)
    assert "torchrun --nproc-per-node 2" in str(error.value)


def test_slurm_batch_script_uses_its_allocation():
    # sbatch with --gpus-per-node=4, ns-train run directly (no srun): one process that spawns
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_NTASKS": "1",
        "SLURM_PROCID": "0",
        "SLURM_GPUS_ON_NODE": "4",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "SLURM_JOB_NODELIST": "gpu01",
    }
    assert rank_environment(env) is None
    plan = resolve_devices(0, "cuda", env, cuda_device_count=4)
    assert plan.launcher == "ns-train" and plan.num_devices_for_launch == 4
    assert "using 4 of 4 GPUs" in plan.message


def test_slurm_allocation_caps_unconfined_gpus():
    # a cluster without device cgroups: torch sees 8 GPUs, the job was given 2
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "4,5"}
    assert slurm_gpu_allocation(env) == 2
    plan = resolve_devices(0, "cuda", env, cuda_device_count=8)
    assert plan.num_devices_for_launch == 2
    assert "using 2 of 2 GPUs" in plan.message and "allocated by SLURM, 8 visible" in plan.message
    with pytest.raises(DeviceResolutionError, match="only 2 GPUs"):
        resolve_devices(4, "cuda", env, cuda_device_count=8)


def test_slurm_allocation_larger_than_visible_warns():
    env = {"SLURM_JOB_ID": "77", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1"}
    plan = resolve_devices(0, "cuda", env, cuda_device_count=2)
    assert plan.num_devices_for_launch == 2
    assert any("SLURM allocated 4 GPUs" in w for w in plan.warnings)


# --- torchrun --------------------------------------------------------------------------------------


def test_torchrun_ranks_and_devices():
    env = torchrun_env(rank=5, world=8, local_rank=1, local_world=4)
    plan = resolve_devices(0, "cuda", env, cuda_device_count=4)
    assert plan.launcher == "torchrun" and plan.external_ranks
    assert (plan.rank, plan.world_size, plan.local_rank, plan.device_index) == (5, 8, 1, 1)
    assert plan.num_devices_for_launch == 1  # nerfstudio's launch starts just this process
    assert plan.num_nodes == 2
    assert plan.message == "splat-plus: using 8 of 8 GPUs via torchrun (2 nodes x 4 processes, NCCL)"
    assert (plan.master_addr, plan.master_port) == ("10.0.0.1", 29400)


def test_torchrun_more_processes_than_gpus_is_an_error():
    env = torchrun_env(rank=0, world=4, local_rank=0, local_world=4, CUDA_VISIBLE_DEVICES="0,1")
    with pytest.raises(DeviceResolutionError) as error:
        resolve_devices(0, "cuda", env, cuda_device_count=2)
    assert "4 processes on this node but only 2 GPUs" in str(error.value)


def test_torchrun_fewer_processes_than_gpus_warns():
    plan = resolve_devices(0, "cuda", torchrun_env(0, 2, 0, 2), cuda_device_count=4)
    assert "using 2 of 4 GPUs via torchrun" in plan.message
    assert any("2 stay idle" in w for w in plan.warnings)


def test_torchrun_conflicting_num_devices():
    env = torchrun_env(0, 2, 0, 2)
    assert resolve_devices(2, "cuda", env, cuda_device_count=2).world_size == 2  # consistent: fine
    with pytest.raises(DeviceResolutionError, match="--nproc-per-node"):
        resolve_devices(4, "cuda", env, cuda_device_count=4)


def test_torchrun_cpu_gloo():
    plan = resolve_devices(0, "cpu", torchrun_env(1, 2, 1, 2), cuda_device_count=0)
    assert plan.external_ranks and plan.device_index is None
    assert plan.message == "splat-plus: using 2 CPU processes (0 GPUs) via torchrun (1 node x 2 processes, gloo)"
    one_per_node = resolve_devices(0, "cpu", torchrun_env(1, 2, 0, 1), cuda_device_count=0)
    assert one_per_node.message.endswith("(2 nodes x 1 process, gloo)"), one_per_node.message


def test_torchrun_single_process_does_not_spawn():
    plan = resolve_devices(0, "cuda", torchrun_env(0, 1, 0, 1), cuda_device_count=4)
    assert plan.world_size == 1 and plan.num_devices_for_launch == 1 and not plan.external_ranks


# --- srun -------------------------------------------------------------------------------------------


def test_srun_tasks_are_ranks_and_master_is_first_host():
    env = srun_env(
        procid=6,
        ntasks=8,
        localid=2,
        nodeid=1,
        SLURM_STEP_NODELIST="gpu[07-08]",
        SLURM_STEP_TASKS_PER_NODE="4(x2)",
        SLURM_STEP_NUM_NODES="2",
        CUDA_VISIBLE_DEVICES="0,1,2,3",
    )
    plan = resolve_devices(0, "cuda", env, cuda_device_count=4)
    assert plan.launcher == "slurm"
    assert (plan.rank, plan.world_size, plan.local_rank, plan.local_world_size) == (6, 8, 2, 4)
    assert plan.device_index == 2
    assert plan.master_addr == "gpu07"
    assert plan.master_port == 20000 + 123456 % 20000
    assert plan.message == "splat-plus: using 8 of 8 GPUs via slurm (2 nodes x 4 processes, NCCL)"


def test_srun_one_gpu_per_task_uses_device_zero():
    env = srun_env(
        procid=3, ntasks=4, localid=3, SLURM_JOB_NODELIST="node1", SLURM_TASKS_PER_NODE="4", CUDA_VISIBLE_DEVICES="3"
    )
    plan = resolve_devices(0, "cuda", env, cuda_device_count=1)
    assert plan.device_index == 0 and plan.local_world_size == 4
    assert "using 4 of 4 GPUs via slurm" in plan.message


def test_srun_master_addr_from_environment_wins():
    env = srun_env(0, 2, 0, MASTER_ADDR="head", MASTER_PORT="1234", SLURM_JOB_NODELIST="gpu[1-2]")
    env["SLURM_TASKS_PER_NODE"] = "2"
    plan = resolve_devices(0, "cpu", env, cuda_device_count=0)
    assert (plan.master_addr, plan.master_port) == ("head", 1234)


def test_torchrun_inside_slurm_takes_torchrun_ranks():
    env = srun_env(0, 2, 0)
    env.update(torchrun_env(3, 4, 1, 2))
    plan = resolve_devices(0, "cuda", env, cuda_device_count=2)
    assert plan.launcher == "torchrun" and plan.rank == 3


# --- parsing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hostlist, expected",
    [
        ("gpu01", ["gpu01"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("a[1-2],b5,c[009-010]", ["a1", "a2", "b5", "c009", "c010"]),
        ("rack[1-2]-n", ["rack1-n", "rack2-n"]),
    ],
)
def test_expand_hostlist(hostlist, expected):
    assert expand_hostlist(hostlist) == expected


def test_expand_hostlist_rejects_what_it_cannot_read():
    with pytest.raises(ValueError):
        expand_hostlist("gpu[01-03")


def test_parse_device_list():
    assert parse_device_list(None) is None
    assert parse_device_list("") == []
    assert parse_device_list("0,1") == ["0", "1"]
    assert parse_device_list("GPU-abc,GPU-def") == ["GPU-abc", "GPU-def"]
    assert parse_device_list("0,-1,2") == ["0"]  # CUDA stops at the first invalid entry
    assert parse_device_list("NoDevFiles") == []
