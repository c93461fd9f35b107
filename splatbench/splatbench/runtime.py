"""The ns-splat-plus runtime names that splatbench (and its tests) use: the one place they are imported from.

Entry point: none; import names from here (lazily, inside functions: importing this module imports
splat-plus's training stack). When runtime modules move, only this file changes. The one exception is
:mod:`.scenes`, which imports the torch reference rasterizer directly (every test imports it; this
module would load the whole training stack).
"""

# method first: it imports nerfstudio's configs before nerfstudio.utils.writer, whose own import of
# base_config is circular when the writer comes first (nerfstudio 1.1.5)
from ns_splat_plus.method import splat_plus  # noqa: F401  (tests only)  # isort: skip
from ns_splat_plus.evaluation import memory_tracker  # noqa: F401
from ns_splat_plus.kernels import ssim as ssim_kernels  # noqa: F401  (ssim_speed: the column passes' tile shape)
from ns_splat_plus.model.ssim import fused_ssim  # noqa: F401
from ns_splat_plus.training import optimizers as gradient_averaging  # noqa: F401  calls average_gradients by its global name
from ns_splat_plus.training.loop import eval_due  # noqa: F401
from ns_splat_plus.training.trainer import SplatPlusTrainer  # noqa: F401  (tests only)
from ns_splat_plus.upstream import alexnet_weights_path  # noqa: F401
