"""Benchmark suite (scripts/benchmark.py, ns_splat_plus.bench) and quality gate (scripts/quality_gate.py)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from dataclasses import asdict

from ns_splat_plus.bench import children, cli, gate, report, runner
from ns_splat_plus.bench import results as res
from ns_splat_plus.bench.probe import ProbeTrainerFactory, instrument_config, probe_trainer_class
from ns_splat_plus.bench.settings import FOX_SCENE_ARGS, PROBE_MODULE, SCHEMA_VERSION, BenchmarkSettings

REPO = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run(method: str, num_gpus: int, **values) -> dict:
    record = res.empty_record(method, num_gpus)
    record.update(status="ok", steps_requested=3000)
    record.update(values)
    return record


def fake_results() -> dict:
    """A results structure as a 1/2/4-GPU H200 run would write it (numbers made up)."""
    runs = [
        _run("splat-plus", 1, step_time_ms_median=6.1, train_wall_s=30.0, train_peak_gib=1.1, eval_peak_gib=0.9,
             psnr=27.5, ssim=0.857, lpips=None, num_gaussians=250_000, step_clock="cuda-events",
             densification={"refine_events": 28, "duplicated": 90_000, "split": 40_000, "pruned": 20_000}),
        _run("splatfacto", 1, step_time_ms_median=6.2, train_wall_s=31.0, train_peak_gib=1.15, eval_peak_gib=1.6,
             psnr=27.3, ssim=0.856, lpips=0.21, num_gaussians=248_000, step_clock="cuda-events"),
        _run("splat-plus", 2, step_time_ms_median=6.3, train_wall_s=16.0, train_peak_gib=0.8, eval_peak_gib=0.9,
             psnr=27.45, ssim=0.856, lpips=None, num_gaussians=251_000, step_clock="cuda-events"),
        {**res.empty_record("splatfacto", 2), "status": "unsupported", "error": "splatfacto does not train on several GPUs"},
        _run("splat-plus", 4, timed_steps=750, step_time_ms_median=6.5, train_wall_s=8.5, train_peak_gib=0.7, eval_peak_gib=0.9,
             psnr=27.4, ssim=0.855, lpips=None, num_gaussians=252_000, step_clock="cuda-events"),
    ]  # fmt: skip
    settings = BenchmarkSettings(gpus=[1, 2, 4])
    results = {
        "schema": SCHEMA_VERSION,
        "created": "2026-01-02T03:04:05+00:00",
        "command": "python scripts/benchmark.py --gpus 1 2 4",
        "scene": "fox",
        "settings": {**asdict(settings), "effective_skip_steps": settings.effective_skip},
        "reference_method": "splatfacto",
        "environment": {"device_type": "cuda", "device_name": "NVIDIA H200", "torch": "2.11", "gsplat": "1.4.0",
                        "nerfstudio": "1.1.5"},  # fmt: skip
        "runs": runs,
    }
    runner.add_speedups(results["runs"])
    return results


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 2000, path


# --- measurements --------------------------------------------------------------------------------


def test_step_statistics_skip_warmup_and_prefer_cuda_events():
    steps = list(range(40))
    # 10 slow "compilation" steps of 100 ms, then 10 ms steps
    begin, t = [], 0.0
    for s in steps:
        begin.append(t)
        t += 0.1 if s < 10 else 0.01
    end = [b + 0.005 for b in begin]
    probe = {"steps": steps, "host_begin_s": begin, "host_end_s": end}
    with_skip = res.summarize_steps(probe, skip=10)
    assert with_skip["step_clock"] == "host"
    assert with_skip["step_time_ms_median"] == pytest.approx(10.0)
    assert with_skip["skipped_steps"] == 10 and with_skip["timed_steps"] == 40
    assert with_skip["iteration_ms_median"] == pytest.approx(5.0)
    no_skip = res.summarize_steps({**probe, "steps": [s + 100 for s in steps]}, skip=0)
    assert no_skip["step_time_ms_mean"] > with_skip["step_time_ms_mean"]  # slow steps weigh in without a skip

    cuda = {**probe, "gpu_interval_ms": [7.0] * 39, "gpu_span_ms": [6.0] * 40}
    stats = res.summarize_steps(cuda, skip=10)
    assert stats["step_clock"] == "cuda-events"
    assert stats["step_time_ms_median"] == pytest.approx(7.0)
    assert stats["iteration_ms_median"] == pytest.approx(6.0)
    assert stats["host_step_time_ms_median"] == pytest.approx(10.0)
    assert res.summarize_steps({}, skip=10)["step_time_ms_median"] is None


def test_effective_skip_never_swallows_a_short_run():
    assert BenchmarkSettings(steps=3000, skip_steps=100).effective_skip == 100
    assert BenchmarkSettings(steps=60, skip_steps=100).effective_skip == 30


def test_densification_totals_from_jsonl(tmp_path):
    path = tmp_path / "densification.jsonl"
    lines = [
        {"step": 0, "event": "start", "num_gaussians": 400},
        {"step": 100, "event": "refine", "duplicated": 10, "split": 5, "pruned": 3, "num_gaussians": 417},
        {"step": 150, "event": "grad_summary", "mean": 1e-4},
        {"step": 200, "event": "refine", "duplicated": 1, "split": 0, "pruned": 20, "num_gaussians": 398},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    totals = res.read_densification(path)
    assert totals == {
        "refine_events": 2, "duplicated": 11, "split": 5, "pruned": 23, "gaussians_after_last_refine": 398,
    }  # fmt: skip
    assert res.read_densification(tmp_path / "missing.jsonl") is None


def test_eval_metrics_keep_unavailable_lpips_null(tmp_path):
    path = tmp_path / "eval.json"
    for lpips in (None, float("nan")):
        path.write_text(json.dumps({"results": {"psnr": 25.0, "ssim": 0.8, "lpips": lpips}}).replace("NaN", "null"))
        metrics = res.read_eval_metrics(path)
        assert metrics["psnr"] == 25.0 and metrics["lpips"] is None
    path.write_text(json.dumps({"results": {"psnr": 25.0, "ssim": 0.8}}))
    assert res.read_eval_metrics(path)["lpips"] is None
    path.write_text(json.dumps({"results": {"psnr": 25.0, "ssim": 0.8, "lpips": 0.12, "num_gaussians": 9}}))
    metrics = res.read_eval_metrics(path)
    assert metrics["lpips"] == 0.12 and metrics["eval_num_gaussians"] == 9


def test_failure_reason_names_the_exception(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("starting\nTraceback (most recent call last):\n  File x\nRuntimeError: CUDA is not available\n\n")
    assert children.failure_reason(log) == "RuntimeError: CUDA is not available"
    log.write_text("just stopped\n")
    assert children.failure_reason(log) == "just stopped"


# --- commands --------------------------------------------------------------------------------------


def test_train_commands_single_and_multi_gpu(tmp_path):
    settings = BenchmarkSettings(
        steps=3000, train_args="--pipeline.model.sh-degree 3", method_args={"splat-plus": "--machine.seed 1"},
        multi_gpu_args="--note W={W}",
    )  # fmt: skip
    one = runner.train_command(settings, "splat-plus", 1, tmp_path)
    assert one[:4] == [sys.executable, "-m", PROBE_MODULE, "train"] and one[4] == "splat-plus"
    assert one[-7:] == FOX_SCENE_ARGS.split()  # the scene arguments come last, verbatim
    joined = " ".join(one)
    assert "--max-num-iterations 3000" in joined and "--machine.num-devices 1" in joined
    assert "--vis tensorboard" in joined and "--viewer.quit-on-train-completion True" in joined
    assert "--steps-per-eval-all-images 0" in joined and "--machine.seed 1" in joined and "W=" not in joined
    four = runner.train_command(settings, "splat-plus", 4, tmp_path)
    assert four[1:3] == ["-m", "torch.distributed.run"] and "--nproc-per-node" in four
    assert four[four.index("--nproc-per-node") + 1] == "4" and "W=4" in four
    assert "--machine.num-devices" not in four  # torchrun sets the ranks
    spawn = runner.train_command(BenchmarkSettings(launcher="spawn"), "splat-plus", 2, tmp_path)
    assert "torch.distributed.run" not in spawn and "2" == spawn[spawn.index("--machine.num-devices") + 1]
    other = runner.train_command(settings, "splatfacto", 1, tmp_path)
    assert "--machine.seed" not in other


def test_multi_gpu_splatfacto_is_recorded_as_unsupported_without_running(tmp_path):
    settings = BenchmarkSettings(gpus=[2])
    record = runner.run_one(settings, "splatfacto", 2, tmp_path)
    assert record["status"] == "unsupported" and "several GPUs" in record["error"]
    assert not (tmp_path / "runs").exists()


def test_more_gpus_than_available_is_recorded_as_unsupported(tmp_path, monkeypatch):
    monkeypatch.setattr(children, "visible_gpu_ids", lambda: ["0"])
    record = runner.run_one(BenchmarkSettings(gpus=[4]), "splat-plus", 4, tmp_path)
    assert record["status"] == "unsupported" and record["error"] == "4 GPUs asked for, 1 available"
    assert not (tmp_path / "runs").exists()


def test_probe_factory_survives_pickle_and_config_yaml():
    import yaml

    from ns_splat_plus.bench.runtime import SplatPlusTrainer, splat_plus

    config = instrument_config(copy.deepcopy(splat_plus.config))
    assert isinstance(config._target, ProbeTrainerFactory) and config._target.base is SplatPlusTrainer
    assert instrument_config(config)._target.base is SplatPlusTrainer  # idempotent
    assert pickle.loads(pickle.dumps(config))._target == config._target  # mp.spawn pickles the config
    loaded = yaml.load(yaml.dump(config), Loader=yaml.Loader)  # ns-eval loads config.yml like this
    assert loaded._target == config._target
    probe_class = probe_trainer_class(SplatPlusTrainer)
    assert issubclass(probe_class, SplatPlusTrainer) and probe_trainer_class(SplatPlusTrainer) is probe_class


# --- reports and plots -----------------------------------------------------------------------------


def test_reports_and_plots(tmp_path):
    results = fake_results()
    paths = report.write_outputs(results, tmp_path, readme_plot_base=tmp_path)
    loaded = json.loads(paths["json"].read_text())
    assert [r["method"] for r in loaded["runs"]] == [r["method"] for r in results["runs"]]
    speedups = {(r["method"], r["num_gpus"]): r["speedup"] for r in loaded["runs"]}
    assert speedups[("splat-plus", 4)] == pytest.approx(30.0 / 8.5)
    assert speedups[("splatfacto", 2)] is None
    for name in ("psnr_vs_time", "step_time", "memory", "speedup", "summary"):
        assert_png(paths[name])

    markdown = paths["markdown"].read_text()
    table_rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert len(table_rows) == 5
    assert "| `splat-plus` | 4 | ok | 750 | 6.50 | 8.5 | 3.53× |" in markdown
    assert "unsupported" in markdown and "does not train on several GPUs" in markdown
    # LPIPS unavailable is "n/a", never 0
    splat_plus_row = table_rows[0].split(" | ")
    assert splat_plus_row[11] == "n/a" and "0.2100" in table_rows[1]
    assert "step time 0.984×" in markdown and "PSNR +0.20 dB" in markdown
    assert "`splat-plus` on 4 GPUs vs 1: speedup 3.53× (0.88 of ideal), PSNR -0.10 dB" in markdown

    readme = paths["readme"].read_text()
    assert readme.startswith("## Results")
    assert "NVIDIA H200" in readme and "2026-01-02" in readme and "gsplat 1.4.0" in readme
    assert "![benchmark plots](plots/summary.png)" in readme
    assert "python scripts/benchmark.py --gpus 1 2 4" in readme

    assert "in-training eval peak" not in markdown  # only when a run evaluated during training
    results["runs"][0]["in_training_eval_peak_gib"] = 0.95
    assert "| in-training eval peak (GiB) |" in report.markdown_table(results)
    assert "| 1.10 | 0.95 | 0.90 |" in report.markdown_table(results)

    # re-rendering from the JSON gives the same report
    out2 = tmp_path / "again"
    assert cli.main(["--from-json", str(paths["json"]), "--out", str(out2), "--readme-relative-to", str(out2)]) == 0
    assert (out2 / "results.md").read_text() == markdown


# --- quality gate ----------------------------------------------------------------------------------


def _gate(result, baseline, *tolerances, two_sided=False):
    findings = gate.quality_gate(result, baseline, gate.parse_tolerances(tolerances), two_sided=two_sided)
    return findings, any(f.failed for f in findings)


def test_quality_gate_identical_and_degraded():
    baseline = fake_results()
    findings, failed = _gate(copy.deepcopy(baseline), baseline)
    assert not failed and {f.verdict for f in findings} <= {"ok", "skipped"}
    assert {(f.run, f.metric) for f in findings} >= {("splat-plus-1gpu", "psnr"), ("splat-plus-4gpu", "ssim")}

    degraded = copy.deepcopy(baseline)
    degraded["runs"][0]["psnr"] *= 0.99  # -1 % PSNR
    findings, failed = _gate(degraded, baseline)
    assert failed
    bad = [f for f in findings if f.failed]
    assert [(f.run, f.metric, f.verdict) for f in bad] == [("splat-plus-1gpu", "psnr", "regressed")]
    report = gate.format_findings(findings)
    assert "REGRESSED" in report and "-1.00%" in report and "FAILED" in report

    within = copy.deepcopy(baseline)
    within["runs"][0]["psnr"] *= 0.997  # -0.3 %: inside the default 0.5 %
    within["runs"][1]["ssim"] *= 1.02  # better is never a regression
    assert not _gate(within, baseline)[1]
    assert _gate(within, baseline, "psnr=0.2%")[1]  # tighter tolerance
    assert not _gate(within, baseline, "psnr=0.1")[1]  # absolute tolerance: -0.08 dB within 0.1 dB
    assert _gate(within, baseline, two_sided=True)[1]  # +2 % SSIM fails a two-sided gate


def test_quality_gate_other_metrics_and_missing_runs():
    baseline = fake_results()
    slower = copy.deepcopy(baseline)
    slower["runs"][0]["step_time_ms_median"] *= 1.2
    assert not _gate(slower, baseline)[1]  # step time is not gated by default
    assert _gate(slower, baseline, "step_time_ms_median=10%")[1]
    # baseline LPIPS null: skipped, not compared against 0
    findings, failed = _gate(copy.deepcopy(baseline), baseline, "lpips=0.01")
    assert not failed and any(f.metric == "lpips" and f.verdict == "skipped" for f in findings)
    # a run that failed or vanished fails the gate
    crashed = copy.deepcopy(baseline)
    crashed["runs"][2].update(status="failed", error="RuntimeError: boom", psnr=None)
    del crashed["runs"][4]
    findings, failed = _gate(crashed, baseline)
    assert failed and {f.run for f in findings if f.verdict == "missing"} == {"splat-plus-2gpu", "splat-plus-4gpu"}
    with pytest.raises(ValueError):
        gate.parse_tolerances(["nonsense=1%"])


def test_quality_gate_cli(tmp_path):
    baseline = fake_results()
    base_path, same_path, bad_path = tmp_path / "baseline.json", tmp_path / "same.json", tmp_path / "bad.json"
    base_path.write_text(json.dumps(baseline))
    same_path.write_text(json.dumps(baseline))
    degraded = copy.deepcopy(baseline)
    degraded["runs"][2]["ssim"] -= 0.02
    bad_path.write_text(json.dumps(degraded))
    script = [sys.executable, str(REPO / "scripts" / "quality_gate.py")]
    ok = subprocess.run(script + [str(same_path), str(base_path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "quality gate: passed" in ok.stdout
    bad = subprocess.run(script + [str(bad_path), str(base_path)], capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "splat-plus-2gpu" in bad.stdout and "REGRESSED" in bad.stdout
    usage = subprocess.run(script + [str(bad_path), str(tmp_path / "none.json")], capture_output=True, text=True)
    assert usage.returncode == 2


# --- the real thing, on CPU ------------------------------------------------------------------------


@pytest.mark.slow
def test_benchmark_cpu_end_to_end(tmp_path):
    """scripts/benchmark.py on a tiny synthetic scene: splat-plus trains and evaluates on CPU; splatfacto
    (gsplat is CUDA-only) is reported as failed without stopping the benchmark; JSON, Markdown, PNGs."""
    from ns_splat_plus.synthetic import SceneSpec, make_scene

    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=16, width=48, height=36, focal=42.0))
    out = tmp_path / "bench"
    steps = 80
    command = [
        sys.executable, str(REPO / "scripts" / "benchmark.py"),
        "--device-type", "cpu", "--steps", str(steps), "--skip-steps", "20", "--timeout", "300",
        "--methods", "splat-plus", "splatfacto",
        "--scene-args", f"--data {scene} colmap",
        "--train-args", "--pipeline.model.num-downscales 0 --pipeline.model.warmup-length 20 "
        "--pipeline.model.refine-every 20",
        "--out", str(out), "--readme-relative-to", str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "[benchmark" in proc.stdout and "step 80/80" in proc.stdout  # progress was visible

    results = json.loads((out / "results.json").read_text())
    runs = {r["method"]: r for r in results["runs"]}
    ours = runs["splat-plus"]
    assert ours["status"] == "ok", ours.get("error")
    assert ours["timed_steps"] == steps and ours["step_clock"] == "host"
    assert 0 < ours["step_time_ms_median"] < 5000 and ours["train_wall_s"] > 0
    assert math.isfinite(ours["psnr"]) and ours["psnr"] > 10 and 0 < ours["ssim"] <= 1
    assert ours["lpips"] is None or 0 < ours["lpips"] < 1  # unavailable offline: null, never 0
    assert ours["num_gaussians"] > 0 and ours["num_gaussians"] != ours["gaussian_trace"][0][1]  # densified
    assert ours["densification"]["refine_events"] >= 1  # from the run's densification.jsonl
    assert ours["densification"]["gaussians_after_last_refine"] > 0
    assert ours["train_peak_gib"] is None  # no device memory on CPU
    assert Path(ours["train_log"]).is_file() and Path(ours["eval_log"]).is_file()

    theirs = runs["splatfacto"]
    assert theirs["status"] == "failed" and theirs["error"] and theirs["psnr"] is None

    markdown = (out / "results.md").read_text()
    assert "| `splat-plus` | 1 | ok |" in markdown and "| `splatfacto` | 1 | failed" in markdown
    for name in ("psnr_vs_time", "step_time", "memory", "speedup", "summary"):
        assert_png(out / "plots" / f"{name}.png")
    assert "![benchmark plots](plots/summary.png)" in (out / "readme_section.md").read_text()

    gate = [sys.executable, str(REPO / "scripts" / "quality_gate.py")]
    same = subprocess.run(gate + [str(out / "results.json"), str(out / "results.json")], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout
    degraded = copy.deepcopy(results)
    next(r for r in degraded["runs"] if r["method"] == "splat-plus")["psnr"] -= 1.0
    (tmp_path / "degraded.json").write_text(json.dumps(degraded))
    worse = subprocess.run(gate + [str(tmp_path / "degraded.json"), str(out / "results.json")], capture_output=True,
                           text=True)  # fmt: skip
    assert worse.returncode == 1 and "REGRESSED" in worse.stdout


def _small_scene(tmp_path: Path) -> Path:
    from inprocess import small_scene

    return small_scene(tmp_path / "scene")


def test_instrumentation_toggle_run_reports_both_modes(tmp_path):
    """warmup_check.py interleave: one run, instrumentation switched every N steps, medians per mode."""
    scene = _small_scene(tmp_path)
    out = tmp_path / "interleave"
    cmd = [
        sys.executable, str(REPO / "scripts" / "warmup_check.py"), "interleave", "--runs", "1", "--steps", "40",
        "--toggle-every", "10", "--skip-steps", "0", "--out", str(out),
        "--train-args", "--pipeline.model.num-downscales 0 --warmup-steps 2",
        "--scene-args", f"--data {scene} --machine.device-type cpu colmap",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "interleave.json").read_text())
    run = summary["runs"][0]
    assert run["steps_on"] == 20 and run["steps_off"] == 20
    assert run["step_host_ms_median_on"] > 0 and run["step_host_ms_median_off"] > 0
    assert summary["overhead_pct_median"] == pytest.approx(
        100 * (run["step_host_ms_median_on"] / run["step_host_ms_median_off"] - 1)
    )
    probe = json.loads((out / "toggle1" / "probe.json").read_text())
    modes = probe["instrumentation_modes"]
    assert modes == [(s // 10) % 2 == 0 for s in probe["steps"]]  # on for steps 0-9, off for 10-19, ...


def test_step_profiler_breaks_a_real_run_into_sections(tmp_path):
    """scripts/profile_step.py: nerfstudio's loop with timed sections; the sections fit in the loop period."""
    scene = _small_scene(tmp_path)
    cmd = [
        sys.executable, str(REPO / "scripts" / "profile_step.py"), "--out", str(tmp_path / "prof"), "--skip", "5", "--",
        "splat-plus", "--data", str(scene), "--output-dir", str(tmp_path / "runs"), "--max-num-iterations", "30",
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--machine.device-type", "cpu",
        "--steps-per-eval-image", "0", "--steps-per-eval-batch", "0", "--steps-per-eval-all-images", "0",
        "--pipeline.model.num-downscales", "0", "colmap",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "prof" / "profile.rank0.json").read_text())
    sections = report["sections"]
    assert report["steps_counted"] == 24  # steps 5..29: 25 begins, 24 full periods
    period = sections["whole loop period"]["ms_per_step"]
    iteration = sections["iteration: train_iteration"]["ms_per_step"]
    assert 0 < iteration < period
    assert 0 < sections["  model.get_outputs"]["ms_per_step"] < iteration
    assert sections["    strategy.step_post_backward"]["calls"] == 25
