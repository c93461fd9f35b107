"""Rasterization: :func:`rasterize`, gsplat on CUDA and the differentiable PyTorch reference on the CPU.

Modules: ``rasterize.py`` (the entry point and gsplat's stages), ``reference.py`` (the PyTorch
reference, also the oracle of the GPU tests), ``tile_bounds.py`` (the opacity-aware tile bounds; the
kernel itself is in :mod:`ns_splat_plus.kernels.tile_bounds`), ``fixed_capacity_isect.py`` (gsplat's
tile intersections in buffers of a fixed size, with no host read: for the step recorded in a CUDA graph,
``--cuda-graph``). Import from here:
``from ns_splat_plus.raster import rasterize`` (the function, which shadows its module's name).
"""

from ns_splat_plus.raster.rasterize import Backend, rasterize

__all__ = ["Backend", "rasterize"]
