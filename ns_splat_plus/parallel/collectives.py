"""The one collectives API of splat-plus: rank, world size and the few collectives it uses.

Every module asks here (never ``torch.distributed`` directly) so that a single process, gloo on
the CPU and NCCL on GPUs behave alike: without an initialised process group every call is the
single-process answer (rank 0 of 1, reductions are no-ops).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import Tensor

ReduceOp = Literal["SUM", "MAX", "MIN"]


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """Global rank of this process (0 without torch.distributed)."""
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    """Number of ranks (1 without torch.distributed)."""
    return dist.get_world_size() if is_initialized() else 1


def is_distributed() -> bool:
    """True with more than one rank."""
    return get_world_size() > 1


def is_main_process() -> bool:
    return get_rank() == 0


def collective_device() -> torch.device:
    """Where tensors of collectives must live: this rank's GPU under NCCL, else the CPU."""
    if is_initialized() and dist.get_backend() == dist.Backend.NCCL:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce(tensor: Tensor, op: ReduceOp = "SUM") -> Tensor:
    """In-place all-reduce of ``tensor`` over every rank (a no-op in one process); returns it."""
    if is_distributed():
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
    return tensor


def any_rank(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` holds on any rank; every rank gets the same answer (no rank raises alone)."""
    if not is_distributed():
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    all_reduce(value, "MAX")
    return bool(value.item() > 0)


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


def all_gather_object(obj: Any) -> list:
    """Every rank's ``obj``, in rank order (``[obj]`` in one process)."""
    if not is_distributed():
        return [obj]
    gathered: list = [None] * get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered
