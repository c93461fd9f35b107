"""Triton kernel launches without Triton's per-launch dispatch: :class:`KernelLauncher`.

``kernel[grid](*args)`` runs Triton's ``JITFunction.run`` on every launch: it binds and specializes
every argument (type, alignment, divisibility, equality to 1), builds the cache key and looks the
compiled kernel up, for 20-30 arguments per kernel of the fused SSIM (in a B = 1 step whose GPU work
is 4 ms, the forward's three launches took 64 us of host time more than direct ones: torch.profiler,
plush-dog, H200). :class:`KernelLauncher` goes through ``JITFunction.run`` once per argument
signature and keeps the compiled kernel it returns; later launches with that signature call the
compiled kernel directly (:func:`ns_splat_plus.upstream.launch_compiled_triton`). Should a Triton
version refuse the direct call (a TypeError before anything is launched), the launcher goes back to
``JITFunction.run`` for good.

The signature is a superset of what Triton specializes on, so that one key can never stand for two
different compiled kernels: every int and bool by type and value (the constexprs among them too), every
tensor by dtype and 16-byte alignment of its data pointer, every float by type (Triton does not
specialize runtime floats; the kernels' float constexprs are module constants). Under Triton's
interpreter (the CPU tests) every launch goes through ``JITFunction.run``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

from ns_splat_plus import upstream

MAX_SIGNATURES = 64
"""Kept compiled kernels per launcher (a few image sizes per run); beyond this the cache starts over."""


def signature(args: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """What Triton's specialization of ``args`` can depend on (see the module doc), and the device of
    the first tensor: a compiled kernel is loaded on one GPU, so a later run in the same process on
    another GPU (a notebook, the benchmark probe) must not launch it there."""
    key: List[Any] = []
    device = None
    for arg in args:
        if isinstance(arg, torch.Tensor):
            if device is None:
                device = arg.device
                key.append(device)
            key.append((arg.dtype, arg.data_ptr() % 16 == 0))
        elif isinstance(arg, (int, str)) or arg is None:  # with the type: True == 1, but not for Triton
            key.append((type(arg), arg))
        else:
            key.append(type(arg))
    return tuple(key)


class KernelLauncher:
    """Launches one ``@triton.jit`` kernel with all its arguments, constexprs included, positionally
    in its signature's order: ``launcher(grid, *args)``."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.compiled: Dict[Tuple[Any, ...], Any] = {}
        self.direct_launches = 0  # launches that skipped JITFunction.run (the GPU test reads it)
        self.direct = True  # False once a direct launch was refused

    def __call__(self, grid: Tuple[int, ...], *args: Any) -> None:
        key = signature(args)
        compiled = self.compiled.get(key) if self.direct else None
        if compiled is not None:
            try:
                upstream.launch_compiled_triton(compiled, grid, args)
            except TypeError:  # this Triton's compiled kernels take other arguments: dispatch from now on
                self.direct = False
                self.compiled.clear()
            else:
                self.direct_launches += 1
                return
        compiled = self.kernel[grid](*args)
        if self.direct and upstream.is_compiled_triton_kernel(compiled):  # not under the interpreter
            if len(self.compiled) >= MAX_SIGNATURES:
                self.compiled.clear()
            self.compiled[key] = compiled
