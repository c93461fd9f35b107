"""ns-viewer of a finished splat-plus run, in headless Chromium: the page shows the run's last step,
starts at a training camera (not viser's grey close-up), has no training controls and no remote logo
(viewer/finished_run.py, through the pipeline's ViewerHook). ns-viewer --load-config loads the last
checkpoint and serves the viewer page (once also tests/viewer/test_viewer.py's test_ns_viewer_opens_the_finished_run,
on the run of its ns-train test)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from clirun import console_script, free_port
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from test_viewer import (  # noqa: F401  (browser: the module's Chromium fixture)
    _button,
    _of_kind,
    _page_messages,
    _serves,
    _tail,
    _wait,
    assert_page_starts_at_training_camera,
    browser,
)

from ns_splat_plus.viewer.page import TRAINING_COMPLETED_LABEL


def _finished_run(tmp_path: Path) -> Path:
    """config.yml of a 6-step run (in-process, no viewer, no warmup): its last checkpoint is step 5."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=6)
    config.warmup_steps = 0
    try:
        build_trainer(config).train()
    finally:
        close_writers()
    return config.get_base_dir() / "config.yml"


def _checkpoint_step(config_yml: Path) -> int:
    steps = [int(p.stem.split("-")[1]) for p in (config_yml.parent / "nerfstudio_models").glob("step-*.ckpt")]
    return max(steps)


def _body(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.slow
def test_ns_viewer_shows_the_finished_run_at_its_last_step_from_a_training_camera(tmp_path, browser):  # noqa: F811
    config_yml = _finished_run(tmp_path)
    last_step = _checkpoint_step(config_yml)
    assert last_step > 0
    log, port = tmp_path / "ns-viewer.log", free_port()
    cmd = [console_script("ns-viewer"), "--load-config", str(config_yml),
           "--viewer.websocket-host", "127.0.0.1", "--viewer.websocket-port", str(port)]  # fmt: skip
    with open(log, "w") as log_file:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    try:
        _wait(lambda: _serves(port), 180, "ns-viewer to serve its page", process, log)
        assert "Done loading checkpoint" in _tail(log, 10**7)  # eval_setup loaded the last checkpoint
        browser.get(f"http://127.0.0.1:{port}")
        _wait(lambda: "Hide Train Cams" in _body(browser), 60, "the viewer GUI of the finished run", process, log)
        # nerfstudio's "Step" line shows the checkpoint's step (it said "Step: 0")
        step_line = _wait(lambda: re.search(r"Step: (\d+)", _body(browser)), 30, "nerfstudio's Step line")
        assert int(step_line.group(1)) == last_step, (step_line.group(0), last_step, _tail(log))
        # no training controls: a finished run cannot be paused or resumed
        _wait(lambda: _button(browser, TRAINING_COMPLETED_LABEL) is not None, 30, f"'{TRAINING_COMPLETED_LABEL}'")
        assert _button(browser, "Pause Training") is None and _button(browser, "Resume Training") is None
        # the first view: training camera 0, as the live viewer starts (the page answers the server's pose)
        _wait(
            lambda: len(_of_kind(_page_messages(browser), "received", "SetCameraPositionMessage")) > 0,
            30,
            "the server to place the page's camera",
            process,
            log,
        )
        events = _wait(lambda: _settled_camera(browser), 30, "the page's camera at the training camera")
        assert_page_starts_at_training_camera(events)
        # the theme without nerfstudio's remote logo (a broken image offline)
        themes = _of_kind(events, "received", "ThemeConfigurationMessage")
        assert themes and not (themes[-1]["titlebar_content"] or {}).get("image"), themes[-1:]
    finally:
        browser.get("about:blank")
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _settled_camera(driver):
    """The page's messages once it has sent a camera after the server placed it (else None)."""
    events = _page_messages(driver)
    order = [(where, m["type"]) for where, m in events]
    placed = [i for i, e in enumerate(order) if e == ("received", "SetCameraPositionMessage")]
    sent = [i for i, e in enumerate(order) if e == ("sent", "ViewerCameraMessage")]
    return events if placed and sent and sent[-1] > placed[0] else None
