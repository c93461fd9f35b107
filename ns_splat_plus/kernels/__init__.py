"""Triton kernels and their launcher, below both ``raster/`` and ``model/`` (which call them).

:mod:`.launch` (:class:`~ns_splat_plus.kernels.launch.KernelLauncher`: launches without Triton's
per-launch dispatch), :mod:`.ssim` (the fused SSIM and photometric-loss kernels) and
:mod:`.tile_bounds` (the opacity-aware tile bounds; the PyTorch formula stays in
:mod:`ns_splat_plus.raster.tile_bounds`). Triton is imported only where a kernel first runs.
"""
