"""Upstream touch points: the version check, LPIPS (local, downloaded, offline), weights_only checkpoints."""

from __future__ import annotations

import functools
import http.server
import os
import socket
import subprocess
import threading

import numpy as np
import pytest
import torch

from ns_splat_plus import upstream
from splatbench.scenes import SceneSpec, make_scene


def test_version_check_names_both_versions_and_what_to_do(monkeypatch):
    upstream.check_versions({"nerfstudio": "1.1.5", "gsplat": "1.4.0"})  # the supported pair passes
    with pytest.raises(upstream.UnsupportedVersionError) as err:
        upstream.check_versions({"nerfstudio": "1.1.5", "gsplat": "1.5.3"})
    message = str(err.value)
    assert "gsplat 1.5.3" in message and "nerfstudio 1.1.5" in message and "gsplat==1.4.0" in message
    with pytest.raises(upstream.UnsupportedVersionError, match="nerfstudio 1.2.0"):
        upstream.check_versions({"nerfstudio": "1.2.0", "gsplat": "1.4.0"})
    monkeypatch.setenv(upstream.SKIP_VERSION_CHECK_ENV, "1")
    upstream.check_versions({"nerfstudio": "1.1.5", "gsplat": "1.5.3"})  # the documented escape hatch


def test_torch_and_triton_outside_their_bounds_warn_once_and_do_not_stop(monkeypatch, capsys):
    from ns_splat_plus.upstream import versions

    monkeypatch.setattr(versions, "WARNED", set())
    pair = {"nerfstudio": "1.1.5", "gsplat": "1.4.0"}
    for inside in (
        {"torch": "2.11.0+cu130", "triton": "3.6.0"},
        {"torch": "2.14.1", "triton": "3.8.0"},
        {"torch": "2.6.0", "triton": None},
    ):  # the GPU machine's, the CPU machine's; no Triton
        upstream.check_versions({**pair, **inside})
    assert "outside the versions" not in capsys.readouterr().out
    for _ in range(2):
        upstream.check_versions({**pair, "torch": "2.16.0", "triton": "3.1.0"})
    out = capsys.readouterr().out
    assert out.count("torch 2.16.0 is outside") == 1 and "torch>=2.6,<2.16" in out, out
    assert out.count("triton 3.1.0 is outside") == 1 and "triton>=3.2,<3.10" in out, out


def test_version_bounds_are_pyprojects():
    """upstream.VERSION_BOUNDS (what the start-up check warns outside of) and pyproject.toml's torch and
    Triton requirements say the same."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    for name, (lowest, below) in upstream.VERSION_BOUNDS.items():
        assert re.search(rf'"{name}>={re.escape(lowest)},<{re.escape(below)}[;"]', text), name


def test_every_private_api_with_a_fallback_is_probed_at_start_up(monkeypatch):
    from ns_splat_plus.upstream import versions

    monkeypatch.setattr(versions, "PROBES", {})
    upstream.check_versions()
    assert set(versions.PROBES) == {"fused_adam", "triton_launch"}
    assert versions.PROBES["fused_adam"] is None  # this torch is one the fused Adam was written for


@pytest.mark.slow
def test_ns_train_with_another_gsplat_stops_at_start_with_one_message(tmp_path):
    """A gsplat 1.5.3 distribution (metadata only) ahead on the path: ns-train stops before any work."""
    from clirun import console_script

    fake = tmp_path / "site" / "gsplat-1.5.3.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: gsplat\nVersion: 1.5.3\n")
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=4, width=16, height=12, focal=14.0, n_points=50))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    proc = subprocess.run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            str(scene),
            "--machine.device-type",
            "cpu",
            "--output-dir",
            str(tmp_path / "out"),
            "colmap",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert "gsplat 1.5.3" in text and "gsplat==1.4.0" in text and "Traceback" not in text, text[-3000:]
    assert not (tmp_path / "out").exists()  # stopped before the run directory


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def weights_server(tmp_path):
    """A loopback HTTP server serving stand-in AlexNet weights (no network needed)."""
    import torchvision

    served = tmp_path / "served"
    served.mkdir()
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), served / "alexnet.pth")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alexnet.pth"
    server.shutdown()


def test_lpips_downloads_the_weights_when_online(tmp_path, monkeypatch, weights_server):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "hub"))
    monkeypatch.delenv(upstream.NO_DOWNLOAD_ENV, raising=False)
    monkeypatch.setenv(upstream.ALEXNET_URL_ENV, weights_server)
    monkeypatch.setattr(upstream.lpips, "_DOWNLOAD_FAILED", None)
    assert not upstream.alexnet_weights_path().exists()
    lpips = upstream.build_lpips()
    assert lpips is not None and upstream.alexnet_weights_path().is_file()
    a, b = torch.rand(1, 3, 64, 64), torch.rand(1, 3, 64, 64)
    assert float(lpips(a, a)) == 0.0 and float(lpips(a, b)) > 0.0


def test_lpips_offline_is_none_with_one_warning_naming_the_failure(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:  # a loopback port nobody listens on: connection refused, at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "hub"))
    monkeypatch.delenv(upstream.NO_DOWNLOAD_ENV, raising=False)
    monkeypatch.setenv(upstream.ALEXNET_URL_ENV, f"http://127.0.0.1:{port}/alexnet.pth")
    monkeypatch.setattr(upstream.lpips, "_DOWNLOAD_FAILED", None)
    monkeypatch.setattr(upstream.lpips, "_LPIPS_WARNED", False)
    assert upstream.build_lpips() is None and upstream.build_lpips() is None
    out = capsys.readouterr().out
    assert out.count("LPIPS unavailable") == 1 and "URLError" in out
    assert not list((tmp_path / "hub").rglob("*.part"))  # nothing half-downloaded is left


def test_lpips_is_none_without_local_weights(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(upstream.lpips, "_LPIPS_WARNED", False)
    assert upstream.build_lpips() is None
    assert upstream.build_lpips() is None
    out = capsys.readouterr().out
    assert out.count("LPIPS unavailable") == 1  # one warning, not one per model
    assert str(tmp_path) in out


def test_lpips_is_built_from_local_weights_without_network(tmp_path, monkeypatch):
    import torchvision

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    weights = upstream.alexnet_weights_path()
    assert str(weights).startswith(str(tmp_path))
    weights.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)  # stand-in for the real file
    lpips = upstream.build_lpips()
    assert lpips is not None
    a, b = torch.rand(1, 3, 64, 64), torch.rand(1, 3, 64, 64)
    assert float(lpips(a, a)) == 0.0
    assert float(lpips(a, b)) > 0.0


def test_checkpoint_structures_become_weights_only_loadable(tmp_path):
    state = {
        "step": np.int64(7),
        "schedulers": {"means": {"_last_lr": [np.float64(1.6e-4)], "base_lrs": (np.float32(2.0),)}},
        "array": np.arange(3, dtype=np.float32),
        "tensor": torch.ones(2),
        "name": "splat-plus",
        "nothing": None,
    }
    path = tmp_path / "ckpt.pt"
    torch.save(state, path)
    try:
        torch.load(path, weights_only=True)
        raw_loads = True
    except Exception:  # torch >= 2.6 refuses numpy scalars: nerfstudio #3683
        raw_loads = False
    torch.save(upstream.weights_only_safe(state), path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["step"] == 7 and isinstance(loaded["step"], int)
    assert loaded["schedulers"]["means"]["_last_lr"] == [1.6e-4]
    assert loaded["schedulers"]["means"]["base_lrs"] == (2.0,)
    assert torch.equal(loaded["array"], torch.arange(3, dtype=torch.float32))
    assert torch.equal(loaded["tensor"], torch.ones(2))
    assert loaded["name"] == "splat-plus" and loaded["nothing"] is None
    assert not raw_loads, "this torch accepts numpy scalars with weights_only: the test proves nothing here"


class _RenderThread(threading.Thread):
    """nerfstudio 1.1.5's RenderStateMachine loop, without the rendering: a daemon thread that waits for
    camera moves while ``running``."""

    def __init__(self):
        super().__init__(daemon=True)
        self.running = True
        self.render_trigger = threading.Event()
        self.loops = 0

    def run(self):
        while self.running:
            if not self.render_trigger.wait(0.2):
                self.loops += 1
            self.render_trigger.clear()


def test_nerfstudio_render_threads_have_what_stop_viewer_renders_uses():
    import inspect

    from nerfstudio.viewer.render_state_machine import RenderStateMachine
    from nerfstudio.viewer.viewer import Viewer

    source = inspect.getsource(RenderStateMachine)
    assert issubclass(RenderStateMachine, threading.Thread)
    assert "self.running = True" in source and "while self.running" in source
    assert "self.render_trigger = threading.Event()" in source
    assert "self.render_statemachines" in inspect.getsource(Viewer.__init__)


def test_training_end_stops_the_viewers_render_threads_before_the_process_exits():
    """A render thread still inside torch when the interpreter exits can abort a finished run (-6)."""
    from types import SimpleNamespace

    from ns_splat_plus.training.trainer import SplatPlusTrainer

    threads = {1: _RenderThread(), 2: _RenderThread()}
    for thread in threads.values():
        thread.start()
    stopped = []
    trainer = SimpleNamespace(
        step=299, quit_on_train_completion=True, training_state="completed",
        pipeline=SimpleNamespace(model=SimpleNamespace(num_points=800)),
        health_panel=SimpleNamespace(update=lambda *args, **kwargs: None),
        viewer_state=SimpleNamespace(render_statemachines=threads, viser_server=SimpleNamespace(stop=lambda: stopped.append(1))),
    )  # fmt: skip
    SplatPlusTrainer._train_complete_viewer(trainer)
    assert not any(thread.is_alive() for thread in threads.values())
    assert stopped == [1]
    assert upstream.stop_viewer_renders(SimpleNamespace(render_statemachines={})) == 0  # no browser: nothing to do


def test_ply_writer_gives_nerfstudios_bytes_at_once(tmp_path, monkeypatch):
    """ns-export of a splat-plus run writes the bytes of nerfstudio 1.1.5's per-value loop (float64 and float32
    columns as float32, uint8 as bytes, in the dict's order), and keeps its errors; the replacement is the
    exporter's static method, installed only once the exporter module is loaded."""
    from collections import OrderedDict

    from nerfstudio.scripts import exporter

    rng = np.random.default_rng(3)
    columns = OrderedDict(
        x=rng.standard_normal(37), f_dc_0=rng.standard_normal(37).astype(np.float32),
        red=rng.integers(0, 256, 37, dtype=np.uint8), opacity=rng.standard_normal(37).astype(np.float16),
    )  # fmt: skip
    original = exporter.ExportGaussianSplat.write_ply
    original(str(tmp_path / "nerfstudio.ply"), 37, columns)
    upstream.write_ply(str(tmp_path / "splat_plus.ply"), 37, columns)
    assert (tmp_path / "splat_plus.ply").read_bytes() == (tmp_path / "nerfstudio.ply").read_bytes()
    bad_inputs = [
        ({**columns, "y": np.zeros(36)}, "Count does not match"),
        ({"x": np.zeros(37, np.int32)}, "float or uint8"),
    ]
    for bad, message in bad_inputs:
        with pytest.raises(ValueError, match=message):
            upstream.write_ply(str(tmp_path / "bad.ply"), 37, OrderedDict(bad))
    monkeypatch.setattr(exporter.ExportGaussianSplat, "write_ply", original)
    assert upstream.announce_gaussian_splat_export()
    assert exporter.ExportGaussianSplat.write_ply is not original  # not nerfstudio's loop any more
    exporter.ExportGaussianSplat.write_ply(str(tmp_path / "announced.ply"), 37, columns)
    assert (tmp_path / "announced.ply").read_bytes() == (tmp_path / "nerfstudio.ply").read_bytes()


def test_external_methods_are_listed_without_inspect_stack_and_a_user_s_choice_still_reaches_nerfstudio(monkeypatch):
    """nerfstudio lists 26 uninstalled external methods at the import of ``method_configs`` (1.25 s of
    ``inspect.stack``): in splat-plus commands the listing skips ``inspect.stack``, and a dummy made
    anywhere else still runs nerfstudio's own ``__post_init__`` (its offer to install the method)."""
    from nerfstudio.configs import external_methods

    dummy = external_methods.ExternalMethodDummyTrainerConfig
    offers = []
    # nerfstudio's __post_init__ (the one caller of inspect.stack here), recorded
    monkeypatch.setattr(dummy, "__post_init__", lambda self: offers.append(self.method_name))
    upstream.list_external_methods_without_inspect_stack()
    upstream.list_external_methods_without_inspect_stack()  # once is enough: not wrapped twice
    listed = external_methods.get_external_methods()
    assert len(listed[0]) >= 20 and offers == []  # listed without reaching nerfstudio's __post_init__
    method = next(iter(listed[0].values())).method
    dummy(method_name="chosen-by-a-user", method=method)
    assert offers == ["chosen-by-a-user"]


def test_viser_icons_read_from_one_index_are_viser_s_own_bytes(monkeypatch):
    """viser 0.2.7 reads its tar's headers from the start for every icon; splat-plus commands read them once
    (upstream/viser_private.py). The icons nerfstudio's viewer and ours ask for, and some others, are
    viser's own; a second viewer's icons do not read the headers again."""
    import random
    import tarfile

    from viser import _gui_api, _gui_handles, _icons

    viser_s_own = _icons.svg_from_icon
    with tarfile.open(_icons.ICONS_DIR / "tabler-icons.tar") as tar:
        every_icon = sorted(m.name.removesuffix(".svg") for m in tar.getmembers() if m.isfile())
    assert not getattr(viser_s_own, "reads_one_index", False), "this test's process is not a splat-plus command"
    for module in (_icons, _gui_api, _gui_handles):  # monkeypatch restores viser's own after the test
        monkeypatch.setattr(module, "svg_from_icon", module.svg_from_icon)
    assert upstream.read_icons_from_one_index()
    indexed = _icons.svg_from_icon
    assert _gui_api.svg_from_icon is indexed and _gui_handles.svg_from_icon is indexed
    assert upstream.read_icons_from_one_index() and _icons.svg_from_icon is indexed  # not wrapped twice
    names = ["player-pause", "player-play", "x", "circle-check", "device-floppy", "camera", "video"]
    names += random.Random(0).sample(every_icon, 8)
    expected = [viser_s_own(name) for name in names]
    opened = []
    real_open = tarfile.open
    monkeypatch.setattr(tarfile, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    assert [indexed(name) for name in names] == expected
    assert len(opened) == 1, f"the tar opened {len(opened)} times for {len(names)} icons (viser: once per icon)"
    before = len(opened)
    for name in names:
        indexed(name)
    assert len(opened) == before, "the tar's headers read again"


def _fake_transformers(site, marker):
    """A ``transformers`` 4.40 distribution in ``site`` whose import writes ``marker`` and then fails, as a
    broken install does (torchmetrics imports it wherever transformers >= 4.4 is installed)."""
    package = site / "transformers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise ImportError('a broken transformers install')\n"
    )
    info = site / "transformers-4.40.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.40.0\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow  # fresh interpreters: torchmetrics is imported once per process
def test_torchmetrics_is_imported_without_transformers(tmp_path):
    """ns-eval's metrics import torchmetrics without transformers (seconds on the GPU machine), and so work with
    a transformers that cannot be imported; torchmetrics' own import would import it (and fail)."""
    import sys

    marker = tmp_path / "transformers-imported"
    env = _fake_transformers(tmp_path / "site", marker)
    plain = subprocess.run([sys.executable, "-c", "import torchmetrics"], env=env, capture_output=True, text=True)
    assert plain.returncode != 0 and "a broken transformers install" in plain.stderr  # the fake is what it seems
    assert marker.exists()
    marker.unlink()
    ours = """
import importlib.metadata, sys
import lightning_utilities.core.imports as requirements
from ns_splat_plus import upstream
upstream.import_torchmetrics()
from torchmetrics.functional.image import peak_signal_noise_ratio
from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity
import torch
print(float(peak_signal_noise_ratio(torch.zeros(1, 3, 4, 4), torch.full((1, 3, 4, 4), 0.5), data_range=1.0)))
assert "transformers" not in sys.modules
assert requirements._version is importlib.metadata.version  # the lookup is back as it was
assert importlib.metadata.version("transformers") == "4.40.0"
"""
    proc = subprocess.run([sys.executable, "-c", ours], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) == pytest.approx(6.0206, abs=1e-3)  # 10 log10(1 / 0.25)
    assert not marker.exists()
