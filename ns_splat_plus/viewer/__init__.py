"""The viewer side of splat-plus: the "Training health" panel and the exit rule for batch jobs.

Entry points: :func:`attach_to_trainer` (panel + exit rule for a set-up trainer),
:class:`SplatPlusViewerConfig` (``--viewer.*``), :func:`resolve_quit_on_train_completion`.
"""

from ns_splat_plus.viewer.exit_rule import SplatPlusViewerConfig, resolve_quit_on_train_completion
from ns_splat_plus.viewer.panel import (
    PANEL_TITLE,
    TrainingHealthPanel,
    attach_to_trainer,
    describe_devices,
    format_grad2d,
    format_gradient_summary,
    format_refine,
    format_value,
    format_warmup,
)

__all__ = [
    "PANEL_TITLE", "SplatPlusViewerConfig", "TrainingHealthPanel", "attach_to_trainer", "describe_devices",
    "format_grad2d", "format_gradient_summary", "format_refine", "format_value", "format_warmup",
    "resolve_quit_on_train_completion",
]
