"""The splat-plus model: :class:`SplatPlusModel` (a ``SplatfactoModel``) and its config.

Modules: ``model.py`` (the model and its options), ``cameras.py`` (intrinsics and view matrices,
kept per training camera), ``images.py`` (the training composite, strips of large renders, the
ground-truth downscale), ``metrics.py`` (evaluation metrics), ``init.py`` (deterministic initial
Gaussians), ``ssim.py`` (the SSIM of the training loss: fused kernels on CUDA).
"""

from ns_splat_plus.model.model import SplatPlusModel, SplatPlusModelConfig

__all__ = ["SplatPlusModel", "SplatPlusModelConfig"]
