"""ns-splat-plus: a Nerfstudio Gaussian-splatting method that keeps working where splatfacto breaks.

Layout (one concern per subpackage): ``method.py`` (entry points), ``model/``, ``raster/``,
``strategy/``, ``training/``, ``parallel/``, ``evaluation/``, ``viewer/``, ``kernels/`` (the Triton SSIM and
tile-bound kernels), ``upstream/`` (every private nerfstudio / gsplat / torch touch point), ``errors.py``. The
benchmark tool is the separate ``splatbench`` distribution (never imported from here). See docs/development.md.
"""

from ns_splat_plus import legacy as _legacy

__version__ = "0.2.0"

_legacy.install()
