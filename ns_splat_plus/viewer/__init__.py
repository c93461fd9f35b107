"""The viewer side of splat-plus: the "Training health" panel and the exit rule for batch jobs.

Entry points: :class:`SplatPlusViewerConfig` (``--viewer.*``; its ``attach_to_trainer`` changes
nerfstudio's page, builds the panel and applies the exit rule for a set-up trainer),
:class:`TrainingHealthPanel`, :func:`resolve_quit_on_train_completion`.
Modules: ``config.py`` (the options, the exit rule, the attaching), ``panel.py`` (the panel and its
formatting), ``page.py`` (nerfstudio's page: the theme without the remote logo, the first view, the
Step line, the buttons at the end of training), ``finished_run.py`` (the same page for ``ns-viewer`` of a
finished run: :func:`show_finished_run`).
"""

from ns_splat_plus.viewer.config import SplatPlusViewerConfig, resolve_quit_on_train_completion
from ns_splat_plus.viewer.finished_run import show_finished_run
from ns_splat_plus.viewer.panel import (
    PANEL_TITLE,
    TrainingHealthPanel,
    describe_devices,
    format_grad2d,
    format_gradient_summary,
    format_refine,
    format_value,
    format_warmup,
)

__all__ = [
    "PANEL_TITLE",
    "SplatPlusViewerConfig",
    "TrainingHealthPanel",
    "describe_devices",
    "format_grad2d",
    "format_gradient_summary",
    "format_refine",
    "format_value",
    "format_warmup",
    "resolve_quit_on_train_completion",
    "show_finished_run",
]
