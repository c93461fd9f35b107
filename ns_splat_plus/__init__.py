"""ns-splat-plus: a Nerfstudio Gaussian-splatting method that keeps working where splatfacto breaks.

Layout (one concern per subpackage): ``method.py`` (entry points), ``model/``, ``raster/``,
``strategy/``, ``training/``, ``parallel/``, ``evaluation/``, ``viewer/``, ``kernels/`` (the Triton SSIM and
tile-bound kernels), ``upstream/`` (every private nerfstudio / gsplat / torch touch point), ``errors.py``. The
benchmark tool is the separate ``splatbench`` distribution (never imported from here). See docs/development.md.
"""

import time as _time

IMPORTED_AT = _time.time()
"""When this package was first imported (wall clock): in ns-train, during nerfstudio's plugin discovery, which
ends most of its imports; the start-up record's ``imports`` part ends here (training/rank_record.py)."""

from ns_splat_plus import legacy as _legacy  # noqa: E402 (after IMPORTED_AT, which times the imports before it)

__version__ = "0.2.0"

_legacy.install()
