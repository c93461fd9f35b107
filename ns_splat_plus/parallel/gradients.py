"""Gradient averaging across ranks, so that every rank applies the same update.

Entry points: :func:`start_gradient_averaging` (before the backward pass: each gradient's all-reduce
starts as soon as autograd has accumulated it) and :func:`average_gradients` (before the optimizer
step: finishes the averaging in flight, or does all of it at once when none was started).

Both paths issue the same collectives on the same buffers, in the same order: one in-place
``all_reduce(SUM)`` per parameter gradient (no flat copy), in the order of the parameter list, then
one small all-reduce of the presence flags; each sum is then divided by the world size. Only the
time at which each all-reduce starts differs, so the two give bitwise the same gradients for any
number of ranks (the reduction order of an element depends on the buffer layout under gloo's and
NCCL's ring algorithms, which is the same here).

During the backward pass, parameter ``i``'s all-reduce starts from its post-accumulate-grad hook once
the gradients of parameters ``0 .. i`` are all ready: every rank then issues the collectives in the
same order even when a gradient is missing on some ranks (its hook never fires there; it and those
after it start at :func:`average_gradients`). Hooks are registered per step on the Parameter objects
of that step, so densification replacing them between steps needs nothing.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

from ns_splat_plus.parallel import collectives


class GradientAveraging:
    """One step's averaging of ``params``' gradients (every rank passes the same parameters, same order).

    Args:
        params: the parameters to average, each a leaf ``[*shape]`` tensor; duplicates are dropped.
    """

    def __init__(self, params: Iterable[Tensor]) -> None:
        unique: Dict[int, Tensor] = {}
        for p in params:
            unique.setdefault(id(p), p)
        self.params: List[Tensor] = list(unique.values())
        self.world = dist.get_world_size()
        self._index = {id(p): i for i, p in enumerate(self.params)}
        self._ready = [False] * len(self.params)
        self._launched = 0  # parameters 0 .. _launched - 1 have their all-reduce in flight
        self._buffers: List[Optional[Tensor]] = [None] * len(self.params)  # what was all-reduced, per parameter
        self._works: list = []
        self._hooks: list = []

    def register_hooks(self) -> None:
        """Start each all-reduce from the backward pass (post-accumulate-grad hooks, removed by :meth:`finish`)."""
        for p in self.params:
            if p.requires_grad and p.is_leaf:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._on_gradient))

    def _on_gradient(self, p: Tensor) -> None:
        i = self._index[id(p)]
        if self._ready[i]:  # a second backward would add to a gradient whose all-reduce is in flight
            raise RuntimeError(
                f"the gradient of parameter {i} {tuple(p.shape)} was accumulated twice in one step while its "
                "all-reduce ran: overlapped averaging needs one backward pass per optimizer step "
                "(--data-parallel.overlap-gradient-averaging False averages after all of them)"
            )
        self._ready[i] = True
        while self._launched < len(self.params) and self._ready[self._launched]:
            self._launch(self._launched)

    def _launch(self, i: int) -> None:
        p = self.params[i]
        if p.grad is None:  # missing on this rank: zeros stand in (the flags tell whether any rank had one)
            buffer = torch.zeros_like(p, memory_format=torch.contiguous_format)
        else:
            if not p.grad.is_contiguous():  # collectives need dense buffers; a copy only in this rare case
                p.grad = p.grad.contiguous()
            buffer = p.grad
        self._buffers[i] = buffer
        if buffer.numel() > 0:
            self._works.append(dist.all_reduce(buffer, async_op=True))
        self._launched = i + 1

    def _remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def cancel(self) -> None:
        """A step that failed before :meth:`finish`: remove the hooks, and :func:`average_gradients` forgets it."""
        global _in_flight
        self._remove_hooks()
        if _in_flight is self:
            _in_flight = None

    def finish(self) -> None:
        """Start what has not started, wait for all of it, and write the averages into ``p.grad``.

        A parameter without gradient on this rank gets the mean of the others' (the mean over all
        ranks, its own counting as zeros); one without gradient on every rank keeps ``grad is None``.
        No host-device synchronisation unless a gradient is missing on this rank (then the presence
        flags are read back).
        """
        self._remove_hooks()
        if not self.params:
            return
        present = [p.grad is not None for p in self.params]
        while self._launched < len(self.params):
            self._launch(self._launched)
        device = self.params[0].device
        if all(present):  # flags made on the device (a host tensor copied over would synchronise)
            flags = torch.ones(len(self.params), dtype=torch.float32, device=device)
        else:
            flags = torch.tensor(present, dtype=torch.float32, device=device)
        self._works.append(dist.all_reduce(flags, async_op=True))
        for work in self._works:
            work.wait()
        self._works = []
        counts = None
        for i, (p, buffer) in enumerate(zip(self.params, self._buffers)):
            assert buffer is not None  # every all-reduce was launched above
            buffer.div_(self.world)
            if present[i]:
                grad = p.grad
                assert grad is not None  # present: it had a gradient
                if buffer is not grad:  # the gradient was swapped after its all-reduce started (not by this code)
                    grad.copy_(buffer)
                continue
            if counts is None:  # reading the flags synchronises; only needed when a gradient is missing
                counts = flags.tolist()
            if counts[i] > 0:
                p.grad = buffer


_in_flight: Optional[GradientAveraging] = None
"""The averaging started by :func:`start_gradient_averaging` and not yet finished (one per process)."""


def start_gradient_averaging(params: Iterable[Tensor]) -> Optional[GradientAveraging]:
    """Before the backward pass: start each gradient's all-reduce as soon as autograd has accumulated it.

    :func:`average_gradients` finishes it. Returns the averaging in flight (None in one process);
    call its ``cancel()`` if the step fails before :func:`average_gradients`.
    """
    global _in_flight
    if not collectives.is_distributed():
        return None
    if _in_flight is not None:  # a step that failed after starting: its hooks must not fire again
        _in_flight.cancel()
    _in_flight = GradientAveraging(params)
    _in_flight.register_hooks()
    return _in_flight


def average_gradients(params: Iterable[Tensor]) -> None:
    """Replace every gradient by its mean over all ranks; a no-op in a single process.

    Finishes the averaging that :func:`start_gradient_averaging` started, if any, then averages the
    parameters of ``params`` it did not hold (all of them when none was started). Every rank must pass
    the same parameters in the same order.
    """
    global _in_flight
    if not collectives.is_distributed():
        return
    params = list(params)
    started, _in_flight = _in_flight, None
    if started is not None:
        started.finish()
        held = {id(p) for p in started.params}
        params = [p for p in params if id(p) not in held]
    if params:
        GradientAveraging(params).finish()
