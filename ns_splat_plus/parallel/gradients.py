"""Gradient averaging across ranks: :func:`average_gradients` (every rank applies the same update)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, List, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from ns_splat_plus.parallel import collectives


def average_gradients(params: Iterable[Tensor]) -> None:
    """Replace every gradient by its mean over all ranks; a no-op in a single process.

    One all_reduce per (device, dtype) bucket on a flattened buffer. A parameter without gradient on
    this rank contributes zeros; one without gradient on every rank keeps ``grad is None``. Every rank
    must pass the same parameters in the same order. No host-device synchronisation unless a
    gradient is missing on this rank (then its presence flags are read back).
    """
    if not collectives.is_distributed():
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
