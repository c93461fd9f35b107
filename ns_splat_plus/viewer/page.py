"""What splat-plus changes on nerfstudio's viewer page besides the health panel: :func:`adjust_viewer_page`
(the theme and the first view) and :func:`follow_panel` (the panel drives nerfstudio's own controls);
both called by ``SplatPlusViewerConfig.attach_to_trainer`` once the trainer is set up.

* The titlebar: nerfstudio 1.1.5's ``ViewerState`` shows a logo from docs.nerf.studio, a broken image
  (and a request to the network) offline. viser 0.2.7 serves only its own client files, so there is no
  local asset to point at: the theme is configured again with nerfstudio's buttons, layout and colours,
  without the image (:func:`offline_theme`).
* The first view: viser's default camera shows the scene as a blurred smear from outside. Each newly
  connected browser starts at the first training camera (:func:`start_at_training_camera`), placed as
  nerfstudio places it when a user clicks that camera's frustum.
* nerfstudio's "Step" line: ``ViewerState.update_step`` runs only when nerfstudio renders for a browser,
  so the line stood still (step 104 while the panel said 296). It follows every panel push (throttled
  as the panel is).
* The end of training: the Pause / Resume buttons are hidden and disabled, and a disabled
  "Training completed" button takes their place (:func:`show_training_completed`; also the page of a
  finished run that ns-viewer shows, ``finished_run.py``).

A browser that connects while the trainer is being set up (nerfstudio's ``ViewerState`` starts viser
before it is built; its walk over the pipeline's attributes also decodes the photos) still gets
nerfstudio's theme, logo request included, and keeps its camera; the theme is replaced for it when
the set-up is done.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TRAINING_COMPLETED_LABEL = "Training completed"


def offline_theme(server: Any) -> None:
    """nerfstudio 1.1.5's theme (``ViewerState.__init__``: its titlebar buttons, collapsible controls,
    dark mode, brand colour) without the titlebar image, which is fetched from docs.nerf.studio."""
    import viser

    buttons = (
        viser.theme.TitlebarButton(text="Getting Started", icon=None, href="https://nerf.studio"),
        viser.theme.TitlebarButton(
            text="Github", icon="GitHub", href="https://github.com/nerfstudio-project/nerfstudio"
        ),
        viser.theme.TitlebarButton(text="Documentation", icon="Description", href="https://docs.nerf.studio"),
    )
    server.gui.configure_theme(
        titlebar_content=viser.theme.TitlebarConfig(buttons=buttons, image=None),
        control_layout="collapsible",
        dark_mode=True,
        brand_color=(255, 211, 105),
    )


def training_camera_pose(camera: Any) -> tuple:
    """(position, wxyz) of a nerfstudio camera (``Cameras`` of one camera, c2w [3, 4] in OpenGL axes)
    in viser's scene: the pose nerfstudio's ``init_scene`` gives that camera's frustum (OpenCV axes,
    positions times ``VISER_NERFSTUDIO_SCALE_RATIO``)."""
    import viser.transforms as vtf
    from nerfstudio.viewer.viewer import VISER_NERFSTUDIO_SCALE_RATIO

    c2w = camera.camera_to_worlds.detach().cpu().numpy().reshape(3, 4)
    rotation = vtf.SO3.from_matrix(c2w[:3, :3]) @ vtf.SO3.from_x_radians(np.pi)
    return c2w[:3, 3] * VISER_NERFSTUDIO_SCALE_RATIO, rotation.wxyz


def start_at_training_camera(viewer_state: Any, cameras: Any, index: int = 0) -> None:
    """Put each browser that connects from now on at training camera ``index`` of ``cameras`` (the
    train dataset's), as a click on that camera's frustum does (``ViewerState.init_scene``'s
    ``on_click_callback``: position, then orientation, and ``current_camera_idx``)."""
    position, wxyz = training_camera_pose(cameras[index])

    def on_connect(client: Any) -> None:
        # viser calls this after the browser's first camera message (its state is known) and holding
        # its client lock; the browser applies the pose and answers with a camera message, on which
        # nerfstudio renders.
        with client.atomic():
            client.camera.position = position
            client.camera.wxyz = wxyz
        viewer_state.current_camera_idx = index

    viewer_state.viser_server.on_client_connect(on_connect)


def adjust_viewer_page(viewer_state: Any, train_dataset: Any) -> None:
    """The offline theme for every page, and the first training camera as the first view of every
    browser that connects from now on."""
    server = getattr(viewer_state, "viser_server", None)
    if server is None or not hasattr(server, "gui"):  # no viewer, or the legacy viewer
        return
    offline_theme(server)
    cameras = getattr(train_dataset, "cameras", None)
    if cameras is not None and len(cameras) > 0:
        start_at_training_camera(viewer_state, cameras)


def follow_panel(viewer_state: Any, panel: Any) -> None:
    """Let the health panel drive nerfstudio's controls: its "Step" line follows each push of the panel,
    and the Pause / Resume buttons give way to "Training completed" when the panel's state becomes
    "completed" (the trainer's ``_train_complete_viewer`` says so, whether or not a browser is open)."""
    server = getattr(viewer_state, "viser_server", None)
    if server is None or not hasattr(server, "gui"):
        return
    synced = {"step": None, "completed": None}

    def sync_step_line(panel: Any) -> None:
        if panel.step is not None and panel.step != synced["step"] and hasattr(viewer_state, "stats_markdown"):
            viewer_state.update_step(panel.step)  # keeps nerfstudio's "Resolution" line
            synced["step"] = panel.step

    def show_completion(state: str) -> None:
        if state == "completed" and synced["completed"] is None:
            synced["completed"] = show_training_completed(viewer_state)

    panel.push_listeners.append(sync_step_line)
    panel.state_listeners.append(show_completion)


def show_training_completed(viewer_state: Any) -> Any:
    """Hide and disable nerfstudio's Pause / Resume buttons (a page that still shows one cannot toggle it
    back) and put a disabled "Training completed" button in their place; returns that button."""
    import viser

    pause, resume = getattr(viewer_state, "pause_train", None), getattr(viewer_state, "resume_train", None)
    for button in (pause, resume):
        if button is not None:
            button.visible = False
            button.disabled = True
    return viewer_state.viser_server.gui.add_button(
        TRAINING_COMPLETED_LABEL,
        disabled=True,
        icon=viser.Icon.CIRCLE_CHECK,
        order=None if pause is None else pause.order,
    )
