"""A hook into the viewer page a splat-plus pipeline is shown in: :class:`ViewerHook`, :func:`on_viewer_built`.

nerfstudio 1.1.5's ``Viewer.__init__`` (``nerfstudio/viewer/viewer.py``) collects every
``ViewerControl`` among the pipeline's attributes (``parse_object``) and calls its private
``_setup(viewer)`` once the page is built (its theme, Pause / Resume buttons and "Step" line exist),
in ``ns-train`` and in ``ns-viewer`` alike. ``ns-viewer`` (``scripts/viewer/run_viewer.py``) builds
that viewer itself from ``config.yml``, with no trainer (``viewer.trainer`` is None) and after
``eval_setup`` loaded the last checkpoint: the pipeline is the only splat-plus object it touches.

:class:`ViewerHook` is such a control (the pipeline holds one); its ``_setup`` hands the viewer to the
handlers registered with :func:`on_viewer_built` (the viewer layer registers its own, so that the
training layer, which owns the pipeline, imports nothing of the viewer).
"""

from __future__ import annotations

from typing import Any, Callable, List

from nerfstudio.viewer.viewer_elements import ViewerControl

ViewerHandler = Callable[[Any], None]

_HANDLERS: List[ViewerHandler] = []


def on_viewer_built(handler: ViewerHandler) -> ViewerHandler:
    """Call ``handler(viewer)`` for every nerfstudio viewer built for a pipeline that holds a
    :class:`ViewerHook` (once per handler, however often it is registered). Returns ``handler``."""
    if handler not in _HANDLERS:
        _HANDLERS.append(handler)
    return handler


class ViewerHook(ViewerControl):
    """A ``ViewerControl`` whose ``_setup(viewer)`` (nerfstudio 1.1.5, private) runs the handlers of
    :func:`on_viewer_built` with the viewer (``viewer.pipeline``, ``viewer.trainer``, ``viewer.viser_server``)."""

    def _setup(self, viewer: Any) -> None:
        super()._setup(viewer)
        for handler in list(_HANDLERS):
            handler(viewer)
