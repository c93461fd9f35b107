"""The page ``ns-viewer --load-config`` shows for a finished splat-plus run: :func:`show_finished_run`.

nerfstudio's ``ns-viewer`` builds its viewer from ``config.yml`` and the last checkpoint, without a
trainer, so ``SplatPlusViewerConfig.attach_to_trainer`` never runs there: the page had nerfstudio's
remote logo (a broken image offline), viser's default camera (a grey close-up), "Step: 0" and a
"Pause Training" button for a run that no longer trains. The pipeline's ``ViewerHook``
(``upstream/viewer_hook.py``) hands each viewer built for it to :func:`show_finished_run`, which, for a
viewer without a trainer, gives it what the live page has: the theme without the remote logo, each
browser starting at the first training camera (``page.py``), the checkpoint's step on nerfstudio's
"Step" line, and "Training completed" in place of the Pause / Resume buttons. Registered when this
module is imported (``ns_splat_plus.viewer`` imports it; ``method.py`` imports that).
"""

from __future__ import annotations

from typing import Any

from ns_splat_plus import upstream
from ns_splat_plus.viewer.page import adjust_viewer_page, show_training_completed


def show_finished_run(viewer: Any) -> None:
    """Give the page of a viewer without a trainer (ns-viewer) the finished run's step, first view and
    theme, and no training controls; a viewer of a training run is left to ``attach_to_trainer``."""
    if getattr(viewer, "trainer", None) is not None or not hasattr(getattr(viewer, "viser_server", None), "gui"):
        return
    pipeline = viewer.pipeline
    adjust_viewer_page(viewer, getattr(pipeline.datamanager, "train_dataset", None))
    step = getattr(pipeline, "loaded_step", None)
    if step is not None:
        viewer.step = step  # what nerfstudio renders at; ns-viewer sets the same step right after
        viewer.update_step(step)  # nerfstudio's "Step" line; its renders keep the number they find there
    show_training_completed(viewer)


upstream.on_viewer_built(show_finished_run)
