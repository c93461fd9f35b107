"""Launching ranks: devices resolved, process group joined, gsplat built once (:func:`prepare_launch`).

Data-parallel splat-plus over torch.distributed, without nerfstudio's DDP wrapper.

One training step on W ranks: every rank renders a different camera (a disjoint shard of one shared
permutation, :func:`camera_for_step`), backpropagates its own loss, then :func:`average_gradients`
all-reduces the gradients (:mod:`.gradients`) so every rank applies the same optimizer step.
Densification statistics are reduced and its random draws made identical in :mod:`ns_splat_plus.strategy`,
so every replica takes the same refine decisions; :class:`RankMonitor` checks that cheaply every
``replica_check_every`` steps and bitwise at the end, and any divergence is a clear error.

Launch path (``prepare_launch``, called from ``SplatPlusTrainerConfig.set_timestamp``, the first
thing ns-train's ``main`` calls): resolve the devices (:mod:`ns_splat_plus.parallel.devices`); under torchrun /
srun join the process group from the environment; build gsplat's CUDA extension once (global rank 0
first, then one process per node, then the rest); scale the schedule for W ranks x B cameras
per step (:func:`scale_schedule`). Ranks that joined check that they were given the same options
(:mod:`.agreement`). With ``ns-train --machine.num-devices N`` nerfstudio spawns the ranks after
that; the schedule is scaled and gsplat built in the parent before the spawn.

A rank that dies: mp.spawn (ns-train) and torchrun terminate the other processes as soon as one exits
with an error; srun does with ``--kill-on-bad-exit=1``. A rank that hangs or vanishes without exiting
(node failure) makes the others' next collective fail after ``--data-parallel.timeout-minutes``
(the process group timeout; NCCL's watchdog aborts the communicator, TORCH_NCCL_ASYNC_ERROR_HANDLING);
the ranks still running then name the one that did not answer (:mod:`.roll_call`).
"""

from __future__ import annotations

import atexit
import os
import random
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import MutableMapping, Optional

import numpy as np
import torch
import torch.distributed as dist
from nerfstudio.utils.rich_utils import CONSOLE
from rich.markup import escape

from ns_splat_plus import errors, upstream
from ns_splat_plus.errors import SplatPlusError, exit_on_user_error
from ns_splat_plus.parallel import agreement, collectives, devices, roll_call
from ns_splat_plus.parallel.config import DataParallelConfig
from ns_splat_plus.parallel.devices import DevicePlan, DeviceResolutionError
from ns_splat_plus.parallel.schedule import effective_batch, resolve_cameras_per_step, scale_schedule, steps_scaler_of

# --- process state ---------------------------------------------------------------------------------

_PLAN: Optional[DevicePlan] = None
_GSPLAT_BUILT = False
_OWNS_GROUP = False
_FINISHED_CLEANLY = False


def mark_finished_cleanly() -> None:
    """Called after the final replica check: the process group may then be torn down at exit."""
    global _FINISHED_CLEANLY
    _FINISHED_CLEANLY = True


def _end_of_process() -> None:
    """At exit (``atexit``, registered once the process is in a group): after a clean finish, the group
    is torn down; after a stop whose message was shown (:func:`errors.exit_with`) or an uncaught exception
    (status 1, its traceback printed), the process ends here with that status, before the interpreter is
    finalized. A collective's work can still hold tensors in
    gloo's worker threads (the stop may follow it by milliseconds, e.g. ranks that disagree); released
    during finalization they need the GIL and abort the process (SIGABRT instead of the status; seen
    about once in 25 runs on a loaded CPU machine; pytorch/pytorch#179291). Nothing is left to finish:
    the handlers registered later (e.g. a writer's) have run, records are written as they happen."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return
    if _FINISHED_CLEANLY:
        if _OWNS_GROUP:  # only after a clean finish: tearing down NCCL while a peer is dead can block
            dist.destroy_process_group()
        return
    status = errors.recorded_exit_status()
    if status is None and _uncaught_exception_printed():
        status = 1  # Python's status for an uncaught exception (a bug): its traceback is out, the same race follows
    if status is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _uncaught_exception_printed() -> bool:
    """Whether the process is ending on an uncaught exception: Python sets ``sys.last_exc`` (3.12) and
    ``sys.last_value`` before it calls ``sys.excepthook`` on one."""
    return getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None


_END_REGISTERED = False


def _register_end_of_process() -> None:
    global _END_REGISTERED
    if not _END_REGISTERED:
        atexit.register(_end_of_process)
        _END_REGISTERED = True


def init_process_group(plan: DevicePlan, timeout: timedelta, env: Optional[MutableMapping[str, str]] = None) -> None:
    """Join the job's process group from the environment (env://): torchrun's or srun's ranks."""
    global _OWNS_GROUP
    if dist.is_initialized():
        return
    env = os.environ if env is None else env
    if plan.master_addr is None:
        raise DeviceResolutionError(
            "cannot tell the address of rank 0: set MASTER_ADDR (in SLURM: "
            'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1))'
        )
    # torchrun sets these already; under srun we derive them from SLURM's variables
    env["MASTER_ADDR"] = plan.master_addr
    env["MASTER_PORT"] = str(plan.master_port or 29500)
    env["RANK"] = str(plan.rank)
    env["WORLD_SIZE"] = str(plan.world_size)
    env["LOCAL_RANK"] = str(plan.local_rank)
    env["LOCAL_WORLD_SIZE"] = str(plan.local_world_size)
    if plan.device_type == "cuda":
        torch.cuda.set_device(plan.device_index)
    dist.init_process_group(
        backend="nccl" if plan.device_type == "cuda" else "gloo",
        init_method="env://",
        rank=plan.rank,
        world_size=plan.world_size,
        timeout=timeout,
    )
    _OWNS_GROUP = True
    _register_end_of_process()
    set_node_local_group(plan.node_rank)


def node_groups(node_of_rank: list) -> list:
    """Ranks of each node, nodes in order of their first rank: ``[[0, 2], [1, 3]]`` for SLURM's
    cyclic placement of 4 tasks on 2 nodes (not the blocks ``[[0, 1], [2, 3]]``)."""
    order: list = []
    for node in node_of_rank:
        if node not in order:
            order.append(node)
    return [[r for r, n in enumerate(node_of_rank) if n == node] for node in order]


def set_node_local_group(node_rank: int) -> None:
    """nerfstudio's ``comms.get_local_rank()`` needs its per-node process group, which only its own
    launcher makes. Built from every rank's node id (SLURM_NODEID / torchrun's GROUP_RANK), so that
    any placement of ranks on nodes (blocks or cyclic) gives the right groups."""
    if upstream.local_process_group() is not None:
        return
    groups = node_groups(collectives.all_gather_object(int(node_rank)))
    rank = collectives.get_rank()
    for ranks in groups:  # every rank creates every group, in the same order (new_group is collective)
        group = dist.new_group(ranks)
        if rank in ranks:
            upstream.set_local_process_group(group)


GSPLAT_BUILD_NOTICE_AFTER_S = 5.0
"""gsplat loads its built extension in about a second. Longer means torch's JIT build is compiling it: its first
use, or new build settings (torch, CUDA, TORCH_CUDA_ARCH_LIST: ninja sees other flags). That takes minutes and
gsplat prints nothing when an older build exists (211 s on an H200 host after TORCH_CUDA_ARCH_LIST changed,
benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality), so the run says so once this much time has passed."""


def load_gsplat_extension(notice_after_s: float = GSPLAT_BUILD_NOTICE_AFTER_S):
    """gsplat's CUDA extension (None without a CUDA toolkit), with one line when loading it turns into a build."""
    started = time.perf_counter()
    notice = threading.Timer(
        notice_after_s,
        lambda: CONSOLE.print(
            "splat-plus: gsplat is compiling its CUDA extension: a few minutes, once for each set of build settings "
            "(its first use, or another torch, CUDA or TORCH_CUDA_ARCH_LIST than its last build)",
            markup=False,
        ),
    )
    notice.daemon = True  # an interrupted build does not wait for it
    notice.start()
    try:
        extension = upstream.gsplat_extension()
    finally:
        notice.cancel()
    took = time.perf_counter() - started
    if took >= notice_after_s:
        CONSOLE.print(f"splat-plus: gsplat's CUDA extension ready after {took:.0f} s", markup=False)
    return extension


def build_gsplat_once(plan: DevicePlan) -> None:
    """Build (or load) gsplat's CUDA extension before ranks train: concurrent first builds collide.

    ns-train: the parent builds before spawning. torchrun / srun: global rank 0 builds first, then
    local rank 0 of every other node (in case nodes do not share the build cache), then the rest.
    """

    def build() -> None:
        if load_gsplat_extension() is None:
            raise SplatPlusError(
                "gsplat's CUDA extension is not available (no CUDA toolkit / nvcc found to build it). "
                "Install the CUDA toolkit matching your PyTorch, or train on CPU with --machine.device-type cpu."
            )

    if not plan.external_ranks or not collectives.is_distributed():
        build()
        return
    if plan.rank == 0:
        build()
    collectives.barrier()
    if plan.local_rank == 0 and plan.rank != 0:
        build()
    collectives.barrier()
    if plan.local_rank != 0:
        build()


def launch_rank() -> int:
    """This process's global rank before it joins the process group: torchrun's or srun's, else 0. An option
    refused at launch is then said by rank 0 alone; every rank read the same command line."""
    ranks = devices.rank_environment(os.environ)
    return 0 if ranks is None else ranks.rank


def prepare_launch(config) -> DevicePlan:
    """Everything that must happen before ranks start; idempotent. ``config``: SplatPlusTrainerConfig.

    Resolves devices (exits with one clear message when the request cannot be met), joins the
    process group under torchrun / srun, builds gsplat once, scales the schedule for W ranks, and sets
    ``config.machine.num_devices`` to what nerfstudio's launch must spawn. Per process, the group is
    joined and gsplat built once; every config passed in is resolved and scaled (once per config).
    """
    global _PLAN, _GSPLAT_BUILT
    machine = config.machine
    cuda_count = torch.cuda.device_count() if machine.device_type == "cuda" else 0
    try:
        plan = devices.resolve_devices(
            machine.num_devices, machine.device_type, os.environ, cuda_count, machine.num_machines
        )
    except DeviceResolutionError as error:  # the one message on stderr, as every user error (was stdout)
        with exit_on_user_error():
            raise error from None
    dp: DataParallelConfig = config.data_parallel
    if plan.external_ranks:
        joining = not dist.is_initialized()
        try:
            init_process_group(plan, timedelta(minutes=dp.timeout_minutes))
        except DeviceResolutionError as error:  # the one message on stderr, as every user error (was stdout)
            with exit_on_user_error():
                raise error from None
        if joining and collectives.is_distributed():
            roll_call.install_announcer()  # a user error is printed once, by the rank that found it
            with exit_on_user_error():  # before the first collective that options could make differ
                agreement.agree_on_options(config)
    if plan.rank == 0:
        CONSOLE.print(plan.message, markup=False, highlight=False)
        for warning in plan.warnings:
            CONSOLE.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    if machine.device_type == "cuda" and not _GSPLAT_BUILT:
        build_gsplat_once(plan)
        _GSPLAT_BUILT = True
    machine.num_devices = plan.num_devices_for_launch
    chosen = resolve_cameras_per_step(config, plan.world_size)
    if plan.rank == 0 and chosen is not None:
        CONSOLE.print(
            f"splat-plus: --pipeline.datamanager.cameras-per-step auto: {chosen} per rank on {plan.world_size} "
            f"rank{'s' if plan.world_size > 1 else ''} ({plan.world_size * chosen} cameras per step)",
            markup=False,
        )
    batch = effective_batch(config, plan.world_size)
    # W x B cameras per step (also one GPU with B > 1) and --steps-scaler; nothing when neither applies
    changes = scale_schedule(config, batch, dp)
    if plan.rank == 0 and changes:
        steps_scaler = steps_scaler_of(config)
        ranks = f"{plan.world_size} rank" + ("s" if plan.world_size > 1 else "")
        reasons = [f"{ranks} x {batch // plan.world_size} cameras per step"] if batch > 1 else []
        reasons += [f"--steps-scaler {steps_scaler:g}"] if steps_scaler != 1.0 else []
        CONSOLE.print(f"splat-plus: schedule for {' and '.join(reasons)}: " + "; ".join(changes), markup=False)
    _PLAN = plan
    return plan


@dataclass(frozen=True)
class ProcessContext:
    rank: int
    local_rank: int
    world_size: int
    device: str


def setup_process(config, local_rank: int, world_size: int) -> ProcessContext:
    """This process's rank and device, for SplatPlusTrainer.__init__ (sets the CUDA device).

    Spawned by ns-train: the process group exists and ``local_rank`` is the GPU. torchrun / srun:
    the group was joined in :func:`prepare_launch` (joined here if it was skipped).
    """
    plan = _PLAN
    if not dist.is_initialized() and devices.rank_environment(os.environ) is not None:
        plan = prepare_launch(config)
    device_type = config.machine.device_type
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
        if plan is not None and plan.external_ranks:
            local_rank, device_index = plan.local_rank, plan.device_index
        else:
            device_index = local_rank
    else:
        rank, device_index = 0, local_rank
    if device_type == "cuda":
        torch.cuda.set_device(device_index)
        device = f"cuda:{device_index}"
    else:
        device = device_type
    if world_size > 1:
        _register_end_of_process()  # also in ranks spawned by ns-train (nerfstudio's group)
        roll_call.register_rank()  # its pid and host, named should it stop answering
        roll_call.install_announcer()  # also in ranks spawned by ns-train, which joined nerfstudio's group
        # rank-specific randomness (e.g. random backgrounds) the same way under every launcher;
        # initialization and densification draw from their own generators, identical on all ranks
        seed = config.machine.seed + rank
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
    return ProcessContext(rank=rank, local_rank=local_rank, world_size=world_size, device=device)
