"""Loading gsplat's CUDA extension says so when it turns into a build (minutes, silent in gsplat when an older
build exists); a load that takes its usual second prints nothing."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from ns_splat_plus import upstream
from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.parallel import launch

NOTICE = "gsplat is compiling its CUDA extension"


def _slow_extension(seconds: float):
    def load():
        time.sleep(seconds)
        return "extension"

    return load


def test_a_slow_load_says_it_is_compiling_and_when_it_is_ready(monkeypatch, capsys):
    monkeypatch.setattr(upstream, "gsplat_extension", _slow_extension(0.6))
    assert launch.load_gsplat_extension(notice_after_s=0.1) == "extension"
    out = capsys.readouterr().out
    assert NOTICE in out
    assert "CUDA extension ready after" in out
    assert out.index(NOTICE) < out.index("ready after")  # said while it compiled, not after


def test_a_quick_load_prints_nothing(monkeypatch, capsys):
    monkeypatch.setattr(upstream, "gsplat_extension", lambda: "extension")
    assert launch.load_gsplat_extension(notice_after_s=0.2) == "extension"
    time.sleep(0.4)  # the notice's timer would have fired by now had the load not cancelled it
    assert capsys.readouterr().out == ""


def test_the_launch_loads_gsplat_through_the_notice(monkeypatch, capsys):
    monkeypatch.setattr(launch.load_gsplat_extension, "__defaults__", (0.1,))
    monkeypatch.setattr(upstream, "gsplat_extension", _slow_extension(0.4))
    launch.build_gsplat_once(SimpleNamespace(external_ranks=False))
    assert NOTICE in capsys.readouterr().out
    monkeypatch.setattr(upstream, "gsplat_extension", lambda: None)
    with pytest.raises(SplatPlusError, match="no CUDA toolkit"):
        launch.build_gsplat_once(SimpleNamespace(external_ranks=False))
