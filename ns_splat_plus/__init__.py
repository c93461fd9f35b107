"""ns-splat-plus: a Nerfstudio Gaussian-splatting method that keeps working where splatfacto breaks.

Layout (one concern per subpackage): ``method.py`` (entry points), ``model/``, ``raster/``,
``strategy/``, ``training/``, ``parallel/``, ``evaluation/``, ``viewer/``, ``upstream.py`` (every
private nerfstudio / gsplat touch point), ``errors.py``. The benchmark tool is the separate
``splatbench`` distribution (never imported from here). See README, "Development".
"""

from ns_splat_plus import legacy as _legacy

__version__ = "0.2.0"

_legacy.install()
