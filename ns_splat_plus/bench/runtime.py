"""The splat-plus runtime names that bench/ (and its tests) use: the one place they are imported from.

Entry point: none; import names from here (lazily, inside functions: importing this module imports
splat-plus's training stack). When runtime modules move, only this file changes.
"""

from ns_splat_plus import distributed as gradient_averaging  # noqa: F401  the module whose average_gradients the strategy calls
from ns_splat_plus.compat import alexnet_weights_path  # noqa: F401
from ns_splat_plus.config import splat_plus  # noqa: F401  (tests only)
from ns_splat_plus.evaluation import memory_tracker  # noqa: F401
from ns_splat_plus.trainer import SplatPlusTrainer  # noqa: F401  (tests only)
