"""Data-parallel splat-plus over torch.distributed, without nerfstudio's DDP wrapper.

One training step on W ranks: every rank renders a different camera (a disjoint shard of one shared
permutation, :func:`camera_for_step`), backpropagates its own loss, then :func:`average_gradients`
all-reduces the gradients (one flattened buffer) so every rank applies the same optimizer step.
Densification statistics are reduced and its random draws made identical in :mod:`ns_splat_plus.densify`,
so every replica takes the same refine decisions; :class:`RankMonitor` checks that cheaply every
``replica_check_every`` steps and bitwise at the end, and any divergence is a clear error.

Launch path (``prepare_launch``, called from ``SplatPlusTrainerConfig.set_timestamp``, the first
thing ns-train's ``main`` calls): resolve the devices (:mod:`ns_splat_plus.devices`); under torchrun /
srun join the process group from the environment; build gsplat's CUDA extension once (global rank 0
first, then one process per node, then the rest); scale the schedule for W ranks
(:func:`scale_schedule`). With ``ns-train --machine.num-devices N`` nerfstudio spawns the ranks after
that; the schedule is scaled and gsplat built in the parent before the spawn.

A rank that dies: mp.spawn (ns-train) and torchrun terminate the other processes as soon as one exits
with an error; srun does with ``--kill-on-bad-exit=1``. A rank that hangs or vanishes without exiting
(node failure) makes the others' next collective fail after ``--data-parallel.timeout-minutes``
(the process group timeout; NCCL's watchdog aborts the communicator, TORCH_NCCL_ASYNC_ERROR_HANDLING).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import math
import os
import random
from collections import OrderedDict
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from nerfstudio.configs.base_config import PrintableConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.utils.rich_utils import CONSOLE
from rich.markup import escape

from ns_splat_plus import devices
from ns_splat_plus.devices import DevicePlan, DeviceResolutionError


class ReplicaDivergenceError(RuntimeError):
    """Ranks that should hold identical parameters do not."""


@dataclass
class DataParallelConfig(PrintableConfig):
    """How training on W ranks differs from one (see README, "Several GPUs")."""

    scale_schedule: bool = True
    """Divide every step count (total steps, refine interval / start / stop, SH and resolution schedules, LR-scheduler steps, eval and save intervals) by W: each step sees W cameras."""
    lr_scaling: Literal["sqrt", "linear", "none"] = "sqrt"
    """Multiply every learning rate by sqrt(W) (Grendel-GS, "On Scaling Up 3D Gaussian Splatting Training"), by W, or not at all."""
    scale_adam_betas: bool = True
    """Adam momentum over W-times larger batches: beta -> beta**W (Grendel-GS)."""
    replica_check_every: int = 100
    """Compare a checksum of the parameters across ranks every this many steps (0: only at the end)."""
    timeout_minutes: float = 15.0
    """Process-group timeout for torchrun / srun: a rank stuck longer than this in a collective (a peer that vanished) stops with an error. ns-train's own spawn uses nerfstudio's 30 minutes."""
    scaled_for_world_size: int = 0
    """Set by splat-plus: the W this config's schedule was already scaled for (0: not scaled)."""


@dataclass
class AdamWithBetasOptimizerConfig(AdamOptimizerConfig):
    """nerfstudio's Adam config with explicit betas (for the data-parallel momentum rule)."""

    betas: Tuple[float, float] = (0.9, 0.999)


# --- process state ---------------------------------------------------------------------------------

_PLAN: Optional[DevicePlan] = None
_GSPLAT_BUILT = False
_OWNS_GROUP = False
_FINISHED_CLEANLY = False


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def is_main_process() -> bool:
    return get_rank() == 0


def _collective_device() -> torch.device:
    if dist.get_backend() == dist.Backend.NCCL:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def barrier() -> None:
    if not is_distributed():
        return
    if dist.get_backend() == dist.Backend.NCCL:
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` of rank ``src`` on every rank (itself without torch.distributed)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def _destroy_if_clean() -> None:
    # Only after a clean finish: tearing down NCCL while a peer is dead can block.
    if _OWNS_GROUP and _FINISHED_CLEANLY and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def init_process_group(plan: DevicePlan, timeout: timedelta, env: Optional[Dict[str, str]] = None) -> None:
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
    atexit.register(_destroy_if_clean)
    # nerfstudio's comms.get_local_rank() needs its per-node group (as its own launcher makes)
    from nerfstudio.utils import comms

    if comms.LOCAL_PROCESS_GROUP is None and plan.world_size % plan.local_world_size == 0:
        for node in range(plan.world_size // plan.local_world_size):
            ranks = list(range(node * plan.local_world_size, (node + 1) * plan.local_world_size))
            group = dist.new_group(ranks)
            if plan.rank in ranks:
                comms.LOCAL_PROCESS_GROUP = group


def build_gsplat_once(plan: DevicePlan) -> None:
    """Build (or load) gsplat's CUDA extension before ranks train: concurrent first builds collide.

    ns-train: the parent builds before spawning. torchrun / srun: global rank 0 builds first, then
    local rank 0 of every other node (in case nodes do not share the build cache), then the rest.
    """

    def build() -> None:
        from gsplat.cuda import _backend

        if _backend._C is None:
            raise RuntimeError(
                "gsplat's CUDA extension is not available (no CUDA toolkit / nvcc found to build it). "
                "Install the CUDA toolkit matching your PyTorch, or train on CPU with --machine.device-type cpu."
            )

    if not plan.external_ranks or not is_distributed():
        build()
        return
    if plan.rank == 0:
        build()
    barrier()
    if plan.local_rank == 0 and plan.rank != 0:
        build()
    barrier()
    if plan.local_rank != 0:
        build()


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
    except DeviceResolutionError as error:
        CONSOLE.print(f"[bold red]error:[/bold red] {escape(str(error))}")
        raise SystemExit(2) from None
    dp: DataParallelConfig = config.data_parallel
    if plan.external_ranks:
        try:
            init_process_group(plan, timedelta(minutes=dp.timeout_minutes))
        except DeviceResolutionError as error:
            CONSOLE.print(f"[bold red]error:[/bold red] {escape(str(error))}")
            raise SystemExit(2) from None
    if plan.rank == 0:
        CONSOLE.print(plan.message, markup=False, highlight=False)
        for warning in plan.warnings:
            CONSOLE.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    if machine.device_type == "cuda" and not _GSPLAT_BUILT:
        build_gsplat_once(plan)
        _GSPLAT_BUILT = True
    machine.num_devices = plan.num_devices_for_launch
    if plan.world_size > 1:
        changes = scale_schedule(config, plan.world_size, dp)
        if plan.rank == 0 and changes:
            CONSOLE.print(f"splat-plus: schedule for {plan.world_size} ranks: " + "; ".join(changes), markup=False)
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
        # rank-specific randomness (e.g. random backgrounds) the same way under every launcher;
        # initialization and densification draw from their own generators, identical on all ranks
        seed = config.machine.seed + rank
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
    return ProcessContext(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


# --- gradients -------------------------------------------------------------------------------------


def average_gradients(params: Iterable[Tensor]) -> None:
    """Replace every gradient by its mean over all ranks; a no-op in a single process.

    One all_reduce per (device, dtype) bucket on a flattened buffer. A parameter without gradient on
    this rank contributes zeros; one without gradient on every rank keeps ``grad is None``. Every rank
    must pass the same parameters in the same order. No host-device synchronisation unless a
    gradient is missing on this rank (then its presence flags are read back).
    """
    if not is_distributed():
        return
    buckets: "OrderedDict[Tuple[torch.device, torch.dtype], List[Tensor]]" = OrderedDict()
    for p in params:
        buckets.setdefault((p.device, p.dtype), []).append(p)
    world = dist.get_world_size()
    for (device, dtype), ps in buckets.items():
        present = [p.grad is not None for p in ps]
        if all(present):  # the usual case: flags made on the device (a host tensor copied over would synchronise)
            flags = torch.ones(len(ps), dtype=dtype, device=device)
        else:
            flags = torch.tensor(present, dtype=dtype, device=device)
        flat = torch.cat([flags] + [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in ps])
        dist.all_reduce(flat)
        flat.div_(world)
        counts = None
        offset = len(ps)
        for i, p in enumerate(ps):
            n = p.numel()
            mean = flat[offset : offset + n].view_as(p)
            offset += n
            if present[i]:
                p.grad.copy_(mean)
            else:
                if counts is None:  # reading the flags synchronises; only needed when a gradient is missing
                    counts = flat[: len(ps)].tolist()
                if counts[i] > 0:
                    p.grad = mean.clone()


# --- replica checks ----------------------------------------------------------------------------------


def _param_stats(named: Mapping[str, Tensor]) -> Tensor:
    rows = []
    for name in sorted(named):
        t = named[name].detach()
        t64 = t.to(torch.float64)
        rows.append(torch.stack([torch.tensor(float(t.numel()), dtype=torch.float64, device=t.device), t64.sum(), t64.abs().sum()]))
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.float64)


def check_replicas(named: Mapping[str, Tensor], step: int) -> None:
    """Raise ReplicaDivergenceError on every rank if any rank's parameters differ from rank 0's.

    Compares (count, sum, sum of |x|) per parameter in float64, bit for bit: replicas apply the same
    averaged gradients and refine decisions, so they stay bitwise identical.
    """
    if not is_distributed():
        return
    stats = _param_stats(named).to(_collective_device())
    gathered = [torch.empty_like(stats) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, stats)
    names = sorted(named)
    reference = gathered[0].view(torch.int64)
    for r, other in enumerate(gathered[1:], start=1):
        if not torch.equal(other.view(torch.int64), reference):
            a, b = gathered[0].view(-1, 3).cpu(), other.view(-1, 3).cpu()
            differing = [
                f"{names[i]} (elements {int(a[i, 0])} vs {int(b[i, 0])}, sum {a[i, 1].item():.9g} vs {b[i, 1].item():.9g})"
                for i in range(len(names))
                if not torch.equal(a[i], b[i])
            ]
            raise ReplicaDivergenceError(
                f"step {step}: rank {r}'s parameters differ from rank 0's: {', '.join(differing)}. "
                "The replicas no longer train the same model (non-identical densification or a missed "
                "gradient all-reduce); stopping instead of producing a silently wrong result."
            )


def parameter_checksum(named: Mapping[str, Tensor]) -> str:
    """SHA-256 (16 hex digits) of names, shapes and bytes of the tensors, in name order."""
    digest = hashlib.sha256()
    for name in sorted(named):
        t = named[name].detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()[:16]


class RankMonitor:
    """Per-rank bookkeeping of a data-parallel run: checksums logged, compared and written.

    ``<run dir>/ranks/rank<r>.json`` holds, per rank: the initial checksum of every rank, the final
    parameter checksum and Gaussian count, and how many replica checks passed.
    """

    def __init__(self, trainer, config: DataParallelConfig) -> None:
        self.trainer = trainer
        self.config = config
        self.rank = get_rank()
        self.world_size = get_world_size()
        self.checks_passed = 0
        self.record: Dict[str, Any] = {"rank": self.rank, "world_size": self.world_size}

    @property
    def enabled(self) -> bool:
        return is_distributed()

    def _model(self):
        return self.trainer.pipeline.model

    def _named_params(self) -> Dict[str, Tensor]:
        return {name: p for name, p in self._model().named_parameters()}

    def _write(self) -> None:
        path = Path(self.trainer.base_dir) / "ranks" / f"rank{self.rank}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.record, indent=2))

    def record_initial(self) -> None:
        if not self.enabled:
            return
        local = getattr(self._model(), "initial_checksum", None)
        gathered: List[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, local)
        CONSOLE.log(f"rank {self.rank} of {self.world_size}: initial Gaussians checksum {local}")
        self.record.update(
            {
                "device": str(self.trainer.device),
                "initial_checksum": local,
                "initial_checksums": gathered,
                "initial_match": all(c == gathered[0] for c in gathered),
            }
        )
        if self.rank == 0:
            CONSOLE.log(f"initial Gaussians identical on all {self.world_size} ranks: checksum {gathered[0]}")
        self._write()

    def after_iteration(self, step: int) -> None:
        every = self.config.replica_check_every
        if self.enabled and every > 0 and step > 0 and step % every == 0:
            check_replicas(self._named_params(), step)
            self.checks_passed += 1

    def after_train(self, step: int) -> None:
        global _FINISHED_CLEANLY
        if not self.enabled:
            return
        params = self._named_params()
        local = parameter_checksum(params)
        gathered: List[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, local)
        gauss = getattr(self._model(), "gauss_params", None)
        num_gaussians = int(gauss["means"].shape[0]) if gauss is not None else None
        self.record.update(
            {
                "final_step": step,
                "final_checksum": local,
                "final_checksums": gathered,
                "final_num_gaussians": num_gaussians,
                "replica_checks_passed": self.checks_passed,
            }
        )
        self._write()
        mismatched = [r for r, c in enumerate(gathered) if c != gathered[0]]
        if mismatched:
            raise ReplicaDivergenceError(
                f"after step {step} the parameters of ranks {mismatched} differ from rank 0's (checksums {gathered})"
            )
        if self.rank == 0:
            CONSOLE.log(
                f"final parameters identical on all {self.world_size} ranks: {num_gaussians} Gaussians, checksum {local}"
            )
        barrier()
        _FINISHED_CLEANLY = True

    def callbacks(self) -> list:
        from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

        if not self.enabled:
            return []
        return [
            TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], self.after_iteration),
            TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN], self.after_train),
        ]


# --- camera sharding ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _epoch_permutation(seed: int, epoch: int, num_cameras: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(num_cameras)


def camera_for_step(step: int, rank: int, world_size: int, num_cameras: int, seed: int) -> int:
    """The training camera of ``rank`` at ``step``: a stateless function, identical on every rank.

    The sequence of draws ``step * world_size + rank`` walks through one permutation per epoch
    (seeded by ``seed`` and the epoch), so within a step the ranks take consecutive, distinct entries:
    disjoint shards, every camera once per epoch, and a resumed run picks up the same order.
    """
    if num_cameras <= 0:
        raise ValueError("no training cameras")
    draw = step * world_size + rank
    epoch, position = divmod(draw, num_cameras)
    return int(_epoch_permutation(int(seed), int(epoch), int(num_cameras))[position])


# --- schedule scaling ----------------------------------------------------------------------------------

# Model-config fields counted in steps (splatfacto's, plus MCMC-style names where a config has them).
MODEL_STEP_FIELDS = (
    "warmup_length",
    "refine_every",
    "stop_split_at",
    "stop_screen_size_at",
    "sh_degree_interval",
    "resolution_schedule",
    "refine_start_iter",
    "refine_stop_iter",
)
TRAINER_STEP_FIELDS = ("max_num_iterations", "steps_per_eval_image", "steps_per_eval_all_images", "steps_per_save", "steps_per_eval_batch")
SCHEDULER_STEP_FIELDS = ("max_steps", "warmup_steps")


def scaled_steps(steps: int, world_size: int) -> int:
    """ceil(steps / W), at least 1 for a positive count (0 stays 0: "never")."""
    if steps <= 0:
        return steps
    return max(1, math.ceil(steps / world_size))


def lr_factor(world_size: int, rule: str) -> float:
    if rule == "sqrt":
        return math.sqrt(world_size)
    if rule == "linear":
        return float(world_size)
    if rule == "none":
        return 1.0
    raise ValueError(f"unknown lr scaling rule {rule!r} (sqrt, linear or none)")


def scale_schedule(config, world_size: int, dp: DataParallelConfig) -> List[str]:
    """Scale ``config`` (a SplatPlusTrainerConfig) in place for ``world_size`` ranks; returns what changed.

    The rule: each step processes W cameras (one per rank), so W ranks do the single-GPU run's work
    in 1/W of the steps. Every step count is divided by W (rounded up): total steps, refine interval,
    refine start (warmup_length) and stop, screen-size stop, SH-degree interval, resolution schedule,
    LR-scheduler max/warmup steps, eval and checkpoint intervals (the opacity reset is counted in
    refine intervals, so it follows). Gradients are averaged over W cameras, so learning rates are
    multiplied by sqrt(W) (``lr_scaling``) and Adam's betas raised to the power W
    (``scale_adam_betas``), as Grendel-GS does for batched training. Applied once per config.
    """
    if world_size <= 1 or not dp.scale_schedule:
        return []
    if dp.scaled_for_world_size:
        if dp.scaled_for_world_size != world_size:
            raise DeviceResolutionError(
                f"this config's schedule was already scaled for {dp.scaled_for_world_size} ranks, but this run "
                f"has {world_size}; start from the method's defaults (not --load-config) to rescale"
            )
        return []
    changes: List[str] = []

    def scale_attr(obj, name: str, label: str) -> None:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            new = scaled_steps(value, world_size)
            setattr(obj, name, new)
            changes.append(f"{label} {value}->{new}")

    for name in TRAINER_STEP_FIELDS:
        scale_attr(config, name, name)
    model = config.pipeline.model
    for name in MODEL_STEP_FIELDS:
        scale_attr(model, name, name)

    factor = lr_factor(world_size, dp.lr_scaling)
    optimizers = dict(config.optimizers)
    for group, entry in optimizers.items():
        entry = dict(entry)
        opt = entry.get("optimizer")
        if opt is not None:
            if factor != 1.0:
                opt.lr = opt.lr * factor
            if dp.scale_adam_betas and opt._target is torch.optim.Adam:
                if not isinstance(opt, AdamWithBetasOptimizerConfig):
                    values = {f.name: getattr(opt, f.name) for f in fields(opt) if f.name != "_target"}
                    opt = AdamWithBetasOptimizerConfig(**values)
                opt.betas = (opt.betas[0] ** world_size, opt.betas[1] ** world_size)
                entry["optimizer"] = opt
        sched = entry.get("scheduler")
        if sched is not None:
            for name in SCHEDULER_STEP_FIELDS:
                scale_attr(sched, name, f"{group}.{name}")
            if factor != 1.0:
                for name in ("lr_final", "lr_pre_warmup"):
                    if getattr(sched, name, None) is not None:
                        setattr(sched, name, getattr(sched, name) * factor)
        optimizers[group] = entry
    config.optimizers = optimizers
    if factor != 1.0:
        changes.append(f"learning rates x{factor:.3g} ({dp.lr_scaling}(W))")
    if dp.scale_adam_betas:
        changes.append(f"Adam betas ^{world_size}")
    dp.scaled_for_world_size = world_size
    return changes
