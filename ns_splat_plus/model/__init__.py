"""The splat-plus model: :class:`SplatPlusModel` (a ``SplatfactoModel``) and its config.

Modules: ``model.py`` (the model and its options), ``render.py`` (intrinsics, strips),
``metrics.py`` (evaluation metrics), ``init.py`` (deterministic initial Gaussians).
"""

from ns_splat_plus.model.model import SplatPlusModel, SplatPlusModelConfig

__all__ = ["SplatPlusModel", "SplatPlusModelConfig"]
