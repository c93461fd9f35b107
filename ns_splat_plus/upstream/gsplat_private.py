"""The private parts of gsplat 1.4.0, and Triton's compiled-kernel launch (Triton 3.2-3.9), that
splat-plus calls; see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import torch

from ns_splat_plus.upstream.versions import probe


def gsplat_extension():
    """gsplat's CUDA extension (``gsplat.cuda._backend._C``, built on first use), or None."""
    from gsplat.cuda import _backend

    return _backend._C


def gsplat_kernels():
    """The stages of ``gsplat.rasterization`` (``gsplat.cuda._wrapper``, gsplat 1.4.0), for strips."""
    from gsplat.cuda import _wrapper

    return _wrapper


def launch_compiled_triton(compiled: Any, grid: Tuple[int, ...], args: Tuple[Any, ...]) -> None:
    """Launch a kernel that ``JITFunction.run`` returned (``triton.compiler.CompiledKernel``) on the
    current stream: ``compiled[grid](*args)``, ``args`` being all of the JIT function's arguments in
    its signature's order, constexprs included, as ``JITFunction.run`` passes them (Triton 3.6, 3.9).
    No argument is bound or specialized again: :mod:`ns_splat_plus.kernels.launch` keys the
    kernel by everything its specialization depends on."""
    compiled[tuple(grid) + (1,) * (3 - len(grid))](*args)


def is_compiled_triton_kernel(obj: Any) -> bool:
    """Whether ``obj`` is what ``JITFunction.run`` returns after a compiled launch (not the interpreter's)."""
    try:
        from triton.compiler import CompiledKernel
    except ImportError:
        return False
    return isinstance(obj, CompiledKernel)


def _direct_launch_problem() -> Optional[str]:
    try:
        from triton.compiler import CompiledKernel
    except ImportError as err:
        return f"triton.compiler.CompiledKernel does not import ({err})"
    if not hasattr(CompiledKernel, "__getitem__"):
        return "triton.compiler.CompiledKernel cannot be launched as kernel[grid](*args)"
    return None


def direct_triton_launch_available() -> bool:
    """Whether compiled Triton kernels can be launched directly (probed once; without Triton: True,
    nothing to launch). Where not, every launch goes through ``JITFunction.run``."""
    if not _triton_imports():
        return True
    return probe("triton_launch", _direct_launch_problem, "Triton kernels are launched through JITFunction.run")


def prepare_triton_cache_key() -> None:
    """Compute Triton's key of its own installation (``triton.runtime.cache.triton_key``: a hash of its installed
    files, cached for the process; Triton 3.6, 3.8), which the first kernel launch of a process otherwise computes
    (0.43 s on an H200 host). With another Triton, or none, nothing is done: its first launch computes it."""
    try:
        from triton.runtime.cache import triton_key
    except Exception:  # noqa: BLE001 (an optional head start)
        return
    triton_key()


def _triton_imports() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def torch_reference_ops():
    """gsplat's PyTorch implementations (``gsplat.cuda._torch_impl``, gsplat 1.4.0)."""
    from gsplat.cuda import _torch_impl

    return _torch_impl


def recordable_spherical_harmonics(degree: int, dirs: torch.Tensor, coeffs: torch.Tensor, masks: torch.Tensor):
    """gsplat's ``spherical_harmonics(degree, dirs, coeffs, masks=masks)`` in PyTorch operations, which run
    on the current stream, so that a CUDA graph records them.

    gsplat 1.4.0 launches its SH kernels on the legacy default stream (``compute_sh_fwd.cu`` and
    ``compute_sh_bwd.cu`` pass no stream; its other kernels pass the current one). A recording on another
    stream then leaves them out: they run once, while it records, and every replay reads what they left
    in memory. gsplat's own PyTorch version (``_torch_impl._spherical_harmonics``), with the mask's zeros.

    Args:
        degree: the SH degree to use. dirs: [..., 3] view directions (normalised here, as gsplat does).
        coeffs: [..., K, 3] coefficients. masks: [...] bool, False where the colour is zero (radius 0).

    Returns:
        [..., 3] colours.
    """
    colors = torch_reference_ops()._spherical_harmonics(degree, dirs, coeffs)
    return torch.where(masks[..., None], colors, 0.0)


def update_param_with_optimizer(param_fn: Callable, optimizer_fn: Callable, params, optimizers) -> None:
    """``gsplat.strategy.ops._update_param_with_optimizer`` (gsplat 1.4.0)."""
    from gsplat.strategy import ops

    ops._update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


def multinomial_sample(weights: torch.Tensor, n: int, replacement: bool = True) -> torch.Tensor:
    """``gsplat.strategy.ops._multinomial_sample`` (gsplat 1.4.0)."""
    from gsplat.strategy import ops

    return ops._multinomial_sample(weights, n, replacement=replacement)


def grow_gs(strategy, params, optimizers, state, step: int) -> Tuple[int, int]:
    """``DefaultStrategy._grow_gs`` (gsplat 1.4.0): (duplicated, split)."""
    from gsplat.strategy import DefaultStrategy

    return DefaultStrategy._grow_gs(strategy, params, optimizers, state, step)


def prune_gs(strategy, params, optimizers, state, step: int) -> int:
    """``DefaultStrategy._prune_gs`` (gsplat 1.4.0): the number pruned."""
    from gsplat.strategy import DefaultStrategy

    return DefaultStrategy._prune_gs(strategy, params, optimizers, state, step)


def relocate_gs(strategy, params, optimizers, binoms) -> int:
    """``MCMCStrategy._relocate_gs`` (gsplat 1.4.0): the number relocated."""
    from gsplat.strategy import MCMCStrategy

    return MCMCStrategy._relocate_gs(strategy, params, optimizers, binoms)


def add_new_gs(strategy, params, optimizers, binoms) -> int:
    """``MCMCStrategy._add_new_gs`` (gsplat 1.4.0): the number added."""
    from gsplat.strategy import MCMCStrategy

    return MCMCStrategy._add_new_gs(strategy, params, optimizers, binoms)
