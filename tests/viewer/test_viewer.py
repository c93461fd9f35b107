"""The viser viewer: the "Training health" panel (unit and in headless Chromium), the batch-job exit
rule, and ns-viewer on a finished run.

The browser tests drive Debian's chromium + chromium-driver through selenium; they fail (never skip)
when those are missing, because CI installs them (``apt-get install chromium chromium-driver``).
The screenshot lands in test-artifacts/viewer.png under the repository root. The page records the
viser messages it sends and receives (:data:`RECORD_VISER_MESSAGES`) and Chromium its requests, so
that the tests can check what the browser was told and did (its camera, the Step line, the theme).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional
from urllib.parse import urlparse

import numpy as np
import pytest
from clirun import console_script, free_port
from inprocess import build_trainer, close_writers, small_scene, trainer_config  # noqa: E402

from ns_splat_plus.viewer import (
    PANEL_TITLE,
    TrainingHealthPanel,
    format_refine,
    resolve_quit_on_train_completion,
)
from ns_splat_plus.viewer.page import TRAINING_COMPLETED_LABEL
from splatbench.scenes import SceneSpec, make_scene

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


# --- the exit rule ---------------------------------------------------------------------------------


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_explicit_setting_wins():
    assert resolve_quit_on_train_completion(True, {}, _Stream(True), _Stream(True))[0] is True
    assert resolve_quit_on_train_completion(False, {"SLURM_JOB_ID": "7"}, _Stream(False), _Stream(False))[0] is False


@pytest.mark.parametrize(
    "environ, stdin_tty, stdout_tty, expected",
    [
        ({}, True, True, False),  # a terminal: keep the viewer open
        ({}, True, False, False),  # ns-train ... | tee log
        ({}, False, True, False),
        ({}, False, False, True),  # nohup, cron, a subprocess
        ({"SLURM_JOB_ID": "123"}, True, True, True),
        ({"CI": "true"}, True, True, True),
        ({"CI": "false"}, True, True, False),
        ({"CI": ""}, True, True, False),
    ],
)
def test_auto_rule(environ, stdin_tty, stdout_tty, expected):
    quit_on_completion, reason = resolve_quit_on_train_completion(
        None, environ, _Stream(stdin_tty), _Stream(stdout_tty)
    )
    assert quit_on_completion is expected
    assert reason


@pytest.mark.slow
def test_auto_rule_on_a_real_terminal():
    """A process whose stdin/stdout are a pseudo-terminal keeps the viewer; with pipes it exits."""
    import pty

    code = (
        "from ns_splat_plus.viewer import resolve_quit_on_train_completion as r;"
        "import sys; print('QUIT=%s' % r(None)[0], file=sys.stderr)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SLURM_JOB_ID")}
    primary, secondary = pty.openpty()
    try:
        with_tty = subprocess.run(
            [sys.executable, "-c", code],
            stdin=secondary,
            stdout=secondary,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    without_tty = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120
    )
    assert "QUIT=False" in with_tty.stderr.decode(), with_tty.stderr.decode()[-2000:]
    assert "QUIT=True" in without_tty.stderr.decode(), without_tty.stderr.decode()[-2000:]


# --- the panel without a browser --------------------------------------------------------------------


class _FakeMarkdown:
    def __init__(self, content: str) -> None:
        self.content = content
        self.order = 1.0


class _FakeFolder:
    def __enter__(self):
        return self

    def __exit__(self, *args):
        return None


class _FakeGui:
    def __init__(self) -> None:
        self.markdowns: List[_FakeMarkdown] = []

    def add_folder(self, label, order=None):
        self.folder_label = label
        return _FakeFolder()

    def add_markdown(self, content):
        self.markdowns.append(_FakeMarkdown(content))
        return self.markdowns[-1]


class _FakeServer:
    """The slice of viser.ViserServer the panel uses; ``clients`` decides who is connected."""

    def __init__(self) -> None:
        self.gui = _FakeGui()
        self.clients: Dict[int, object] = {}
        self.client_lookups = 0
        self.connect_callbacks = []

    def get_clients(self):
        self.client_lookups += 1
        return dict(self.clients)

    def on_client_connect(self, callback):
        self.connect_callbacks.append(callback)


def test_panel_sends_only_to_connected_browsers_and_throttles():
    server = _FakeServer()
    panel = TrainingHealthPanel(server, devices="1 rank (single process) · device cpu", max_steps=100, interval_s=60)
    markdown = server.gui.markdowns[0]
    assert server.gui.folder_label == PANEL_TITLE

    assert panel.update(1, 400, state="training") is False  # nobody connected
    assert panel.pushes == 0 and "400" not in markdown.content

    server.clients[1] = object()
    for callback in server.connect_callbacks:  # what viser does when a browser connects
        callback(object())
    assert panel.pushes == 1 and "**Gaussians:** 400" in markdown.content

    # records shaped like strategy.py's and warmup.py's
    panel.on_refine(
        {
            "step": 60,
            "event": "refine",
            "strategy": "default",
            "duplicated": 12,
            "split": 30,
            "pruned": 5,
            "num_gaussians_before": 400,
            "num_gaussians": 437,
            "grad2d": {
                "threshold": 2e-4,
                "num_visible": 390,
                "mean": 1.5e-5,
                "median": 9e-6,
                "p90": 4e-5,
                "p99": 2.1e-4,
                "max": 3.2e-4,
                "num_over_threshold": 27,
            },
        }
    )
    panel.on_gradient_summary(
        {
            "step": 99,
            "event": "gradient_summary",
            "first_step": 0,
            "num_steps": 100,
            "norm_mean": 2.25e-5,
            "norm_max": 5e-4,
            "norm_max_median": 1e-4,
            "zero_steps": 0,
            "missing_steps": 0,
            "visible_mean": 351.6,
        }
    )
    panel.on_warmup(
        {
            "steps": 5,
            "seconds": 0.42,
            "first_step_seconds": 0.2,
            "means2d_grad_max": 1e-3,
            "nonzero_gradient_steps": 5,
            "restored": True,
            "later_sizes": [(18, 24), (36, 48)],
        }
    )
    assert panel.update(70, 437) is False  # within interval_s of the last tick
    assert panel.update(72, 437, force=True) is True
    text = markdown.content
    assert "**Step:** 72 of 100 (training)" in text
    assert "**Gaussians:** 437" in text
    assert "step 60: +12 duplicated, +30 split, -5 pruned → 437 Gaussians (refine #1)" in text
    assert "**Refine grad2d:** mean 1.5e-05 · median 9e-06 · p90 4e-05 · p99 0.00021 · max 0.00032" in text
    assert "threshold 0.0002 (27 over) · 390 visible" in text
    assert "**Gradient summary:** steps 0–99: mean norm 2.25e-05 · max 0.0005 · all-zero on 0 of 100 steps" in text
    from ns_splat_plus.viewer.panel import format_gradient_summary

    after_refine = {
        "step": 199,
        "first_step": 100,
        "num_steps": 100,
        "sampled_steps": 10,
        "norm_mean": 1e-5,
        "zero_steps": 1,
    }
    assert "all-zero on 1 of 10 sampled steps" in format_gradient_summary(after_refine)
    assert (
        "**Warmup:** 5 steps in 0.42 s (first 0.20 s) · then rendered at 24x18, 48x36 · non-zero gradients on 5 of 5 "
        "· max 0.001" in text
    )
    assert "**Ranks / GPUs:** 1 rank (single process) · device cpu" in text


def test_a_push_shows_one_step_while_another_thread_updates():
    """A browser connecting (viser's thread) pushes while the training thread records the next step: the
    push listener (nerfstudio's Step line) and the panel must show the same step. The update is made from
    inside the listener, the moment at which the CI run saw the Step line at 112 under a panel at 114."""
    server = _FakeServer()
    panel = TrainingHealthPanel(server, max_steps=300, interval_s=60)
    markdown = server.gui.markdowns[0]
    server.clients[1] = object()
    panel.update(112, 800, state="training")
    seen, racers = [], []

    def record_then_race(p):
        seen.append(p.step)
        if not racers:  # the training thread's next step, while this push is under way
            racers.append(threading.Thread(target=panel.update, args=(114,)))
            racers[0].start()
            racers[0].join(0.2)  # it waits for the push to finish

    panel.push_listeners.append(record_then_race)
    panel.push(connected=True)
    assert f"**Step:** {seen[0]} of 300" in markdown.content, (seen, markdown.content)
    racers[0].join()
    panel.push(connected=True)
    assert seen == [112, 114] and "**Step:** 114 of 300" in markdown.content
    panel.update(None, state="paused", force=True)  # a Pause button keeps the training thread's step
    assert seen[-1] == 114 and "**Step:** 114 of 300 (paused)" in markdown.content


def test_panel_costs_nothing_without_a_browser():
    """With nobody connected an update is one clock read (no client lookup, no message, no sync)."""
    server = _FakeServer()
    panel = TrainingHealthPanel(server, interval_s=0.5)
    calls = 20000
    start = time.perf_counter()
    for step in range(calls):
        panel.update(step, 1000)
    elapsed = time.perf_counter() - start
    assert panel.pushes == 0
    assert server.client_lookups <= 2 + 2 * elapsed / 0.5  # at most one per interval, not one per step
    # (no wall-clock bound here: timing targets belong in benchmarks; this one prints for reference)
    print(f"{elapsed / calls * 1e6:.2f} µs per update without a browser")


def test_panel_without_a_server_records_values():
    panel = TrainingHealthPanel(None)
    panel.on_refine({"step": 5, "event": "refine", "relocated": 3, "added": 2, "num_gaussians": 12})
    assert panel.update(6, 12) is False
    assert panel.num_gaussians == 12 and "step 5: 3 relocated, +2 added → 12 Gaussians" in format_refine(
        panel.last_refine
    )


# --- the real thing: ns-train with the viewer, in headless Chromium ---------------------------------

NS_TRAIN_STEPS = 300  # refines from step 40 on (gsplat waits num_images + refine_every steps after a reset); long
# enough that the page can pause the run after its first refine even on a fast machine
RUN_ARGS = [
    "--machine.device-type",
    "cpu",
    "--vis",
    "viewer",
    "--viewer.websocket-host",
    "127.0.0.1",
    "--start-paused",
    "True",  # the page connects before step 0; the test presses "Resume Training"
    "--pipeline.model.num-downscales",
    "0",
    "--pipeline.model.warmup-length",
    "20",
    "--pipeline.model.refine-every",
    "20",
    "--pipeline.model.stop-split-at",
    "90",  # refines at 40, 60, 80; then cheap steps until the end
    "--pipeline.model.sh-degree-interval",
    "100",
    "--pipeline.model.grad-summary-every",
    "10",
]


RECORD_VISER_MESSAGES = """
(() => {
  // viser 0.2.7's page talks to the server through a worker (WebsocketServerWorker): record the
  // messages it hands to it ("send") and gets from it ("message_batch") of the kinds the tests read.
  const KINDS = new Set([
    "ViewerCameraMessage", "SetCameraPositionMessage", "SetCameraLookAtMessage", "SetCameraUpDirectionMessage",
    "ThemeConfigurationMessage", "GuiUpdateMessage",
    "SetPositionMessage", "SetOrientationMessage",
  ]);
  const events = (window.__viserMessages = []);
  const keep = (m) => m && KINDS.has(m.type) && (!("name" in m) || String(m.name).endsWith("/camera_00000"));
  const record = (direction, m) => keep(m) && events.push([direction, JSON.parse(JSON.stringify(m))]);
  const NativeWorker = window.Worker;
  window.Worker = class extends NativeWorker {
    constructor(url, options) {
      super(url, options);
      this.viser = String(url).includes("WebsocketServerWorker");
    }
    postMessage(data, transfer) {
      if (this.viser && data && data.type === "send") record("sent", data.message);
      return transfer === undefined ? super.postMessage(data) : super.postMessage(data, transfer);
    }
    get onmessage() {
      return super.onmessage;
    }
    set onmessage(handler) {
      super.onmessage = (event) => {
        if (this.viser && event.data && event.data.type === "message_batch") {
          for (const m of event.data.messages) record("received", m);
        }
        return handler(event);
      };
    }
  };
})();
"""
"""Run in every page before its own scripts (``Page.addScriptToEvaluateOnNewDocument``)."""


def _browser():
    """Headless Chromium through selenium; a clear failure (not a skip) when something is missing.
    Every page records its viser messages (:data:`RECORD_VISER_MESSAGES`); Chromium logs the requests."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not (os.path.exists(path) or shutil.which(Path(path).name))]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: the viewer test needs Debian's browser packages; "
            "install them with `sudo apt-get install chromium chromium-driver`."
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # Network.requestWillBeSent
    options.binary_location = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    driver_path = CHROMEDRIVER if os.path.exists(CHROMEDRIVER) else shutil.which("chromedriver")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_VISER_MESSAGES})
    return driver


def _requested_urls(driver) -> List[str]:
    """The URLs the browser requested since the last call (Chromium's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _page_messages(driver) -> List[list]:
    """[direction ("sent" / "received"), message] of the page so far, in order (:data:`RECORD_VISER_MESSAGES`)."""
    return driver.execute_script("return window.__viserMessages || []")


def _of_kind(events: List[list], direction: str, kind: str) -> List[dict]:
    return [message for where, message in events if where == direction and message["type"] == kind]


def _wait(condition, timeout: float, what: str, process: Optional[subprocess.Popen] = None, log: Optional[Path] = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            pytest.fail(f"process ended (rc {process.returncode}) while waiting for {what}:\n{_tail(log)}")
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{_tail(log)}")


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            return response.status == 200 and b"<html" in response.read().lower()
    except OSError:
        return False


def _tail(log: Optional[Path], chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:] if log is not None and log.exists() else ""


def _panel_text(driver) -> str:
    """The panel's text: the page text from the panel title to the end of its last line (Ranks / GPUs)."""
    from selenium.webdriver.common.by import By

    body = driver.find_element(By.TAG_NAME, "body").text
    start = body.find(PANEL_TITLE)
    if start < 0:
        return ""
    end = body.find("Ranks / GPUs:", start)
    end = body.find("\n", end) if end >= 0 else -1
    return body[start:] if end < 0 else body[start:end]


def _button(driver, label: str):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        shown = [b for b in driver.find_elements(By.XPATH, f"//button[contains(., '{label}')]") if b.is_displayed()]
    except StaleElementReferenceException:
        return None
    return shown[0] if shown else None


def _click_button(driver, label: str) -> None:
    """Click the visible button with this label (retried: React may re-render it between find and click)."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            button = _button(driver, label)
            assert button is not None, f"no '{label}' button on the page"
            button.click()
            return
        except StaleElementReferenceException:
            time.sleep(0.25)
    pytest.fail(f"the '{label}' button kept being re-rendered")


def _render_width(driver) -> int:
    """Width of the last render, from nerfstudio's 'Resolution: WxHpx' line (0 before the first)."""
    from selenium.webdriver.common.by import By

    match = re.search(r"Resolution:\s*(\d+)\D(\d+)px", driver.find_element(By.TAG_NAME, "body").text)
    return int(match.group(1)) if match else 0


def _parse_panel(text: str) -> Dict[str, object]:
    fields: Dict[str, object] = {}
    if m := re.search(r"Step:\s*(\d+) of (\d+) \((\w+)\)", text):
        fields.update(step=int(m.group(1)), max_steps=int(m.group(2)), state=m.group(3))
    if m := re.search(r"Gaussians:\s*(\d+)", text):
        fields["gaussians"] = int(m.group(1))
    if m := re.search(r"Last refine:\s*step (\d+): (.*?) → (\d+) Gaussians \(refine #(\d+)\)", text):
        fields["refine_step"] = int(m.group(1))
        fields["refine_counts"] = {k: int(v) for v, k in re.findall(r"[+-]?(\d+) (\w+)", m.group(2))}
        fields["refine_after"] = int(m.group(3))
        fields["refine_number"] = int(m.group(4))
    return fields


def _run_dir(out: Path) -> Path:
    configs = list(out.glob("**/config.yml"))
    assert len(configs) == 1, configs
    return configs[0].parent


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def viewer_run(tmp_path_factory, browser):
    """ns-train splat-plus with the viewer, watched by headless Chromium until after the first refine."""
    from selenium.webdriver.common.by import By

    tmp = tmp_path_factory.mktemp("viewer")
    scene = make_scene(tmp / "scene", SceneSpec(n_views=16, width=48, height=36, focal=42.0))
    out, log = tmp / "out", tmp / "ns-train.log"
    port = free_port()
    cmd = [
        console_script("ns-train"),
        "splat-plus",
        "--data",
        str(scene),
        "--output-dir",
        str(out),
        "--max-num-iterations",
        str(NS_TRAIN_STEPS),
        "--viewer.websocket-port",
        str(port),
        *RUN_ARGS,
        "colmap",
    ]
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    env["PYTHONUNBUFFERED"] = "1"
    # stdin/stdout are not terminals: the auto rule must end the run after its last step
    with open(log, "w") as log_file:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    try:
        _wait(lambda: _serves(port), 180, "the viewer to serve its page", process, log)
        # the page as seen by a user who opens it once the run is set up (a browser that connects while
        # nerfstudio builds its viewer still gets nerfstudio's theme: ns_splat_plus.viewer.page), after
        # warmup (a render during warmup can hit the model between warmup's steps and its restore)
        _wait(lambda: "Warmup: " in _tail(log, 10**7), 240, "the run's set-up and warmup", process, log)
        browser.get(f"http://127.0.0.1:{port}")
        paused = _wait(
            lambda: "(paused)" in (t := _panel_text(browser)) and " steps in " in t and t,
            120,
            "the panel with the warmup result",
            process,
            log,
        )
        _click_button(browser, "Resume Training")
        refined = _wait(
            lambda: "refine #" in (t := _panel_text(browser)) and "Gradient summary: steps" in t and t,
            240,
            "a refine event and a gradient summary in the panel",
            process,
            log,
        )
        # Pause from the page: the run stays alive (and the page connected) for the screenshot.
        _click_button(browser, "Pause Training")
        _wait(lambda: "(paused)" in _panel_text(browser), 60, "the panel to show the pause", process, log)
        # nerfstudio renders the scene when the browser's camera changes: nudge it with a resize. The scene
        # render only makes the screenshot nicer (the panel is what is checked), so a late one does not fail.
        browser.set_window_size(1400, 860)
        deadline = time.monotonic() + 60
        while _render_width(browser) == 0 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
        time.sleep(2.0)  # the render after the pause
        refined = _panel_text(browser) or refined
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot = ARTIFACTS / "viewer.png"
        browser.save_screenshot(str(screenshot))
        page = browser.find_element(By.TAG_NAME, "body").text
        assert "Connecting" not in page and process.poll() is None, "the page lost the run before the screenshot"
        _click_button(browser, "Resume Training")
        _wait(lambda: "(training)" in _panel_text(browser), 60, "the panel to show the resume", process, log)
        time.sleep(2.0)  # a few panel pushes while training
        page_messages = _page_messages(browser)
        images = [image.get_attribute("src") or "" for image in browser.find_elements(By.TAG_NAME, "img")]
        requests = _requested_urls(browser)
        browser.get("about:blank")  # disconnect: the rest of training runs without viewer renders
        try:
            returncode = process.wait(timeout=240)
        except subprocess.TimeoutExpired:
            returncode = None
        yield {
            "paused": paused,
            "refined": refined,
            "returncode": returncode,
            "log": log,
            "out": out,
            "screenshot": screenshot,
            "browser": browser,
            "page_messages": page_messages,
            "images": images,
            "requests": requests,
        }
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_run_ends_on_its_own_without_a_terminal(viewer_run):
    assert viewer_run["returncode"] is not None, "ns-train kept running after its last step:\n" + _tail(
        viewer_run["log"]
    )
    assert viewer_run["returncode"] == 0, _tail(viewer_run["log"])
    log = viewer_run["log"].read_text(errors="replace")
    assert "Viewer: the run exits after its last step" in log


@pytest.mark.slow
def test_panel_shows_training_health_in_chromium(viewer_run):
    log = viewer_run["log"].read_text(errors="replace")
    paused = _parse_panel(viewer_run["paused"])
    initial = re.search(r"Initial Gaussians: (\d+)", log)
    assert initial, "the run's log has no 'Initial Gaussians' line"
    assert paused["step"] == 0 and paused["state"] == "paused" and paused["max_steps"] == NS_TRAIN_STEPS, paused
    assert paused["gaussians"] == int(initial.group(1)), (viewer_run["paused"], initial.group(0))
    assert "Ranks / GPUs: 1 rank (single process) · device cpu" in viewer_run["paused"]
    warmup_steps = re.search(r"^warmup_steps: (\d+)$", (_run_dir(viewer_run["out"]) / "config.yml").read_text(), re.M)
    assert warmup_steps and int(warmup_steps.group(1)) > 0
    assert f"Warmup: {warmup_steps.group(1)} steps in " in viewer_run["paused"], viewer_run["paused"]

    seen = _parse_panel(viewer_run["refined"])
    assert seen.get("state") == "paused" and seen["step"] >= seen["refine_step"] > 0, viewer_run["refined"]
    # between refine events the count does not change: the panel's count is the last event's result
    assert seen["gaussians"] == seen["refine_after"], viewer_run["refined"]

    # the event the panel showed is the one densification.jsonl recorded for that step
    jsonl = _run_dir(viewer_run["out"]) / "densification.jsonl"
    assert jsonl.exists(), f"no {jsonl}"
    events = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    refines = [e for e in events if e.get("event") == "refine"]
    logged = [e for e in refines if e["step"] == seen["refine_step"]]
    assert len(logged) == 1, (seen, refines[:3])
    assert refines.index(logged[0]) + 1 == seen["refine_number"]
    for key, count in seen["refine_counts"].items():
        assert logged[0][key] == count, (key, logged[0], viewer_run["refined"])
    assert logged[0]["num_gaussians"] == seen["refine_after"], logged[0]
    # the gradient summary shown is one densification.jsonl recorded
    summary = re.search(r"Gradient summary: steps (\d+)–(\d+): mean norm", viewer_run["refined"])
    summaries = [(e["first_step"], e["step"]) for e in events if e.get("event") == "gradient_summary"]
    assert summary and (int(summary.group(1)), int(summary.group(2))) in summaries, (summary, summaries)
    assert viewer_run["screenshot"].stat().st_size > 10_000


@pytest.mark.slow
def test_browser_starts_at_the_first_training_camera(viewer_run):
    """A newly connected browser is put where a click on training camera 0's frustum puts it, and the page
    then sends that camera (the view nerfstudio renders), instead of viser's default view of a smear."""
    assert_page_starts_at_training_camera(viewer_run["page_messages"])


def assert_page_starts_at_training_camera(events: List[list]) -> None:
    """The page's camera (the last it sent) is training camera 0's frustum pose, set by the server."""
    import viser.transforms as vtf

    frustum_positions = _of_kind(events, "received", "SetPositionMessage")
    frustum_orientations = _of_kind(events, "received", "SetOrientationMessage")
    assert frustum_positions and frustum_orientations, "nerfstudio drew no frustum for training camera 0"
    where = np.array(frustum_positions[0]["position"])  # init_scene's pose of /cameras/camera_00000
    looking = vtf.SO3(np.array(frustum_orientations[0]["wxyz"])).as_matrix()[:, 2]  # OpenCV: +Z forward
    cameras = _of_kind(events, "sent", "ViewerCameraMessage")
    assert cameras, "the page sent no camera"
    # the page's camera after the last message it sent (the test only resized the window since)
    position, look_at = np.array(cameras[-1]["position"]), np.array(cameras[-1]["look_at"])
    direction = (look_at - position) / np.linalg.norm(look_at - position)
    scale = 1.0 + np.linalg.norm(where)
    assert np.allclose(position, where, atol=1e-4 * scale), (position.tolist(), where.tolist(), cameras[0])
    assert np.allclose(direction, looking, atol=1e-4), (direction.tolist(), looking.tolist())
    assert _of_kind(events, "received", "SetCameraPositionMessage"), "the server never moved the page's camera"


@pytest.mark.slow
def test_nerfstudio_step_line_follows_the_panel(viewer_run):
    """nerfstudio's own "Step: N" line is at least at the panel's step each time the page gets the panel
    (nerfstudio sets it only when it renders: it stood at 104 while the panel said 296)."""
    stats_ids, panel_ids, stats_step = set(), set(), None
    seen = []  # (panel step, state, nerfstudio's step when the panel arrived)
    for message in _of_kind(viewer_run["page_messages"], "received", "GuiUpdateMessage"):
        text = message["updates"].get("markdown")
        if text is None:
            continue
        if m := re.match(r"Step: (\d+)\s+Resolution:", text):  # nerfstudio's make_stats_markdown
            stats_ids.add(message["id"])
            stats_step = int(m.group(1))
        elif m := re.search(r"\*\*Step:\*\* (\d+) of \d+ \((\w+)\)", text):
            panel_ids.add(message["id"])
            seen.append((int(m.group(1)), m.group(2), stats_step))
    assert len(stats_ids) == 1 and len(panel_ids) == 1, (stats_ids, panel_ids)
    training = [s for s in seen if s[1] == "training" and s[0] > 0]
    assert len(training) >= 3, seen
    # Each push writes the Step line before the panel, so the line never stays behind. nerfstudio's render
    # thread rewrites the line after each render with the step it read before (render_state_machine.py:
    # make_stats_markdown(None, res), a read-modify-write this plugin cannot lock), so one push may arrive
    # with the line a few steps behind (two fresh-clone CIs saw 112 under 114 and 98 under 101); the next push
    # catches it up.
    behind = [i for i, s in enumerate(seen) if s[2] < s[0]]
    stuck = [(seen[i], seen[i + 1]) for i in behind if i + 1 in behind]
    assert not stuck, (
        f"nerfstudio's Step line behind the panel at consecutive pushes (panel step, state, line): {stuck}"
    )
    assert len(behind) <= len(seen) // 4, f"Step line behind the panel at {len(behind)} of {len(seen)} pushes: {seen}"


@pytest.mark.slow
def test_titlebar_makes_no_request_for_a_logo(viewer_run):
    """nerfstudio's theme (buttons, layout, colours) without its logo from docs.nerf.studio: offline that
    was a broken image; no theme the page got names a remote image, and the page requested none."""
    events = viewer_run["page_messages"]
    themes = _of_kind(events, "received", "ThemeConfigurationMessage")
    assert themes, "the page got no theme"
    for theme in themes:
        image = (theme["titlebar_content"] or {}).get("image") or {}
        urls = [image.get("image_url_light") or "", image.get("image_url_dark") or ""]
        assert not [url for url in urls if urlparse(url).netloc], image  # http(s)://host/..., //host/...
    titlebar = themes[-1]["titlebar_content"]
    assert [b["text"] for b in titlebar["buttons"]] == ["Getting Started", "Github", "Documentation"], titlebar
    assert themes[-1]["dark_mode"] and themes[-1]["control_layout"] == "collapsible", themes[-1]
    remote_images = [src for src in viewer_run["images"] if urlparse(src).hostname not in (None, "127.0.0.1")]
    assert not remote_images, remote_images
    logo_requests = [url for url in viewer_run["requests"] if "nerf.studio" in (urlparse(url).hostname or "")]
    assert not logo_requests, logo_requests
    assert any(urlparse(url).hostname == "127.0.0.1" for url in viewer_run["requests"]), viewer_run["requests"]


# ns-viewer --load-config of a finished run (it loads the last checkpoint and serves the viewer page, at the
# checkpoint's step): tests/viewer/test_finished_run_viewer.py


@pytest.mark.slow
def test_pause_buttons_give_way_when_training_completes(tmp_path, browser):
    """A run that keeps its viewer open after the last step (a terminal run): the Pause / Resume buttons
    are hidden and disabled and "Training completed" is shown, on the server and on the page. In-process
    (3 steps, no warmup): the ns-train run of the other tests exits after its last step."""
    from ns_splat_plus import upstream

    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=3)
    config.vis = "viewer"
    config.warmup_steps = 0
    config.viewer.websocket_host = "127.0.0.1"
    config.viewer.websocket_port = free_port()
    config.viewer.quit_on_train_completion = False  # as in a terminal: the viewer stays open
    trainer = build_trainer(config)
    viewer = trainer.viewer_state
    server = viewer.viser_server
    run = threading.Thread(target=trainer.train, name="train", daemon=True)
    try:
        browser.get(f"http://127.0.0.1:{server.get_port()}")
        _wait(lambda: _button(browser, "Pause Training") is not None, 60, "the page with its Pause Training button")
        run.start()
        _wait(
            lambda: _button(browser, TRAINING_COMPLETED_LABEL) is not None or not run.is_alive(),
            120,
            f"'{TRAINING_COMPLETED_LABEL}' on the page",
        )
        assert run.is_alive(), "training ended instead of keeping the viewer open"
        _wait(lambda: "(completed)" in _panel_text(browser), 30, "the panel to show the completion")
        assert _button(browser, "Pause Training") is None and _button(browser, "Resume Training") is None
        for button in (viewer.pause_train, viewer.resume_train):
            assert not button.visible and button.disabled, button.label
        # Ctrl-C, as in the terminal, once nerfstudio serves the finished run (its training_complete ran)
        _wait(lambda: getattr(viewer, "training_state", None) == "completed", 30, "nerfstudio's open viewer")
        time.sleep(0.2)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(run.ident), ctypes.py_object(KeyboardInterrupt))
        run.join(timeout=60)
        assert not run.is_alive(), "Ctrl-C did not close the open viewer"
    finally:
        browser.get("about:blank")
        upstream.stop_viewer_renders(viewer)
        server.stop()
        close_writers()
