"""How many devices this job has, which rank this process is, and which launcher started it.

Pure functions of the environment (passed in as a mapping) and of what torch sees, so tests can
simulate SLURM, torchrun and CUDA_VISIBLE_DEVICES. Three ways to get several processes:

* ``ns-train splat-plus`` (launcher ``ns-train``): one process per GPU of this node, spawned by
  nerfstudio's ``launch``. ``--machine.num-devices 0`` (our default) means every GPU the job was
  given: ``torch.cuda.device_count()`` (which honours CUDA_VISIBLE_DEVICES), capped by SLURM's
  allocation when a SLURM job sets one.
* ``torchrun --nproc-per-node N $(which ns-train) splat-plus ...`` (launcher ``torchrun``): each
  process is one rank; RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE come from torchrun.
* ``srun ns-train splat-plus ...`` with several tasks (launcher ``slurm``): each task is one rank;
  SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID; MASTER_ADDR from the environment or the first
  host of the step's node list.

Under torchrun and srun, nerfstudio's own launcher is told to start one process
(``num_devices_for_launch == 1``) and :mod:`ns_splat_plus.parallel.launch` joins the process group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple

from nerfstudio.configs.base_config import MachineConfig

from ns_splat_plus.errors import UserInputError

Launcher = Literal["ns-train", "torchrun", "slurm"]


class DeviceResolutionError(UserInputError):
    """The requested devices cannot be provided (more than exist, CPU spawning, inconsistent launchers)."""


@dataclass
class SplatPlusMachineConfig(MachineConfig):
    """nerfstudio's machine options; ``num_devices`` 0 (the default) means every GPU the job was given."""

    num_devices: int = 0
    """GPUs (processes) on this machine. 0: all GPUs the job was given (CUDA_VISIBLE_DEVICES, SLURM, torch). Under torchrun / srun the launcher sets the number of ranks; leave this at 0."""


@dataclass(frozen=True)
class RankEnvironment:
    """Ranks assigned by an external launcher (torchrun or srun): one process per rank."""

    launcher: Launcher
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: Optional[str]
    master_port: Optional[int]


@dataclass(frozen=True)
class DevicePlan:
    """What this process does: how many ranks in total, which one it is, on which device."""

    launcher: Launcher
    device_type: str
    world_size: int
    """ranks in the whole job"""
    rank: int
    """this process's global rank (0 in the ns-train parent before spawning)"""
    local_rank: int
    local_world_size: int
    num_nodes: int
    num_devices_for_launch: int
    """what nerfstudio's launch() gets as num_devices_per_machine (1 under torchrun / srun)"""
    device_index: Optional[int]
    """CUDA device of this process (None on CPU, and in the ns-train parent)"""
    gpus_visible: int
    """GPUs of the job per node (what this process can see, or SLURM's allocation)"""
    message: str
    """the one line printed at start"""
    warnings: Tuple[str, ...] = field(default_factory=tuple)
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    node_rank: int = 0
    """which node this process runs on (SLURM_NODEID, torchrun's GROUP_RANK)"""

    @property
    def external_ranks(self) -> bool:
        """True when torchrun / srun started one process per rank (we join the process group ourselves)."""
        return self.launcher in ("torchrun", "slurm") and self.world_size > 1


# --- environment parsing -----------------------------------------------------------------------


def _int(env: Mapping[str, str], name: str) -> Optional[int]:
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def parse_device_list(value: Optional[str]) -> Optional[List[str]]:
    """Entries of CUDA_VISIBLE_DEVICES / SLURM_JOB_GPUS; None when unset, [] when it hides every GPU.

    CUDA stops at the first invalid entry ("-1", "NoDevFiles"), so we do too.
    """
    if value is None:
        return None
    entries = []
    for item in value.split(","):
        item = item.strip()
        if item == "" or item.startswith("-") or item.lower() in ("nodevfiles", "none"):
            break
        entries.append(item)
    return entries


def expand_hostlist(hostlist: str) -> List[str]:
    """SLURM's compressed host list ("gpu[01-03,07],login1") as host names, in order.

    Raises ValueError for syntax it cannot read (then MASTER_ADDR must be given explicitly).
    """
    hosts: List[str] = []
    # split on commas outside brackets
    parts, depth, current = [], 0, ""
    for ch in hostlist.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise ValueError(f"unbalanced brackets in host list {hostlist!r}")
    parts.append(current)
    for part in parts:
        part = part.strip()
        if not part:
            continue
        match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", part)
        if match is None:
            if "[" in part or "]" in part:
                raise ValueError(f"cannot parse host list entry {part!r}")
            hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for rng in ranges.split(","):
            if "-" in rng:
                lo, hi = rng.split("-", 1)
                if not (lo.isdigit() and hi.isdigit()):
                    raise ValueError(f"cannot parse host range {rng!r}")
                width = len(lo)
                hosts.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
            else:
                hosts.append(f"{prefix}{rng}{suffix}")
    return hosts


def _tasks_on_node(tasks_per_node: Optional[str], node_id: int) -> Optional[int]:
    """Tasks on node ``node_id`` from SLURM's "4(x2),3" notation."""
    if not tasks_per_node:
        return None
    counts: List[int] = []
    for item in tasks_per_node.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if match is None:
            return None
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts[node_id] if 0 <= node_id < len(counts) else None


def rank_environment(env: Mapping[str, str]) -> Optional[RankEnvironment]:
    """Ranks set by torchrun (takes precedence) or by srun with several tasks; None otherwise.

    A single process inside a SLURM job (``sbatch`` running ns-train directly, or ``srun -n 1``) is
    not a rank environment: it spawns one process per allocated GPU like a workstation run.
    """
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None and ("TORCHELASTIC_RUN_ID" in env or "LOCAL_RANK" in env):
        local_rank = _int(env, "LOCAL_RANK") or 0
        local_world = _int(env, "LOCAL_WORLD_SIZE") or world
        num_nodes = max(1, world // max(local_world, 1))
        return RankEnvironment(
            launcher="torchrun",
            rank=rank,
            world_size=world,
            local_rank=local_rank,
            local_world_size=local_world,
            node_rank=_int(env, "GROUP_RANK") or (rank // max(local_world, 1)),
            num_nodes=num_nodes,
            master_addr=env.get("MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT"),
        )
    # srun sets SLURM_STEP_NUM_TASKS for the tasks of a step; a batch script only has SLURM_NTASKS
    step_tasks = _int(env, "SLURM_STEP_NUM_TASKS")
    procid = _int(env, "SLURM_PROCID")
    if step_tasks is not None and step_tasks > 1 and procid is not None:
        node_id = _int(env, "SLURM_NODEID") or 0
        tasks_here = _tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE"), node_id)
        if tasks_here is None:
            tasks_here = _tasks_on_node(env.get("SLURM_TASKS_PER_NODE"), node_id) or step_tasks
        num_nodes = _int(env, "SLURM_STEP_NUM_NODES") or _int(env, "SLURM_NNODES") or 1
        master_addr = env.get("MASTER_ADDR")
        if not master_addr:
            nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
            if nodelist:
                try:
                    hosts = expand_hostlist(nodelist)
                    master_addr = hosts[0] if hosts else None
                except ValueError:
                    master_addr = None
        master_port = _int(env, "MASTER_PORT")
        if master_port is None:
            job_id = _int(env, "SLURM_JOB_ID")
            # same on every task of the job; in the unprivileged range, away from common services
            master_port = 20000 + (job_id % 20000) if job_id is not None else 29500
        return RankEnvironment(
            launcher="slurm",
            rank=procid,
            world_size=step_tasks,
            local_rank=_int(env, "SLURM_LOCALID") or 0,
            local_world_size=tasks_here,
            node_rank=node_id,
            num_nodes=num_nodes,
            master_addr=master_addr,
            master_port=master_port,
        )
    return None


def slurm_gpu_allocation(env: Mapping[str, str]) -> Optional[int]:
    """GPUs SLURM gave this job on this node (SLURM_GPUS_ON_NODE, else SLURM_STEP_GPUS / SLURM_JOB_GPUS)."""
    if "SLURM_JOB_ID" not in env:
        return None
    on_node = _int(env, "SLURM_GPUS_ON_NODE")
    if on_node is not None:
        return on_node
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        gpus = parse_device_list(env.get(name))
        if gpus is not None:
            return len(gpus)
    return None


def _visibility_note(env: Mapping[str, str]) -> str:
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    return f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""


# --- resolution ----------------------------------------------------------------------------------


def resolve_devices(
    requested: int,
    device_type: str,
    env: Mapping[str, str],
    cuda_device_count: int,
    num_machines: int = 1,
) -> DevicePlan:
    """How many processes and devices this job uses, and the one line that says so.

    ``requested`` is ``--machine.num-devices`` (0: all). ``cuda_device_count`` is what
    ``torch.cuda.device_count()`` reports in this process. Raises DeviceResolutionError with a
    message naming what to do when the request cannot be met.
    """
    if requested < 0:
        raise DeviceResolutionError(f"--machine.num-devices must be >= 0 (0 = all GPUs), got {requested}")
    ranks = rank_environment(env)
    if ranks is not None:
        return _resolve_external(requested, device_type, env, cuda_device_count, ranks)
    return _resolve_spawn(requested, device_type, env, cuda_device_count, num_machines)


def _resolve_external(
    requested: int, device_type: str, env: Mapping[str, str], cuda_count: int, ranks: RankEnvironment
) -> DevicePlan:
    who = "torchrun" if ranks.launcher == "torchrun" else "srun"
    if requested not in (0, 1, ranks.world_size):
        raise DeviceResolutionError(
            f"--machine.num-devices {requested} conflicts with {who}, which started {ranks.world_size} ranks "
            f"({ranks.local_world_size} on this node). Under {who} each process is one rank: leave "
            "--machine.num-devices at 0 and set the number of processes with "
            + ("--nproc-per-node / --nnodes." if who == "torchrun" else "--ntasks-per-node / --nodes.")
        )
    warnings: List[str] = []
    per_node = ranks.local_world_size
    nodes = (
        f"{ranks.num_nodes} node{'s' if ranks.num_nodes > 1 else ''} x {per_node} process{'es' if per_node > 1 else ''}"
    )
    # each process is one rank: ns-train's own launcher starts just this one
    from_ranks: Dict[str, Any] = dict(  # DevicePlan's fields that come from the ranks
        launcher=ranks.launcher,
        device_type=device_type,
        world_size=ranks.world_size,
        rank=ranks.rank,
        local_rank=ranks.local_rank,
        local_world_size=ranks.local_world_size,
        num_nodes=ranks.num_nodes,
        num_devices_for_launch=1,
        master_addr=ranks.master_addr,
        master_port=ranks.master_port,
        node_rank=ranks.node_rank,
    )
    if device_type != "cuda":
        return DevicePlan(
            **from_ranks,
            device_index=None,
            gpus_visible=0,
            message=f"splat-plus: using {ranks.world_size} CPU processes (0 GPUs) via {ranks.launcher} ({nodes}, gloo)",
        )
    if cuda_count == 0:
        raise DeviceResolutionError(
            f"{who} started {ranks.local_world_size} processes on this node but no CUDA GPU is visible"
            f"{_visibility_note(env)}. Give the job GPUs, or train on CPU with --machine.device-type cpu."
        )
    if cuda_count == 1 and ranks.local_world_size > 1:
        # one GPU bound per task (srun --gpus-per-task=1, or a per-rank CUDA_VISIBLE_DEVICES)
        device_index, per_node = 0, max(ranks.local_world_size, slurm_gpu_allocation(env) or 0)
    elif cuda_count >= ranks.local_world_size:
        device_index, per_node = ranks.local_rank, cuda_count
        if cuda_count > ranks.local_world_size:
            warnings.append(
                f"{who} started {ranks.local_world_size} processes on this node, which has {cuda_count} GPUs: "
                f"{cuda_count - ranks.local_world_size} stay idle (use {'--nproc-per-node' if who == 'torchrun' else '--ntasks-per-node'} "
                f"{cuda_count} to use them)."
            )
    else:
        raise DeviceResolutionError(
            f"{who} started {ranks.local_world_size} processes on this node but only {cuda_count} GPUs are "
            f"visible{_visibility_note(env)}: one GPU per process is needed. Start at most {cuda_count} "
            "processes per node."
        )
    total = per_node * ranks.num_nodes
    return DevicePlan(
        **from_ranks,
        device_index=device_index,
        gpus_visible=per_node,
        message=f"splat-plus: using {ranks.world_size} of {total} GPUs via {ranks.launcher} ({nodes}, NCCL)",
        warnings=tuple(warnings),
    )


def _resolve_spawn(
    requested: int,
    device_type: str,
    env: Mapping[str, str],
    cuda_count: int,
    num_machines: int,
) -> DevicePlan:
    def plan(n: int, visible: int, message: str, warnings: List[str]) -> DevicePlan:
        return DevicePlan(
            launcher="ns-train",
            device_type=device_type,
            world_size=n * max(num_machines, 1),
            rank=0,
            local_rank=0,
            local_world_size=n,
            num_nodes=max(num_machines, 1),
            num_devices_for_launch=n,
            device_index=0 if (device_type == "cuda" and n == 1) else None,
            gpus_visible=visible,
            message=message,
            warnings=tuple(warnings),
        )

    if device_type != "cuda":
        if requested > 1:
            raise DeviceResolutionError(
                f"--machine.num-devices {requested} with --machine.device-type {device_type}: ns-train's own "
                "launcher can only spawn several processes on CUDA GPUs. For several CPU processes (gloo) use "
                f"torchrun: torchrun --nproc-per-node {requested} $(which ns-train) splat-plus ... "
                f"--machine.device-type {device_type}"
            )
        return plan(1, 0, f"splat-plus: using 1 {device_type.upper()} process (0 GPUs) via ns-train", [])

    warnings: List[str] = []
    if cuda_count == 0:
        allocated = slurm_gpu_allocation(env)
        hint = f" although SLURM allocated {allocated}" if allocated else ""
        raise DeviceResolutionError(
            f"no CUDA GPU is visible{_visibility_note(env)}{hint}. Check the driver / CUDA_VISIBLE_DEVICES, "
            "or train on CPU with --machine.device-type cpu."
        )
    available, source = cuda_count, "visible"
    allocated = slurm_gpu_allocation(env)
    if allocated is not None and allocated > 0:
        if allocated < cuda_count:
            # SLURM without device confinement: stay within the allocation
            available, source = allocated, f"allocated by SLURM, {cuda_count} visible"
        elif allocated > cuda_count:
            warnings.append(
                f"SLURM allocated {allocated} GPUs on this node but only {cuda_count} are visible"
                f"{_visibility_note(env)}; using the visible ones."
            )
    if requested > available:
        raise DeviceResolutionError(
            f"--machine.num-devices {requested} but this job has only {available} GPU"
            f"{'s' if available != 1 else ''} ({source}{_visibility_note(env) if source == 'visible' else ''}). "
            f"Use --machine.num-devices {available} or leave it at 0 (all GPUs)."
        )
    n = requested if requested > 0 else available
    if n < available:
        warnings.append(
            f"--machine.num-devices {n}: {available - n} of this job's {available} GPUs stay idle "
            "(leave --machine.num-devices at 0 to use them all)."
        )
    how = "ns-train (one process)" if n == 1 else "ns-train (spawned processes, NCCL)"
    machines = f" on each of {num_machines} machines" if num_machines > 1 else ""
    message = f"splat-plus: using {n} of {available} GPUs{machines} via {how}"
    if source != "visible":
        message += f" [{source}]"
    return plan(n, available, message, warnings)
