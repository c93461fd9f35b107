"""Step time, GPU busy time and memory against the Gaussian count (splatbench.gaussian_scaling,
GpuBusySeries, scripts/gaussian_scaling.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from splatbench import children
from splatbench.gaussian_scaling import count_segments, markdown, memory_fit, scaling_summary
from splatbench.gpu_busy import GpuBusySeries
from splatbench.options import GPU_BUSY_EVERY_ENV, ProbeOptions
from splatbench.settings import BenchmarkSettings

REPO = Path(__file__).resolve().parents[2]


def _fake_probe():
    """30 iterations: 100 Gaussians (steps 0-9), a refine at step 10 to 200 (10-19), one at 20 to 400
    (20-29); steady steps take 2, 4, 8 ms; refines 50 ms; a profiled window at steps 22-24 (its
    neighbours 21..25 slowed to 30 ms) saw 5 ms of GPU work per step; peaks are 1000 + 10 bytes per
    Gaussian, refines 5000 more."""
    counts = [100] * 10 + [200] * 10 + [400] * 10
    interval, peaks = [], []
    for step, n in enumerate(counts):
        refine = step in (10, 20)
        interval.append(50.0 if refine else 30.0 if 21 <= step <= 25 else {100: 2.0, 200: 4.0, 400: 8.0}[n])
        peaks.append(1000 + 10 * n + (5000 if refine else 0))
    windows = [{"window": [22, 25], "steps_profiled": 3, "gpu_busy_ms": 5.0, "gaussians": 400}]
    return {"steps": list(range(30)), "gaussians": counts, "peak_bytes": peaks, "gpu_interval_ms": interval[:-1],
            "train_s": 1.0, "gpu_busy_series": {"every": 100, "steps": 3, "windows": windows}}  # fmt: skip


def test_segments_cut_at_refines_leave_out_refine_and_profiled_steps():
    rows = count_segments(_fake_probe())
    assert [r["gaussians"] for r in rows] == [100, 200, 400]
    assert [(r["first_step"], r["last_step"]) for r in rows] == [(0, 9), (10, 19), (20, 29)]
    # medians of the steady iterations only: no refine (50 ms), no profiled neighbourhood (30 ms)
    assert [r["step_ms_median"] for r in rows] == [2.0, 4.0, 8.0]
    assert [r["peak_bytes"] for r in rows] == [2000, 3000, 5000]  # the refine's extra 5000 is apart
    assert rows[0]["refine_step_ms"] is None and rows[1]["refine_step_ms"] == 50.0
    assert rows[2]["refine_peak_bytes"] == 1000 + 4000 + 5000
    assert [r["gpu_busy_ms"] for r in rows] == [None, None, 5.0]
    assert rows[2]["steady_steps"] == 3  # 26-28: 21..25 profiled or beside the window, 29 has no next start


def test_memory_fit_gives_bytes_per_gaussian_and_the_fixed_part():
    fit = memory_fit(count_segments(_fake_probe()))
    assert fit["bytes_per_gaussian"] == pytest.approx(10.0) and fit["fixed_bytes"] == pytest.approx(1000.0)
    assert memory_fit([{"gaussians": 5, "peak_bytes": 9}])["bytes_per_gaussian"] is None  # one point: no line
    steep = memory_fit(
        [{"gaussians": 3_000_000, "peak_bytes": 4 << 30}, {"gaussians": 4_000_000, "peak_bytes": 8 << 30}]
    )
    assert steep["bytes_per_gaussian"] is None and steep["note"] == "not linear in the count"  # zero would be < 0
    summary = scaling_summary(_fake_probe(), "fake")
    assert summary["max_gaussians"] == 400 and summary["train_peak_bytes"] == 1000 + 4000 + 5000
    assert summary["peak_bytes_per_gaussian_at_max"] == pytest.approx(5000 / 400)
    assert summary["refine_step_ms_total"] == 100.0
    table = markdown([summary])
    assert "| fake | 1.0 | 400 |" in table and "| 400 | 20-29 | 8.00 | 5.00 |" in table


def test_gpu_busy_series_opens_a_window_every_n_steps_with_the_count_it_saw():
    step_now = {"n": 0}
    series = GpuBusySeries(torch.device("cpu"), every=10, steps=3, first=2, num_points_fn=lambda: 1000 + step_now["n"])
    for step in range(36):
        step_now["n"] = step
        series.begin(step)
        series.end(step)
    series.finish()
    assert [w["window"][0] for w in series.windows] == [2, 12, 22, 32]
    assert [w["gaussians"] for w in series.windows] == [1002, 1012, 1022, 1032]
    assert all(w["steps_profiled"] == 0 and "no CUDA" in w["note"] for w in series.windows)  # CPU: null busy
    series.begin(5)  # an in-process warmup replays from step 5: later windows are forgotten
    assert [w["window"][0] for w in series.windows] == [2]
    with pytest.raises(ValueError):
        GpuBusySeries(torch.device("cpu"), every=5, steps=5)


def test_busy_every_travels_to_the_probe(tmp_path, monkeypatch):
    settings = BenchmarkSettings(steps=100, gpu_busy_steps=10, gpu_busy_every=200, device_type="cpu")
    env = children.child_env(settings, 1, tmp_path / "probe.json")
    assert env[GPU_BUSY_EVERY_ENV] == "200"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert ProbeOptions.from_env().gpu_busy_every == 200
    assert GPU_BUSY_EVERY_ENV not in children.child_env(BenchmarkSettings(device_type="cpu"), 1, tmp_path / "p.json")


@pytest.mark.slow
def test_gaussian_scaling_script_on_cpu(tmp_path):
    """The real script on a tiny scene: densification grows the count; one row per count, a plot."""
    from splatbench.scenes import SceneSpec, make_scene

    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=16, width=48, height=36, focal=42.0))
    out = tmp_path / "scaling"
    command = [
        sys.executable, str(REPO / "scripts" / "gaussian_scaling.py"), "--device-type", "cpu", "--steps", "80",
        "--busy-every", "30", "--busy-steps", "5", "--timeout", "300", "--scene-args", f"--data {scene} colmap",
        "--train-args", "--pipeline.model.num-downscales 0 --pipeline.model.warmup-length 20 "
        "--pipeline.model.refine-every 20 --pipeline.model.densify-grad-thresh 0.00001",
        "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "scaling.json").read_text())
    run = report["runs"][0]
    counts = [r["gaussians"] for r in run["rows"]]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] > counts[0]  # densified, one row each
    assert run["max_gaussians"] == counts[-1] and run["train_peak_bytes"] is None  # no device memory on CPU
    assert [w["window"][0] for w in json.loads((out / "runs" / "empty-cache" / "probe_train.json").read_text())
            ["gpu_busy_series"]["windows"]] == [5, 35, 65]  # fmt: skip
    data = (out / "scaling.png").read_bytes()
    assert data[:4] == b"\x89PNG" and len(data) > 2000
