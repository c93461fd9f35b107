"""KernelLauncher: Triton's dispatch once per argument signature, then the compiled kernel directly.

The compiled path itself runs on the GPU (tests/kernels/test_photometric_loss.py, `gpu`); here a stand-in
kernel checks the caching: which launches are dispatched, which go direct, and that every property
Triton specializes on separates signatures.
"""

from __future__ import annotations

import torch

from ns_splat_plus import upstream
from ns_splat_plus.kernels import launch
from ns_splat_plus.kernels.launch import KernelLauncher, signature


class _Compiled:
    pass


class _Kernel:
    """A stand-in @triton.jit function: kernel[grid](*args) dispatches and returns a compiled kernel."""

    def __init__(self):
        self.dispatched = []

    def __getitem__(self, grid):
        def run(*args):
            self.dispatched.append((grid, args))
            return _Compiled()

        return run


def _launcher(monkeypatch):
    direct = []
    monkeypatch.setattr(upstream, "is_compiled_triton_kernel", lambda obj: isinstance(obj, _Compiled))
    monkeypatch.setattr(
        upstream, "launch_compiled_triton", lambda compiled, grid, args: direct.append((compiled, grid, args))
    )
    kernel = _Kernel()
    return KernelLauncher(kernel), kernel, direct


def test_a_signature_is_dispatched_once_then_launched_directly(monkeypatch):
    launcher, kernel, direct = _launcher(monkeypatch)
    x = torch.zeros(64)
    launcher((4, 2), x, 7, 0.5, True)
    launcher((4, 2), x, 7, 0.25, True)  # another float: the same compiled kernel
    launcher((8,), torch.ones(64), 7, 0.5, True)  # another tensor of the same dtype and alignment, another grid
    assert len(kernel.dispatched) == 1 and len(direct) == 2
    assert direct[0][1] == (4, 2) and direct[1][1] == (8,)
    assert direct[0][2][2] == 0.25 and direct[0][0] is direct[1][0]
    assert launcher.direct_launches == 2


def test_what_triton_specializes_on_separates_signatures(monkeypatch):
    launcher, kernel, direct = _launcher(monkeypatch)
    x = torch.zeros(64)
    calls = [
        (x, 7, True),
        (x, 7, False),  # a constexpr
        (x, 1, True),  # an int equal to 1
        (x, 16, True),  # an int divisible by 16
        (x.double(), 7, True),  # a dtype
        (x[1:], 7, True),  # a pointer not 16-byte aligned
        (x, 7, 1),  # a bool and an int of equal value
    ]
    for args in calls:
        launcher((1,), *args)
    assert len(kernel.dispatched) == len(calls) and not direct
    assert len({signature(args) for args in calls}) == len(calls)


def test_the_interpreter_always_dispatches(monkeypatch):
    launcher, kernel, direct = _launcher(monkeypatch)
    monkeypatch.setattr(upstream, "is_compiled_triton_kernel", lambda obj: False)  # what the interpreter returns
    for _ in range(3):
        launcher((1,), torch.zeros(4), 3)
    assert len(kernel.dispatched) == 3 and not direct


def test_the_cache_starts_over_beyond_its_size(monkeypatch):
    launcher, kernel, direct = _launcher(monkeypatch)
    monkeypatch.setattr(launch, "MAX_SIGNATURES", 2)
    for n in (1, 2, 3, 3):
        launcher((1,), torch.zeros(4), n + 100)
    assert len(launcher.compiled) == 1 and len(direct) == 1


def test_a_refused_direct_launch_goes_back_to_dispatch_for_good(monkeypatch):
    launcher, kernel, direct = _launcher(monkeypatch)

    def refuse(compiled, grid, args):
        raise TypeError("launcher() takes 12 positional arguments")

    monkeypatch.setattr(upstream, "launch_compiled_triton", refuse)
    for _ in range(3):
        launcher((1,), torch.zeros(4), 3)
    assert len(kernel.dispatched) == 3 and launcher.direct_launches == 0
    assert not launcher.direct and not launcher.compiled


def test_what_changes_with_the_image_size_or_the_gaussian_count_is_not_specialized():
    """Every argument that changes with the training size (sizes, block counts, the image and row
    strides, the scratch maps' strides) or with the Gaussian count is in its kernel's
    ``do_not_specialize``, by a name the kernel has: Triton accepts an unknown name silently and would
    compile each kernel again at a new size or count (seconds on a cold cache, in the middle of a run)."""
    from ns_splat_plus.kernels import ssim, tile_bounds

    kernels = (*ssim._kernels(), tile_bounds._launcher().kernel)
    changing = {"H", "W", "Hv", "Wv", "n", "n_ssim", "n_l1", "n_row_blocks", "n_col_blocks", *ssim.OUTER_STRIDES}
    for kernel in kernels:
        unspecialized = set(kernel.do_not_specialize)
        assert unspecialized <= set(kernel.arg_names), (kernel.__name__, unspecialized - set(kernel.arg_names))
        expected = {a for a in kernel.arg_names if a in changing or a.endswith("_stride")}
        assert expected <= unspecialized, (kernel.__name__, expected - unspecialized)
    assert {"ssim_columns_backward", "opacity_tile_radii"} <= {k.__name__ for k in kernels}
