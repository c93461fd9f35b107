"""Benchmark suite (scripts/benchmark.py, splatbench) and quality gate (scripts/quality_gate.py)."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from splatbench import children, cli, document, gate, merge, outputs, per_image, report, runner
from splatbench import results as res
from splatbench.probe import ProbeTrainerFactory, instrument_config, probe_trainer_class
from splatbench.settings import PROBE_MODULE, SCENE_ARGS_MISSING, SCHEMA_VERSION, SOURCE_DIGEST_KEY, BenchmarkSettings

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCENE_ARGS = "--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8"  # never read: commands only


def _run(method: str, num_gpus: int, **values) -> dict:
    record = res.empty_record(method, num_gpus)
    record.update(status="ok", steps_requested=3000)
    record.update(values)
    return record


def fake_results() -> dict:
    """A results structure as a 1/2/4-GPU H200 run would write it (numbers made up)."""
    runs = [
        _run("splat-plus", 1, step_time_ms_median=6.1, process_wall_s=45.0, train_wall_s=30.0, train_peak_gib=1.1, eval_peak_gib=0.9,
             psnr=27.5, ssim=0.857, lpips=None, num_gaussians=250_000, step_clock="cuda-events",
             densification={"refine_events": 28, "duplicated": 90_000, "split": 40_000, "pruned": 20_000}),
        _run("splatfacto", 1, step_time_ms_median=6.2, process_wall_s=50.0, train_wall_s=31.0, train_peak_gib=1.15, eval_peak_gib=1.6,
             psnr=27.3, ssim=0.856, lpips=0.21, num_gaussians=248_000, step_clock="cuda-events"),
        _run("splat-plus", 2, step_time_ms_median=6.3, train_wall_s=16.0, train_peak_gib=0.8, eval_peak_gib=0.9,
             psnr=27.45, ssim=0.856, lpips=None, num_gaussians=251_000, step_clock="cuda-events"),
        {**res.empty_record("splatfacto", 2), "status": "unsupported", "error": "splatfacto does not train on several GPUs"},
        _run("splat-plus", 4, timed_steps=750, step_time_ms_median=6.5, process_wall_s=20.0, train_wall_s=8.5, train_peak_gib=0.7, eval_peak_gib=0.9,
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
        "environment": {
            "device_type": "cuda",
            "device_name": "NVIDIA H200",
            "torch": "2.11",
            "gsplat": "1.4.0",
            "nerfstudio": "1.1.5",
        },  # fmt: skip
        "runs": runs,
    }
    document.add_speedups(results["runs"])
    return results


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 2000, path


# --- measurements --------------------------------------------------------------------------------


def _paced_probe(num_steps: int, change_at: int, before_s: float, after_s: float, span_s: float) -> dict:
    """A train probe whose steps take ``before_s`` until step ``change_at``, then ``after_s`` (start to
    start), each iteration busy for ``span_s``."""
    steps, begin, t = list(range(num_steps)), [], 0.0
    for s in steps:
        begin.append(t)
        t += before_s if s < change_at else after_s
    return {"steps": steps, "host_begin_s": begin, "host_end_s": [b + span_s for b in begin]}


def test_step_statistics_skip_warmup_and_prefer_cuda_events():
    # 10 slow "compilation" steps of 100 ms, then 10 ms steps
    probe = _paced_probe(40, 10, 0.1, 0.01, 0.005)
    steps = probe["steps"]
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
    assert "s in refines" not in report._refine_cell(totals)


def test_densification_totals_add_up_the_efficient_strategys_refine_seconds(tmp_path):
    path = tmp_path / "densification.jsonl"
    lines = [
        {"step": 100, "event": "refine", "duplicated": 4, "seconds": {"scoring": 0.25, "total": 0.5}},
        {"step": 200, "event": "refine", "duplicated": 2, "seconds": {"scoring": 0.5, "total": 1.25}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    totals = res.read_densification(path)
    assert (totals["refine_seconds"], totals["refine_scoring_seconds"]) == (1.75, 0.75)
    assert report._refine_cell(totals) == "2 events, duplicated 6, 1.8 s in refines (0.8 s scoring)"


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


def test_per_image_metrics_are_recorded_on_the_loaded_model_only_by_image_index():
    import torch

    class Scorer(torch.nn.Module):  # nerfstudio models are modules: the wrapper is an instance attribute
        def get_image_metrics_and_images(self, outputs, batch):
            return {"psnr": torch.tensor(20.0 + outputs), "ssim": 0.5, "lpips": None, "extra": 1.0}, {"img": outputs}

    model, other = Scorer(), Scorer()
    names = ["images/a.png", "images/b.png", "images/c.png"]
    records = per_image.record_per_image(model, names)
    assert model.get_image_metrics_and_images(2, {"image_idx": 2}) == ({"psnr": torch.tensor(22.0), "ssim": 0.5,
                                                                        "lpips": None, "extra": 1.0}, {"img": 2})  # fmt: skip
    model.get_image_metrics_and_images(0, {"image_idx": torch.tensor(0)})
    model.get_image_metrics_and_images(1, {})  # no image_idx: its position in the pass
    other.get_image_metrics_and_images(5, {"image_idx": 1})  # another instance of the class: not recorded
    assert records == [
        {"index": 2, "image": "c.png", "psnr": 22.0, "ssim": 0.5, "lpips": None},
        {"index": 0, "image": "a.png", "psnr": 20.0, "ssim": 0.5, "lpips": None},
        {"index": 2, "image": "c.png", "psnr": 21.0, "ssim": 0.5, "lpips": None},
    ]


def test_per_image_table_means_and_lowest_run_per_method_lowest_images_first():
    def run(method, psnrs, status="ok"):
        return {"method": method, "num_gpus": 1, "status": status,
                "per_image": [{"image": name, "psnr": v} for name, v in psnrs.items()]}  # fmt: skip

    results = {"runs": [
        run("splatfacto", {"a.jpg": 30.0, "b.jpg": 20.0}),
        run("splatfacto", {"a.jpg": 32.0, "b.jpg": 22.0}),
        run("splat-plus-fast", {"a.jpg": 31.0, "b.jpg": 12.0}),
        run("splat-plus-fast", {"a.jpg": 99.0, "b.jpg": 99.0}, status="eval-failed"),  # not counted
        {"method": "splat-plus", "num_gpus": 1, "status": "ok"},  # recorded no images: no column
    ]}  # fmt: skip
    table = per_image.per_image_table(results)
    lines = table.strip().splitlines()
    assert lines[0] == "| image | `splatfacto` (2 runs) | `splat-plus-fast` (1 runs) |"
    assert lines[2] == "| `b.jpg` | 21.00 (20.00) | 12.00 (12.00) |"  # mean 18.0 over all runs: first
    assert lines[3] == "| `a.jpg` | 31.00 (30.00) | 31.00 (31.00) |"
    assert len(lines) == 4
    assert per_image.per_image_table({"runs": [{"method": "m", "num_gpus": 1, "status": "ok"}]}) is None


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
        multi_gpu_args="--note W={W}", scene_args=SCENE_ARGS,
    )  # fmt: skip
    one = runner.train_command(settings, "splat-plus", 1, tmp_path)
    assert one[:4] == [sys.executable, "-m", PROBE_MODULE, "train"] and one[4] == "splat-plus"
    assert one[-7:] == SCENE_ARGS.split()  # the scene arguments come last, verbatim
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


def test_seed_per_repeat_gives_each_repeat_its_own_seeds(tmp_path, monkeypatch):
    """--seed-per-repeat: repeat k trains with --machine.seed k and camera-order seed k (the runs'
    commands as the runner starts them); without it, every repeat has the method's defaults."""

    class Started(Exception):
        pass

    def commands_started(argv):
        settings = cli.settings_from_args(cli.build_parser().parse_args(argv))
        started = []

        def run_child(command, *args, **kwargs):
            started.append(command)
            raise Started

        monkeypatch.setattr(children, "run_child", run_child)
        for run in (r for batch in runner.plan_batches(settings) for r in batch):
            job = runner.RunJob(settings, run, tmp_path)
            assert job.prepare()
            with pytest.raises(Started):
                job.train()
        return started

    argv = [
        "--scene-args",
        SCENE_ARGS,
        "--methods",
        "splatfacto",
        "splat-plus",
        "--repeats",
        "3",
        "--device-type",
        "cpu",
    ]
    seeds = {}
    for command in commands_started(argv + ["--seed-per-repeat"]):
        seed = command[command.index("--machine.seed") + 1]
        assert command[command.index("--pipeline.datamanager.train-cameras-sampling-seed") + 1] == seed
        assert command[-7:] == SCENE_ARGS.split()
        seeds.setdefault(command[4], []).append(int(seed))
    assert seeds == {"splatfacto": [1, 2, 3], "splat-plus": [1, 2, 3]}
    assert not any("--machine.seed" in command for command in commands_started(argv))


def test_variants_train_their_method_with_their_arguments_under_their_label(tmp_path, monkeypatch):
    """--variant LABEL=METHOD ARGS: B = 2 beside B = 1 in one command; the label names the run."""
    args = cli.build_parser().parse_args([
        "--scene-args", SCENE_ARGS,
        "--methods", "splat-plus", "splat-plus-b2", "--method-args", "splat-plus-b2=--machine.seed 3",
        "--variant", "splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2",
    ])  # fmt: skip
    settings = cli.settings_from_args(args)
    plain = runner.train_command(settings, "splat-plus", 1, tmp_path)
    b2 = runner.train_command(settings, "splat-plus-b2", 1, tmp_path)
    assert b2[4] == "splat-plus" and b2[:4] == plain[:4]  # ns-train runs the variant's method
    joined = " ".join(b2)
    assert "--pipeline.datamanager.cameras-per-step 2" in joined and "--machine.seed 3" in joined
    assert "cameras-per-step" not in " ".join(plain)
    assert b2[-7:] == SCENE_ARGS.split()  # the scene still comes last
    assert [r.tag for b in runner.plan_batches(settings) for r in b] == ["splat-plus-1gpu", "splat-plus-b2-1gpu"]
    # whether it trains on several GPUs is the variant's method's matter: a splat-plus variant is not refused
    # as a method that crashes on several GPUs (a label unknown to that rule would be); here it only lacks GPUs
    monkeypatch.setattr(children, "visible_gpu_ids", lambda: [])
    settings_2gpu = BenchmarkSettings(gpus=[2], methods=["sp-x"], variants={"sp-x": "splat-plus --machine.seed 3"})
    record = runner.run_one(settings_2gpu, "sp-x", 2, tmp_path)
    assert record["method"] == "sp-x" and record["error"] == "2 GPUs asked for, 0 available"
    for bad in (
        ["--variant", "x=splat-plus"],
        ["--methods", "x", "--variant", "x=--seed 1"],
        ["--methods", "x", "--variant", "x"],
    ):
        with pytest.raises(SystemExit, match="--variant"):
            cli.settings_from_args(cli.build_parser().parse_args(["--scene-args", SCENE_ARGS, *bad]))


@pytest.mark.slow
def test_no_default_scene_training_needs_scene_args(tmp_path):
    """The data lives wherever the user keeps it: no default path; without --scene-args a clear error
    that says what to pass, before anything runs."""
    assert BenchmarkSettings().scene_args == "" and "../" not in SCENE_ARGS_MISSING
    with pytest.raises(SystemExit, match="--scene-args is required"):
        cli.main(["--methods", "splat-plus", "--out", str(tmp_path / "out")])
    with pytest.raises(ValueError, match="--scene-args is required"):
        runner.run_benchmark(BenchmarkSettings(methods=["splat-plus"]), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    out = str(tmp_path / "o")
    calls = {"benchmark.py": ["--out", out], "gaussian_scaling.py": ["--out", out], "scaling_check.py": [out],
             "warmup_check.py": ["fresh", "--out", out]}  # fmt: skip
    for script, args in calls.items():
        done = subprocess.run([sys.executable, str(REPO / "scripts" / script), *args], capture_output=True, text=True)
        assert done.returncode != 0 and "--scene-args is required" in done.stderr, (script, done.stderr[-2000:])
    assert not (tmp_path / "o").exists()


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

    from splatbench.runtime import SplatPlusTrainer, splat_plus

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
    paths = outputs.write_outputs(results, tmp_path, readme_plot_base=tmp_path)
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
    assert "| `splat-plus` | 4 | ok | 750 | 6.50 | 20.0 | 8.5 | 3.53× |" in markdown
    assert "unsupported" in markdown and "does not train on several GPUs" in markdown
    # LPIPS unavailable is "n/a", never 0
    splat_plus_row = table_rows[0].split(" | ")
    assert splat_plus_row[12] == "n/a" and "0.2100" in table_rows[1]
    assert "step time 0.984×" in markdown and "PSNR +0.20 dB" in markdown
    assert "`splat-plus` vs `splatfacto` (1 GPU): process wall 0.900×" in markdown  # 45 / 50 s
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


@pytest.mark.slow
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
    helped = subprocess.run(script + ["--help"], capture_output=True, text=True)  # the defaults hold "%" signs
    assert helped.returncode == 0 and "psnr=0.5%" in helped.stdout and "%%" not in helped.stdout, helped.stderr


# --- the real thing, on CPU ------------------------------------------------------------------------


@pytest.mark.slow
def test_benchmark_cpu_end_to_end(tmp_path):
    """scripts/benchmark.py on a tiny synthetic scene: splat-plus trains and evaluates on CPU; splatfacto
    (gsplat is CUDA-only) is reported as failed without stopping the benchmark; JSON, Markdown, PNGs."""
    from splatbench.scenes import SceneSpec, make_scene

    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=16, width=48, height=36, focal=42.0))
    out = tmp_path / "bench"
    steps = 80
    command = [
        sys.executable, str(REPO / "scripts" / "benchmark.py"),
        "--device-type", "cpu", "--steps", str(steps), "--skip-steps", "20", "--timeout", "300",
        "--methods", "splat-plus", "splatfacto", "--gpu-busy-steps", "10", "--gpu-busy-at", "0.5", "--export-ply",
        "--warm-caches",  # on by default with CUDA only: here the real warm-up runs, before the timed ones
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
    assert ours["gpu_busy_ms"] is None and ours["wall_over_busy"] is None  # no GPU: null, no error
    assert ours["gpu_busy"]["requested_steps"] == 10 and ours["gpu_busy"]["steps_profiled"] == 0
    assert ours["gpu_busy"]["window"] == [40, 50]  # --gpu-busy-at 0.5 of 80 steps (centred would be 45)
    parts = ours["train_wall_parts"]  # nothing was profiled on the CPU: no window part
    assert set(parts) == {"before_first_step_s", "warmup_s", "steps_s", "after_last_step_s"}
    assert sum(parts[k] for k in ("before_first_step_s", "steps_s", "after_last_step_s")) == pytest.approx(
        ours["train_wall_s"]
    )
    assert 0 < parts["warmup_s"] < parts["before_first_step_s"] and parts["steps_s"] > 0
    assert Path(ours["train_log"]).is_file() and Path(ours["eval_log"]).is_file()
    assert ours["process_wall_s"] > ours["train_wall_s"]  # the whole process: imports and set-up too
    # --export-ply: the real ns-export wrote every trained Gaussian, 62 float32 properties each (SH degree 3)
    ply = Path(ours["run_dir"]) / "export" / "splat.ply"
    assert ours["ply_vertices"] == ours["num_gaussians"] and ours["ply_bytes"] == ply.stat().st_size
    assert ply.stat().st_size > 62 * 4 * ours["num_gaussians"]
    # each held-out image as the probe recorded it: the images and numbers of splat-plus's own per-image
    # report in ns-eval's JSON (another path), averaging to ns-eval's PSNR
    evaluated = json.loads((Path(ours["run_dir"]) / "ns_eval.json").read_text())["results"]["per_image"]
    assert len(evaluated) >= 2
    assert [e["image"] for e in ours["per_image"]] == [Path(e["image"]).name for e in evaluated]
    assert [e["psnr"] for e in ours["per_image"]] == pytest.approx([e["psnr"] for e in evaluated], rel=1e-6)
    assert statistics.fmean(e["psnr"] for e in ours["per_image"]) == pytest.approx(ours["psnr"], rel=1e-6)

    theirs = runs["splatfacto"]
    assert theirs["status"] == "failed" and theirs["error"] and theirs["psnr"] is None
    # --warm-caches: splat-plus's process ended after its first step; splatfacto's never got there (no CUDA)
    warm = {w["method"]: w for w in results["cache_warm_runs"]}
    assert warm["splat-plus"]["reached_first_step"] and not warm["splatfacto"]["reached_first_step"]
    assert "stopping after 1 training step(s)" in Path(warm["splat-plus"]["log"]).read_text()
    assert not list((out / "warm").iterdir())  # nothing of them kept

    markdown = (out / "results.md").read_text()
    assert "| `splat-plus` | 1 | ok |" in markdown and "| `splatfacto` | 1 | failed" in markdown
    assert f"| `{ours['per_image'][0]['image']}` | {ours['per_image'][0]['psnr']:.2f} (" in markdown
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


@pytest.mark.slow
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
    assert summary["toggle_every"] == 10 and math.isfinite(summary["overhead_pct_median"])
    probe = json.loads((out / "toggle1" / "probe.json").read_text())
    modes = probe["instrumentation_modes"]
    assert probe["steps"] == list(range(40))  # every step recorded, in both modes
    assert modes == [(s // 10) % 2 == 0 for s in probe["steps"]]  # on for steps 0-9, off for 10-19, ...
    switches = [probe["steps"][i] for i in range(1, len(modes)) if modes[i] != modes[i - 1]]
    assert modes[0] is True and switches == [10, 20, 30]  # the mode alternates every 10 steps, as configured


def test_instrumentation_overhead_from_known_step_times():
    """Toggle every 2 steps; host step times (ms) on: 11, 13, 14, 14 and off: 10, 10, 9, 11."""
    spans_ms = [11, 13, 10, 10, 14, 14, 9, 11]
    begin = [float(i) for i in range(8)]
    probe = {
        "steps": list(range(8)),
        "host_begin_s": begin,
        "host_end_s": [b + ms / 1000.0 for b, ms in zip(begin, spans_ms)],
        "instrumentation_modes": [True, True, False, False, True, True, False, False],
    }
    all_steps = res.instrumentation_overhead(probe, skip=0)
    assert all_steps["steps_on"] == 4 and all_steps["steps_off"] == 4
    assert all_steps["step_host_ms_median_on"] == pytest.approx(13.5)  # median of 11, 13, 14, 14
    assert all_steps["step_host_ms_median_off"] == pytest.approx(10.0)  # median of 9, 10, 10, 11
    assert all_steps["overhead_pct"] == pytest.approx(35.0)  # 13.5 / 10 = 1.35
    after_skip = res.instrumentation_overhead(probe, skip=4)  # steps 4-7: on 14, 14; off 9, 11
    assert after_skip["steps_on"] == 2 and after_skip["overhead_pct"] == pytest.approx(40.0)
    assert res.instrumentation_overhead({**probe, "instrumentation_modes": [True] * 8}, skip=0)["overhead_pct"] is None


@pytest.mark.slow
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
    assert report["iterations_counted"] == 25  # the sections' denominator: the iterations they timed
    iteration = sections["iteration: train_iteration"]["ms_per_step"]
    assert 0 < sections["whole loop period"]["ms_per_step"] and 0 < iteration
    # nested timers over the same iterations: the forward is a part of the iteration, whatever the load
    assert 0 < sections["  model.get_outputs"]["ms_per_step"] < iteration
    assert sections["    strategy.step_post_backward"]["calls"] == 25
    assert not (tmp_path / "prof" / "lpips-standin").exists()  # splat-plus runs as ns-train would


def test_section_report_divides_the_period_by_periods_and_each_section_by_iterations(tmp_path):
    """The last counted iteration has no next begin, so a run counts one period fewer than iterations:
    the loop period is a mean over the periods, every section (and the collector) over the iterations."""
    from splatbench.sections import SectionTimer, write_report

    timer = SectionTimer()
    timer.steps, timer.iterations = 24, 25
    timer.totals["whole loop period"] = 2.4  # s over 24 periods: 100 ms each
    timer.totals["iteration: train_iteration"] = 2.5  # s over 25 iterations: 100 ms each
    timer.calls["iteration: train_iteration"] = 25
    timer.gc_s, timer.gc_collections = 0.05, 3
    report = write_report(timer, tmp_path, rank=1, meta={"method": "splat-plus"})
    rows = report["sections"]
    assert rows["whole loop period"]["ms_per_step"] == pytest.approx(100.0)
    assert rows["iteration: train_iteration"] == {"ms_per_step": pytest.approx(100.0), "calls": 25}
    assert rows["gc (python garbage collector)"] == {"ms_per_step": pytest.approx(2.0), "calls": 3}
    assert (report["steps_counted"], report["iterations_counted"], report["method"]) == (24, 25, "splat-plus")
    assert json.loads((tmp_path / "profile.rank1.json").read_text())["sections"] == rows


def test_section_timer_restores_the_module_functions_it_patched():
    """The sections option replaces module-level functions (nerfstudio's writer functions) for the probed
    run only: restore() puts back the very same objects and removes its garbage-collector callback."""
    import gc

    from nerfstudio.configs import base_config  # noqa: F401  before the writer: nerfstudio 1.1.5's import cycle
    from nerfstudio.utils import writer

    from splatbench.sections import SectionTimer

    original = writer.put_scalar
    timer = SectionTimer()
    timer.patch(writer, "put_scalar", "between: writer.put_scalar")
    gc.callbacks.append(timer.gc_callback)
    assert writer.put_scalar is not original and writer.put_scalar.__wrapped__ is original
    timer.counting = True
    writer.put_scalar("x", 1.0, 0)  # timed, and still nerfstudio's function underneath
    assert timer.calls["between: writer.put_scalar"] == 1
    timer.restore()
    assert writer.put_scalar is original and timer.gc_callback not in gc.callbacks


def test_step_profiler_gives_stand_in_lpips_weights_only_to_methods_that_need_them(tmp_path, monkeypatch):
    """Offline, splatfacto could not be constructed without AlexNet weights; splat-plus needs none."""
    import torch

    import splatbench.runtime as runtime
    from splatbench import profile_step

    monkeypatch.setattr(runtime, "alexnet_weights_path", lambda: tmp_path / "cache" / "alexnet-owt-7be5be79.pth")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "cache"))
    assert profile_step.use_lpips_standin("splat-plus", tmp_path / "prof") is None
    assert not (tmp_path / "prof").exists() and os.environ["TORCH_HOME"] == str(tmp_path / "cache")
    rng = torch.get_rng_state()
    home = profile_step.use_lpips_standin("splatfacto", tmp_path / "prof")
    assert home == tmp_path / "prof" / "lpips-standin" and os.environ["TORCH_HOME"] == str(home)
    assert (home / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth").is_file()
    assert torch.equal(torch.get_rng_state(), rng)  # AlexNet's random init left the caller's RNG alone
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "alexnet-owt-7be5be79.pth").write_bytes(b"real weights")
    assert profile_step.use_lpips_standin("splatfacto", tmp_path / "prof2") is None  # the real ones are there


# --- GPU busy time -----------------------------------------------------------------------------------


def _event(key, device_type, count=1, **times):
    return SimpleNamespace(key=key, device_type=device_type, count=count, **times)


def test_gpu_busy_sums_device_events_and_divides_by_steps():
    from splatbench.gpu_busy import summarize_device_events

    events = [
        _event("sgemm_kernel", "DeviceType.CUDA", count=8, self_device_time_total=3000.0),  # torch >= 2.4 names
        _event("rasterize_fwd", "DeviceType.CUDA", self_cuda_time_total=1000.0),  # older torch names
        _event("Memcpy HtoD (Pageable -> Device)", "DeviceType.CUDA", count=2, device_time=200.0),  # an average
        _event("Memset (Device)", "DeviceType.CUDA", self_device_time_total=100.0),
        # host-side events: the device time of the kernels they launched, not counted twice
        _event("cudaLaunchKernel", "DeviceType.CPU", self_device_time_total=4000.0),
        _event("aten::mm", "DeviceType.CPU", cuda_time_total=3000.0),
    ]
    summary = summarize_device_events(events, steps=4)
    # kernels 3000 + 1000 us, memcpy 2 x 200 us, memset 100 us: 4500 us over 4 steps
    assert summary["gpu_busy_ms"] == pytest.approx(1.125)
    assert summary["kernel_ms"] == pytest.approx(1.0) and summary["memcpy_ms"] == pytest.approx(0.1)
    assert summary["memset_ms"] == pytest.approx(0.025) and summary["steps_profiled"] == 4
    assert summarize_device_events(events, steps=0)["gpu_busy_ms"] is None
    assert res.wall_over_busy(2.25, 1.125) == pytest.approx(2.0)
    assert res.wall_over_busy(None, 1.125) is None and res.wall_over_busy(2.25, None) is None


def test_gpu_busy_breaks_the_time_down_by_kernel_group_and_lists_the_longest_kernels():
    from splatbench.gpu_busy import TOP_KERNELS, kernel_group, summarize_device_events

    cuda = "DeviceType.CUDA"
    events = [
        _event(
            "void rasterize_to_pixels_bwd_kernel<3u, float>(unsigned int ...)",
            cuda,
            count=4,
            self_device_time_total=4000.0,
        ),
        _event(
            "void rasterize_to_pixels_fwd_kernel<3u, float>(unsigned int ...)",
            cuda,
            count=4,
            self_device_time_total=2000.0,
        ),
        _event(
            "void at::native::conv_depthwise2d_forward_kernel<1, float>(...)",
            cuda,
            count=40,
            self_device_time_total=1200.0,
        ),
        _event("sm90_xmma_dgrad_implicit_gemm_f32f32", cuda, count=8, self_device_time_total=800.0),
        _event(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdam>",
            cuda,
            count=4,
            self_device_time_total=600.0,
        ),
        _event("void cub::DeviceRadixSortOnesweepKernel<...>", cuda, count=4, self_device_time_total=200.0),
        _event("void gsplat::isect_tiles<float>(...)", cuda, count=4, self_device_time_total=100.0),
        _event("void fully_fused_projection_fwd_kernel<float>(...)", cuda, count=4, self_device_time_total=100.0),
        _event("Memcpy HtoD (Pinned -> Device)", cuda, count=4, self_device_time_total=40.0),
        _event(
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
            cuda,
            count=80,
            self_device_time_total=960.0,
        ),
        _event("ssim_columns_forward", cuda, count=4, self_device_time_total=60.0),
        _event("ssim_rows_backward", cuda, count=4, self_device_time_total=20.0),
        _event(
            "cudaLaunchKernel", "DeviceType.CPU", count=300, self_device_time_total=9999.0
        ),  # host side: not counted
    ]
    summary = summarize_device_events(events, steps=4)
    groups = summary["groups_ms"]
    assert groups == pytest.approx({
        "rasterize backward": 1.0, "rasterize forward": 0.5, "convolution (SSIM)": 0.5, "other": 0.24,
        "optimizer": 0.15, "sort and tiles": 0.075, "projection and SH": 0.025, "memcpy / memset": 0.01,
        "SSIM (fused)": 0.02,
    })  # fmt: skip
    assert list(groups)[:2] == ["rasterize backward", "rasterize forward"]  # largest first
    assert sum(groups.values()) == pytest.approx(summary["gpu_busy_ms"])  # every GPU event in exactly one group
    top = summary["top_kernels"]
    assert len(top) == min(TOP_KERNELS, 12) and top[0]["name"].startswith("void rasterize_to_pixels_bwd_kernel")
    assert top[0]["ms"] == pytest.approx(1.0) and top[0]["calls"] == pytest.approx(1.0)
    assert [t["ms"] for t in top] == sorted((t["ms"] for t in top), reverse=True)
    assert kernel_group("void convert_and_copy_kernel<float>") == "other"  # "conv" alone does not make SSIM
    table = report.kernel_group_table({"runs": [
        {"method": "splat-plus", "num_gpus": 1, "status": "ok", "gpu_busy": summary},
        {"method": "splatfacto", "num_gpus": 1, "status": "ok", "timing_valid": False, "gpu_busy": summary},
    ]})  # fmt: skip
    assert (
        "| `splat-plus-1gpu` | 2.52 | 1.00 | 0.50 | 0.50 |" in table and "splatfacto" not in table
    )  # discarded timing
    assert (
        report.kernel_group_table({"runs": [{"method": "m", "num_gpus": 1, "gpu_busy": {"gpu_busy_ms": 1.0}}]}) is None
    )


def test_step_time_by_tenth_of_the_run_shows_where_the_schedule_changes_pace():
    """200 steps, 3 ms each until step 100, then 5 ms: the tenths show the change where it happens."""
    probe = _paced_probe(200, 100, 0.003, 0.005, 0.001)
    tenths = res.summarize_steps(probe, skip=0)["step_ms_by_tenth"]
    # 199 start-to-start intervals in ten parts of 19 or 20
    assert [step for step, _ in tenths] == [0, 19, 39, 59, 79, 99, 119, 139, 159, 179]
    assert [ms for _, ms in tenths] == pytest.approx([3.0] * 5 + [5.0] * 5)
    assert res.summarize_steps(probe, skip=100)["step_ms_by_tenth"][0] == [100, pytest.approx(5.0)]  # after the skip
    short = _paced_probe(4, 2, 0.003, 0.005, 0.001)  # fewer steps than tenths: one part per interval
    assert res.summarize_steps(short, skip=0)["step_ms_by_tenth"] == [[0, pytest.approx(3.0)], [1, pytest.approx(3.0)],
                                                                      [2, pytest.approx(5.0)]]  # fmt: skip
    record = {"method": "splat-plus", "num_gpus": 1, "status": "ok", "step_ms_by_tenth": tenths}
    shared = {**record, "method": "splatfacto"}
    res.discard_timing(shared, "shared its GPU")
    assert shared["step_ms_by_tenth"] is None  # a timing figure: gone with the rest
    table = report.phase_table({"runs": [record, shared]})
    assert "| `splat-plus-1gpu` | 3.00 (from 0) |" in table and "5.00 (from 179) |" in table
    assert "splatfacto" not in table and report.phase_table({"runs": [shared]}) is None


def test_gpu_busy_window_defaults_and_cpu_path():
    import torch

    from splatbench.gpu_busy import GpuBusyWindow, default_window_start

    assert default_window_start(skip=100, max_steps=3000, steps=50) == 1525  # centred on steps 100..2999
    assert default_window_start(skip=20, max_steps=80, steps=50) == 25
    assert default_window_start(skip=0, max_steps=30, steps=50) == 0  # shorter than the window
    window = GpuBusyWindow(torch.device("cpu"), start=2, steps=3)
    for step in range(8):
        window.begin(step)
        window.end(step)
    window.finish()
    out = window.as_dict()
    assert out["gpu_busy_ms"] is None and out["steps_profiled"] == 0 and "no CUDA" in out["note"]


def test_gpu_busy_reaches_the_run_record_and_the_table(tmp_path):
    """A probe with a profiled window: steps 3 ms apart except the 4 profiled steps (+ neighbours)."""
    steps = list(range(20))
    begin, t = [], 0.0
    for s in steps:
        begin.append(t)
        t += 0.050 if 7 <= s <= 12 else 0.003  # profiled steps 8..11 and their neighbours are slow
    probe = {"steps": steps, "host_begin_s": begin, "host_end_s": [b + 0.002 for b in begin], "train_s": 1.0,
             "gpu_busy": {"window": [8, 12], "steps_profiled": 4, "gpu_busy_ms": 1.5, "requested_steps": 4}}  # fmt: skip
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    record = res.empty_record("splat-plus", 1)
    res.collect_train(record, tmp_path / "probe.json", skip=2)
    assert record["step_time_ms_median"] == pytest.approx(3.0)  # the profiled window is left out
    assert record["gpu_busy_ms"] == 1.5 and record["wall_over_busy"] == pytest.approx(2.0)
    record.update(status="ok")
    table = report.markdown_table({"runs": [record]})
    assert "| median step (ms) | step at window (ms) | GPU busy (ms/step) | wall/busy |" in table
    assert "| 3.00 | 3.00 | 1.50 | 2.00 |" in table


def test_train_reserved_peak_reaches_the_run_record_and_the_table(tmp_path):
    """The allocator's reserved peak (CUDA graphs' pools included) is recorded beside the allocated one: the max over
    steps and ranks, in its own column; a probe without it (CPU, older probes) gives no column."""
    probe = {"steps": [0, 1, 2], "host_begin_s": [0.0, 0.01, 0.02], "host_end_s": [0.005, 0.015, 0.025],
             "train_s": 1.0, "peak_bytes": [1 << 30, 2 << 30, 1 << 30],
             "reserved_peak_bytes": [3 << 30, 5 << 30, 4 << 30]}  # fmt: skip
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    (tmp_path / "probe.rank1.json").write_text(json.dumps({**probe, "reserved_peak_bytes": [6 << 30, None, 1]}))
    record = res.empty_record("splat-plus-lite", 1)
    res.collect_train(record, tmp_path / "probe.json", skip=0)
    assert record["train_peak_gib"] == pytest.approx(2.0)
    assert record["train_reserved_peak_gib"] == pytest.approx(6.0)  # rank 1's step 0
    record.update(status="ok")
    table = report.markdown_table({"runs": [record]})
    assert "| train peak (GiB) | train reserved (GiB) |" in table and "| 2.00 | 6.00 |" in table
    older = res.empty_record("splatfacto", 1)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "probe.json").write_text(
        json.dumps({k: v for k, v in probe.items() if k != "reserved_peak_bytes"})
    )
    res.collect_train(older, tmp_path / "old" / "probe.json", skip=0)
    assert older["train_reserved_peak_gib"] is None
    assert "train reserved" not in report.markdown_table({"runs": [{**older, "status": "ok"}]})


def test_probe_options_travel_through_the_environment(tmp_path, monkeypatch):
    from splatbench.options import GPU_BUSY_STEPS_ENV, PROBE_OUT_ENV, ProbeOptions

    settings = BenchmarkSettings(steps=3000, skip_steps=100, gpu_busy_steps=50, device_type="cpu")
    env = children.child_env(settings, 1, tmp_path / "probe.json")
    assert env[GPU_BUSY_STEPS_ENV] == "50" and env[PROBE_OUT_ENV] == str(tmp_path / "probe.json")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    options = ProbeOptions.from_env()
    assert options.gpu_busy_steps == 50 and options.skip_steps == 100 and options.gpu_busy_start is None
    assert GPU_BUSY_STEPS_ENV not in children.child_env(BenchmarkSettings(device_type="cpu"), 1, tmp_path / "p.json")


def test_baselines_load_their_checkpoints_without_weights_only_and_splat_plus_with_it(tmp_path, monkeypatch):
    """splatfacto's checkpoints need TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD on torch >= 2.6 (nerfstudio #3683), also where
    real LPIPS weights are found in $TORCH_HOME (no stand-in); splat-plus's never get it, even from the shell."""
    settings = BenchmarkSettings(device_type="cpu")
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    for standin in (None, tmp_path / "standin"):
        env = children.child_env(settings, 1, tmp_path / "probe.json", standin, method="splatfacto")
        assert env.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD") == "1", standin
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    for standin in (None, tmp_path / "standin"):
        env = children.child_env(settings, 1, tmp_path / "probe.json", standin, method="splat-plus-lite")
        assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in env, standin


def _eval_memory_probe_env(tmp_path, monkeypatch):
    """The environment scripts/measure_eval_memory.py (splatbench.eval_memory) gives its train probe (captured, not run)."""
    from splatbench import eval_memory

    seen = {}

    def capture(command, env):
        seen.update(env)
        return subprocess.CompletedProcess(command, 1)

    with monkeypatch.context() as patch:  # subprocess is one module: undo before the test's own run
        patch.setattr(eval_memory.subprocess, "run", capture)
        eval_memory.train_one("splat-plus", tmp_path / "part.json", [])
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["benchmark", "eval_memory"])
def test_probes_train_the_installed_package_not_one_in_the_working_directory(tool, tmp_path, monkeypatch):
    # a probe started from a folder that holds another ns_splat_plus (a checkout beside a non-editable install)
    shadow = tmp_path / "ns_splat_plus"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadow copy was imported')\n")
    if tool == "benchmark":
        env = children.child_env(BenchmarkSettings(device_type="cpu"), 1, tmp_path / "probe.json")
    else:
        env = _eval_memory_probe_env(tmp_path, monkeypatch)
    code = "import ns_splat_plus, splatbench.probe; print(ns_splat_plus.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    import ns_splat_plus

    assert Path(out.stdout.strip()) == Path(ns_splat_plus.__file__)


# --- repeats -----------------------------------------------------------------------------------------


def test_repeats_interleave_methods_each_in_its_own_run_directory(tmp_path):
    settings = BenchmarkSettings(methods=["splat-plus", "splatfacto"], repeats=3)
    batches = runner.plan_batches(settings)
    assert all(len(batch) == 1 for batch in batches)
    order = [(b[0].method, b[0].repeat) for b in batches]
    assert order == [("splat-plus", 1), ("splatfacto", 1), ("splat-plus", 2), ("splatfacto", 2),
                     ("splat-plus", 3), ("splatfacto", 3)]  # fmt: skip
    commands = [runner.train_command(settings, b[0].method, 1, runner.run_dir_for(tmp_path, b[0])) for b in batches]
    run_dirs = [c[c.index("--output-dir") + 1] for c in commands]
    assert len(set(run_dirs)) == 6 and run_dirs[2].endswith("splat-plus-1gpu-r2")
    assert [c[4] for c in commands] == ["splat-plus", "splatfacto"] * 3
    # one repeat: the run names of before (the gate matches them)
    single = runner.plan_batches(BenchmarkSettings(methods=["splat-plus"], gpus=[1, 2]))
    assert [b[0].tag for b in single] == ["splat-plus-1gpu", "splat-plus-2gpu"]


def test_concurrent_quality_runs_together_and_discards_their_timing(tmp_path, monkeypatch):
    settings = BenchmarkSettings(methods=["splat-plus", "splatfacto"], gpus=[1, 2], repeats=3, concurrent_quality=True,
                                 device_type="cpu", lpips_standin=False)  # fmt: skip
    batches = runner.plan_batches(settings)
    assert [[(r.method, r.num_gpus, r.repeat, r.concurrent) for r in b] for b in batches] == [
        [("splat-plus", 1, 1, False)], [("splatfacto", 1, 1, False)],  # timing runs, alone
        [("splat-plus", 1, 2, True), ("splatfacto", 1, 2, True), ("splat-plus", 1, 3, True), ("splatfacto", 1, 3, True)],
        [("splat-plus", 2, 1, False)], [("splatfacto", 2, 1, False)], [("splat-plus", 2, 2, False)],  # W > 1: alone
        [("splatfacto", 2, 2, False)], [("splat-plus", 2, 3, False)], [("splatfacto", 2, 3, False)],
    ]  # fmt: skip

    import threading
    import time

    from splatbench.options import PROBE_OUT_ENV

    running, overlap, lock = [0], [0], threading.Lock()
    training_at_eval = []  # how many trainings were running when each ns-eval started

    def fake_child(command, log_path, env, timeout_s, label):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("fake\n")
        if command[3] == "train":
            with lock:
                running[0] += 1
                overlap[0] = max(overlap[0], running[0])
            time.sleep(0.1 if "-r2" in label else 0.6)  # repeat 2 ends first
            with lock:
                running[0] -= 1
            base = Path(command[command.index("--output-dir") + 1]) / "exp" / "bench"
            base.mkdir(parents=True)
            (base / "config.yml").write_text("fake")
            Path(env[PROBE_OUT_ENV]).write_text(json.dumps(
                {"steps": [0, 1, 2], "host_begin_s": [0, 0.01, 0.02], "host_end_s": [0.005, 0.015, 0.025], "train_s": 9.0,
                 "final_gaussians": 100}))  # fmt: skip
        else:
            with lock:
                training_at_eval.append(running[0])
            out = Path(command[command.index("--output-path") + 1])
            out.write_text(json.dumps({"results": {"psnr": 25.0, "ssim": 0.8}}))
        return children.ChildResult(0, 0.3, False, log_path)

    monkeypatch.setattr(children, "run_child", fake_child)
    records = runner.run_batch(settings, batches[2], tmp_path)
    assert overlap[0] == 4  # the four quality repeats trained at the same time
    # repeat 2's runs are evaluated while repeat 3's still train, not after the slowest training
    assert len(training_at_eval) == 4 and max(training_at_eval) >= 2
    assert [r["status"] for r in records] == ["ok"] * 4 and all(r["psnr"] == 25.0 for r in records)
    assert all(r["timing_valid"] is False and r["step_time_ms_median"] is None and r["train_wall_s"] is None
               for r in records)  # fmt: skip
    alone = runner.run_batch(settings, batches[0], tmp_path)[0]
    assert (
        alone["timing_valid"] is True
        and alone["train_wall_s"] == 9.0
        and alone["step_time_ms_median"] == pytest.approx(10.0)
    )
    # a quality repeat alone in its command (--repeats 1 --first-repeat 2) may still share the GPU with
    # another command's runs: its timing is discarded too
    single = runner.plan_batches(BenchmarkSettings(methods=["splat-plus"], repeats=1, first_repeat=2, concurrent_quality=True,
                                                   device_type="cpu", lpips_standin=False))  # fmt: skip
    assert [[r.concurrent for r in b] for b in single] == [[True]]
    quality_alone = runner.run_batch(settings, single[0], tmp_path)[0]
    assert quality_alone["status"] == "ok" and quality_alone["psnr"] == 25.0
    assert quality_alone["timing_valid"] is False and quality_alone["train_wall_s"] is None


def _fake_two_step_child(command, log_path, env) -> children.ChildResult:
    """A stand-in for children.run_child: a training child leaves a config.yml and a probe record of two
    9 s steps, an ns-eval child its metrics (PSNR 25.0, SSIM 0.8)."""
    from splatbench.options import PROBE_OUT_ENV

    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("fake\n")
    if command[3] == "train":
        base = Path(command[command.index("--output-dir") + 1]) / "exp" / "bench"
        base.mkdir(parents=True)
        (base / "config.yml").write_text("fake")
        Path(env[PROBE_OUT_ENV]).write_text(json.dumps({"steps": [0, 1], "host_begin_s": [0, 0.01],
                                                        "host_end_s": [0.005, 0.015], "train_s": 9.0}))  # fmt: skip
    else:
        Path(command[command.index("--output-path") + 1]).write_text(
            json.dumps({"results": {"psnr": 25.0, "ssim": 0.8}})
        )
    return children.ChildResult(0, 0.3, False, log_path)


def test_a_concurrent_run_is_kept_in_results_json_as_soon_as_it_ends(tmp_path, monkeypatch):
    """A machine can go away while the slowest run of a batch still trains: every run that has ended
    (trained, evaluated) is in OUT/results.json by then, not only when the whole batch ends."""
    import time

    out = tmp_path / "out"
    settings = BenchmarkSettings(methods=["splat-plus"], repeats=3, concurrent_quality=True, device_type="cpu",
                                 lpips_standin=False, scene_args="--data scene colmap")  # fmt: skip
    kept_while_r3_trained = []  # what results.json held while repeat 3 was still training

    def on_disk() -> dict:
        path = out / "results.json"
        return {r["repeat"]: r["status"] for r in json.loads(path.read_text())["runs"]} if path.exists() else {}

    def fake_child(command, log_path, env, timeout_s, label):
        if command[3] == "train" and "-r3" in label:  # the slow run: trains until repeat 2's record is on disk
            deadline = time.monotonic() + 20  # (or 20 s)
            while on_disk().get(2) != "ok" and time.monotonic() < deadline:
                time.sleep(0.05)
            kept_while_r3_trained.append(on_disk())
        return _fake_two_step_child(command, log_path, env)

    monkeypatch.setattr(children, "run_child", fake_child)
    results = runner.run_benchmark(settings, out)
    # repeat 1 (the timed batch) and repeat 2 (ended, evaluated) were kept while repeat 3 still trained
    assert kept_while_r3_trained == [{1: "ok", 2: "ok"}]
    assert [(r["repeat"], r["status"]) for r in results["runs"]] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert on_disk() == {1: "ok", 2: "ok", 3: "ok"}


def _repeat_results() -> dict:
    """splat-plus PSNR 27.0, 27.4, 27.2 (mean 27.2, sd 0.2); splatfacto 26.8, 27.0, 27.2, 27.0 (mean 27.0,
    sd sqrt(0.08 / 3)); splat-plus's third run shared the GPU (timing discarded)."""
    runs = [
        _run("splat-plus", 1, repeat=1, psnr=27.0, ssim=0.85, step_time_ms_median=6.0, train_wall_s=30.0,
             process_wall_s=40.0, num_gaussians=90_000),
        _run("splatfacto", 1, repeat=1, psnr=26.8, ssim=0.84, step_time_ms_median=7.0, train_wall_s=33.0,
             process_wall_s=50.0, num_gaussians=200_000),
        _run("splat-plus", 1, repeat=2, psnr=27.4, ssim=0.86, step_time_ms_median=6.2, train_wall_s=31.0,
             process_wall_s=42.0, num_gaussians=100_000),
        _run("splatfacto", 1, repeat=2, psnr=27.0, ssim=0.84, step_time_ms_median=7.2, train_wall_s=34.0,
             process_wall_s=52.0, num_gaussians=200_000),
        _run("splat-plus", 1, repeat=3, psnr=27.2, ssim=0.85, step_time_ms_median=60.0, train_wall_s=300.0,
             process_wall_s=400.0, num_gaussians=110_000, timing_valid=False),
        _run("splatfacto", 1, repeat=3, psnr=27.2, ssim=0.85, step_time_ms_median=7.4, train_wall_s=35.0,
             process_wall_s=54.0, num_gaussians=200_000),
        _run("splatfacto", 1, repeat=4, psnr=27.0, ssim=0.85, step_time_ms_median=7.0, train_wall_s=33.0,
             process_wall_s=48.0, num_gaussians=200_000),
    ]  # fmt: skip
    return {**fake_results(), "runs": runs, "settings": {**fake_results()["settings"], "repeats": 4}}


def test_repeat_statistics_mean_sd_and_difference_to_the_reference(tmp_path):
    import statistics

    from splatbench.stats import summarize_repeats

    results = _repeat_results()
    summary = {s["method"]: s for s in summarize_repeats(results["runs"], "splatfacto")}
    ours, theirs = summary["splat-plus"], summary["splatfacto"]
    psnr, ref_psnr = ours["metrics"]["psnr"], theirs["metrics"]["psnr"]
    assert psnr["n"] == 3 and psnr["mean"] == pytest.approx(27.2) and psnr["sd"] == pytest.approx(0.2)
    assert ref_psnr["n"] == 4 and ref_psnr["mean"] == pytest.approx(27.0)
    assert ref_psnr["sd"] == pytest.approx(math.sqrt(0.08 / 3))
    assert ref_psnr["sd"] == pytest.approx(statistics.stdev([26.8, 27.0, 27.2, 27.0]))
    diff = ours["vs_reference"]["psnr"]
    assert diff["diff"] == pytest.approx(0.2) and diff["se"] == pytest.approx(math.sqrt(0.02))  # 0.04/3 + (0.08/3)/4
    assert diff["se"] == pytest.approx(math.sqrt(statistics.variance([27.0, 27.4, 27.2]) / 3
                                                 + statistics.variance([26.8, 27.0, 27.2, 27.0]) / 4))  # fmt: skip
    # timing over the runs that had the GPU alone: 6.0 and 6.2, not the shared run's 60
    step = ours["metrics"]["step_time_ms_median"]
    assert step["n"] == 2 and step["mean"] == pytest.approx(6.1) and ours["timing_runs"] == 2
    assert ours["metrics"]["lpips"] == {"n": 0, "mean": None, "sd": None}  # absent, not 0
    assert "vs_reference" not in theirs
    results["summary"] = summarize_repeats(results["runs"], "splatfacto")
    paths = outputs.write_outputs(results, tmp_path, readme_plot_base=tmp_path)
    markdown = paths["markdown"].read_text()
    assert "| `splat-plus` | 1 | 3/3 (2) | 27.20 ± 0.20 |" in markdown
    assert "psnr +0.20 ± 0.30 dB (90 % CI, Welch, n 3 vs 4 runs; SE 0.14)" in markdown
    assert "| `splat-plus` | 1 | 3 | ok | – | discarded | discarded |" in markdown  # the shared run's timing
    # ratios of means against the reference: walls over the timing runs only (41 / 51 s, 30.5 / 33.75 s, not the
    # shared run's 400 s), Gaussians over every run (100k / 200k)
    assert "- `splat-plus` / `splatfacto` (1 GPU), ratio of means: process wall 0.804×, train wall 0.904×, " in markdown
    assert "Gaussians 0.500×" in markdown
    assert json.loads(paths["json"].read_text())["summary"][0]["metrics"]["psnr"]["n"] == 3


# Welch's interval, checked against scipy's own Welch t-test (ttest_ind with its confidence_interval:
# an independent computation of the whole interval)
WELCH_A = [30.1, 30.4, 29.8, 30.6, 30.2]  # the reference (baseline)
WELCH_B = [30.5, 30.9, 30.3, 30.7]  # the method compared with it


def _scipy_welch(a, b, confidence):
    """(difference b - a, half-width, df) from scipy.stats.ttest_ind(b, a, equal_var=False)."""
    from scipy import stats

    test = stats.ttest_ind(b, a, equal_var=False)
    df = float(test.df)
    diff = statistics.fmean(b) - statistics.fmean(a)
    if hasattr(test, "confidence_interval"):  # scipy >= 1.10
        ci = test.confidence_interval(confidence)
        return (ci.low + ci.high) / 2, (ci.high - ci.low) / 2, df
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return diff, stats.t.ppf(0.5 + confidence / 2, df) * se, df


def test_welch_interval_matches_scipy_on_fixed_numbers():
    from splatbench.stats import mean_sd, t_quantile, welch_interval

    for confidence in (0.90, 0.95):
        diff, half, df = _scipy_welch(WELCH_A, WELCH_B, confidence)
        ci = welch_interval(WELCH_A, WELCH_B, confidence)
        assert ci["diff"] == pytest.approx(diff, abs=1e-9) and ci["diff"] == pytest.approx(0.38, abs=1e-12)
        assert ci["df"] == pytest.approx(df, abs=1e-9) and ci["df"] == pytest.approx(6.938177076, abs=1e-8)
        assert ci["half_width"] == pytest.approx(half, abs=1e-9)
        assert ci["low"] == pytest.approx(diff - half, abs=1e-9) and ci["high"] == pytest.approx(diff + half, abs=1e-9)
        assert ci["confidence"] == confidence and (ci["n_a"], ci["n_b"]) == (5, 4) and ci["reason"] is None
        # the same from the summaries that results.json keeps
        assert welch_interval(mean_sd(WELCH_A), mean_sd(WELCH_B), confidence) == pytest.approx(ci)
    assert welch_interval(WELCH_A, WELCH_B)["confidence"] == 0.90  # the default
    assert welch_interval(WELCH_A, WELCH_B)["half_width"] == pytest.approx(0.3552567959944, abs=1e-9)
    # the t quantile over fractional df (Welch's are not integers), against tabulated values
    assert t_quantile(0.95, 6.938177) == pytest.approx(1.8971, abs=1e-4)  # between t(0.95; 6) and t(0.95; 7)
    assert t_quantile(0.975, 10.0) == pytest.approx(2.2281, abs=1e-4) and t_quantile(0.05, 10.0) < 0


def test_welch_interval_needs_two_runs_a_side():
    from splatbench.stats import welch_interval

    for a, b in (([30.2], WELCH_B), (WELCH_A, [30.5])):
        ci = welch_interval(a, b)
        assert ci["diff"] == pytest.approx(statistics.fmean(b) - statistics.fmean(a))
        assert ci["half_width"] is None and ci["df"] is None and ci["low"] is None and ci["high"] is None
        assert "at least 2 runs per side" in ci["reason"] and (ci["n_a"], ci["n_b"]) == (len(a), len(b))
    empty = welch_interval([], WELCH_B)
    assert empty["diff"] is None and empty["half_width"] is None and empty["n_a"] == 0 and empty["reason"]


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")  # scipy on constant data
def test_welch_interval_with_no_spread():
    from splatbench.stats import welch_interval

    # both sides without spread: the interval is the difference itself, df undefined (0/0)
    ci = welch_interval([30.0, 30.0, 30.0], [30.5, 30.5])
    assert ci["diff"] == pytest.approx(0.5) and ci["half_width"] == 0.0 and ci["df"] is None
    assert ci["low"] == ci["high"] == ci["diff"] and "no spread" in ci["reason"]
    # one side without spread: df = the other side's n - 1, and scipy agrees
    b = [30.0, 30.0, 30.0]
    diff, half, df = _scipy_welch(WELCH_A, b, 0.90)
    ci = welch_interval(WELCH_A, b)
    assert ci["df"] == pytest.approx(len(WELCH_A) - 1, abs=1e-9) and ci["df"] == pytest.approx(df, abs=1e-9)
    assert ci["diff"] == pytest.approx(diff, abs=1e-9) and ci["half_width"] == pytest.approx(half, abs=1e-9)
    assert ci["reason"] is None


def test_report_gives_quality_differences_with_their_welch_interval(tmp_path):
    from splatbench.stats import summarize_repeats

    results = _repeat_results()
    lpips = {"splat-plus": [0.20, 0.21, 0.19], "splatfacto": [0.22, 0.23, 0.22, 0.21]}
    for method, values in lpips.items():
        for r, value in zip([r for r in results["runs"] if r["method"] == method], values):
            r["lpips"] = value
    results["runs"].append(_run("splat-plus-fast", 1, repeat=1, psnr=26.5, ssim=0.83))  # one run: no interval
    results["summary"] = summarize_repeats(results["runs"], "splatfacto")
    paths = outputs.write_outputs(results, tmp_path, readme_plot_base=tmp_path)
    markdown = paths["markdown"].read_text()
    quality = {  # metric: (reference's values, splat-plus's values, format, unit)
        "psnr": ([26.8, 27.0, 27.2, 27.0], [27.0, 27.4, 27.2], ".2f", " dB"),
        "ssim": ([0.84, 0.84, 0.85, 0.85], [0.85, 0.86, 0.85], ".4f", ""),
        "lpips": (lpips["splatfacto"], lpips["splat-plus"], ".4f", ""),
    }
    for metric, (ref, ours, spec, unit) in quality.items():
        diff, half, _ = _scipy_welch(ref, ours, 0.90)
        se = math.sqrt(statistics.variance(ref) / len(ref) + statistics.variance(ours) / len(ours))
        row = f"{metric} {diff:+{spec}} ± {half:{spec}}{unit} (90 % CI, Welch, n 3 vs 4 runs; SE {se:{spec}})"
        assert row in markdown, row
    assert "psnr +0.20 ± 0.30 dB (90 % CI, Welch, n 3 vs 4 runs; SE 0.14)" in markdown
    assert "psnr -0.50 dB (no interval: needs at least 2 runs per side (n 1 vs 4))" in markdown
    assert "90 % Welch confidence interval" in markdown  # the notes say what ± means
    assert "psnr +0.20 ± 0.30 dB (90 % CI, Welch" in paths["readme"].read_text()
    saved = json.loads(paths["json"].read_text())
    _, half, df = _scipy_welch(quality["psnr"][0], quality["psnr"][1], 0.90)
    welch = next(s for s in saved["summary"] if s["method"] == "splat-plus")["vs_reference"]["psnr"]["welch"]
    assert welch["diff"] == pytest.approx(0.2) and welch["half_width"] == pytest.approx(half, abs=1e-9)
    assert welch["df"] == pytest.approx(df, abs=1e-9) and welch["confidence"] == 0.90
    assert (welch["n_a"], welch["n_b"]) == (4, 3) and welch["low"] == pytest.approx(0.2 - half)
    single = next(s for s in saved["summary"] if s["method"] == "splat-plus-fast")["vs_reference"]["psnr"]["welch"]
    assert single["half_width"] is None and single["df"] is None and (single["n_a"], single["n_b"]) == (4, 1)


def _gate_runs(*psnrs):
    return {"runs": [_run("splat-plus", 1, repeat=i + 1, psnr=p, ssim=0.85) for i, p in enumerate(psnrs)]}


def test_quality_gate_compares_means_of_repeats():
    import statistics

    baseline = _gate_runs(27.0, 27.2, 27.4)  # mean 27.2; 0.5 % of it is 0.136 dB
    same_mean = _gate_runs(27.4, 27.0, 27.2)
    findings, failed = _gate(same_mean, baseline)
    assert not failed
    psnr = next(f for f in findings if f.metric == "psnr")
    assert psnr.baseline == pytest.approx(27.2) and psnr.result == pytest.approx(27.2)
    assert psnr.n_result == 3 and psnr.n_baseline == 3
    assert psnr.se == pytest.approx(math.sqrt(2 * statistics.variance([27.0, 27.2, 27.4]) / 3))

    dropped = _gate_runs(26.7, 26.9, 27.0)  # mean 26.8667: -1.2 %
    findings, failed = _gate(dropped, baseline)
    assert failed and [(f.metric, f.verdict) for f in findings if f.failed] == [("psnr", "regressed")]
    text = gate.format_findings(findings)
    assert "REGRESSED" in text and "SE" in text and "3/3" in text and "means over the repeats" in text

    one_low_run = _gate_runs(26.9, 27.35, 27.35)  # the first run is 1.1 % below, the mean is 27.2
    assert not _gate(one_low_run, baseline)[1]
    low_mean = _gate_runs(27.2, 26.6, 27.2)  # first and last runs equal the baseline mean; the mean is -0.74 %
    findings, failed = _gate(low_mean, baseline)
    assert failed and next(f for f in findings if f.metric == "psnr").result == pytest.approx(27.0)
    # a single-run result against a baseline with repeats: its value against the baseline's mean
    assert not _gate(_gate_runs(27.1), baseline)[1] and _gate(_gate_runs(27.0), baseline)[1]
    # a repeat that failed fails the gate even when the others are fine
    crashed = _gate_runs(27.2, 27.2, 27.2)
    crashed["runs"][1].update(status="failed", error="RuntimeError: boom")
    findings, failed = _gate(crashed, baseline)
    assert failed and any(f.verdict == "missing" and "1 of 3 runs" in f.tolerance for f in findings)


def test_gpu_busy_window_at_a_fraction_of_each_runs_own_steps(tmp_path, monkeypatch):
    """--gpu-busy-at F: the window opens at F x the run's own step count (a schedule-scaled run, such
    as splat-plus-fast's quarter of the steps, is profiled in the same phase); a start step wins."""
    from splatbench.options import GPU_BUSY_AT_ENV, GPU_BUSY_START_ENV, ProbeOptions

    settings = BenchmarkSettings(steps=30000, gpu_busy_steps=50, gpu_busy_at=0.66, device_type="cpu")
    env = children.child_env(settings, 1, tmp_path / "probe.json")
    assert GPU_BUSY_START_ENV not in env
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    options = ProbeOptions.from_env()
    assert options.gpu_busy_at == pytest.approx(0.66)
    assert options.window_start(30000) == 19800 and options.window_start(7500) == 4950
    assert ProbeOptions(gpu_busy_start=100, gpu_busy_at=0.5).window_start(1000) == 100
    assert ProbeOptions().window_start(1000) is None
    monkeypatch.delenv(GPU_BUSY_AT_ENV)
    assert ProbeOptions.from_env().gpu_busy_at is None
    parser = cli.build_parser()
    scene = ["--scene-args", "--data scene colmap"]  # required (no default scene): the bad values below fail alone
    for bad in (["--gpu-busy-at", "1.0"], ["--gpu-busy-at", "-0.1"], ["--gpu-busy-at", "0.5", "--gpu-busy-start", "9"]):
        with pytest.raises(SystemExit, match="gpu-busy"):
            cli.settings_from_args(parser.parse_args([*bad, *scene]))
    assert cli.settings_from_args(parser.parse_args(["--gpu-busy-at", "0.5", *scene])).gpu_busy_at == 0.5


def test_wall_over_busy_compares_the_steps_around_the_window(tmp_path):
    """A window late in a run sees larger images: its busy time is set against the steps near it
    (8 ms), not the run's median (3 ms, most steps are early and small)."""
    steps = list(range(3000))
    begin, t = [], 0.0
    for s in steps:
        begin.append(t)
        t += 0.003 if s < 2000 else 0.008
    probe = {"steps": steps, "host_begin_s": begin, "host_end_s": [b + 0.001 for b in begin], "train_s": 1.0,
             "gpu_busy": {"window": [2600, 2650], "steps_profiled": 50, "gpu_busy_ms": 4.0, "requested_steps": 50}}  # fmt: skip
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    record = res.empty_record("splat-plus", 1)
    res.collect_train(record, tmp_path / "probe.json", skip=100)
    assert record["step_time_ms_median"] == pytest.approx(3.0)
    assert record["window_step_ms_median"] == pytest.approx(8.0)
    assert record["wall_over_busy"] == pytest.approx(2.0)  # 8 / 4, not 3 / 4
    no_window = res.summarize_steps(probe, skip=100)
    assert "window_step_ms_median" not in no_window


def test_train_wall_splits_into_start_up_steps_profiled_window_and_end(tmp_path):
    """The training wall time by part, on the probe's host clock: before the first step (the warmup
    among it), the steps (the profiled window among them), after the last step; the parts add up to
    train_s, a concurrent run loses them with its timing, and results.md shows them."""
    start = 100.0
    steps = list(range(100))
    begin = [start + 4.0 + 0.01 * s + (0.5 if s >= 50 else 0.0) for s in steps]  # 0.5 s of profiler start at 50
    end = [b + 0.008 for b in begin]
    probe = {"steps": steps, "host_begin_s": begin, "host_end_s": end, "train_start_s": start,
             "train_s": end[-1] + 1.5 - start, "warmup_s": 3.0,
             "gpu_busy": {"window": [50, 60], "steps_profiled": 10, "gpu_busy_ms": 4.0, "requested_steps": 10}}  # fmt: skip
    parts = res.train_wall_parts(probe, (50, 60))
    assert parts["before_first_step_s"] == pytest.approx(4.0) and parts["warmup_s"] == 3.0
    assert parts["after_last_step_s"] == pytest.approx(1.5)
    assert parts["steps_s"] == pytest.approx(0.99 + 0.5 + 0.008)
    # steps 49..60 (the window and its neighbours): 49 begins before the profiler's 0.5 s
    assert parts["profiled_window_s"] == pytest.approx(begin[60] + 0.008 - begin[49])
    total = parts["before_first_step_s"] + parts["steps_s"] + parts["after_last_step_s"]
    assert total == pytest.approx(probe["train_s"])
    assert "profiled_window_s" not in res.train_wall_parts(probe)  # no window profiled
    assert res.train_wall_parts({**probe, "train_start_s": None}) is None  # an older probe
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    record = res.empty_record("splat-plus", 2)
    res.collect_train(record, tmp_path / "probe.json", skip=10)
    assert record["train_wall_parts"] == parts
    results = {**fake_results(), "runs": [{**record, "status": "ok"}]}
    md = report.markdown_report(results)
    assert "Training wall time by part" in md
    row = next(line for line in md.splitlines() if line.startswith("| `splat-plus-2gpu` | 7.0 |"))
    assert row == "| `splat-plus-2gpu` | 7.0 | 4.0 | 3.0 | 1.5 | 0.6 | 1.5 |"
    res.discard_timing(record, "shared its GPU")
    assert record["train_wall_parts"] is None
    assert "Training wall time by part" not in report.markdown_report(
        {**fake_results(), "runs": [{**record, "status": "ok"}]}
    )


def test_later_repeats_from_another_command_merge_into_one_report(tmp_path):
    """--first-repeat 2 --concurrent-quality: repeats 2.. of every method, all quality runs, tagged -r2..;
    --from-json A B merges them with the command that made repeat 1 (recomputed summary), and refuses
    other experiments and a repeat present twice."""
    settings = BenchmarkSettings(
        methods=["splat-plus", "splatfacto"], repeats=2, first_repeat=2, concurrent_quality=True
    )
    batches = runner.plan_batches(settings)
    assert [[(r.tag, r.concurrent) for r in b] for b in batches] == [[
        ("splat-plus-1gpu-r2", True), ("splatfacto-1gpu-r2", True), ("splat-plus-1gpu-r3", True), ("splatfacto-1gpu-r3", True),
    ]]  # fmt: skip
    timed = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.0, train_wall_s=30.0, step_time_ms_median=6.0),
        _run("splatfacto", 1, repeat=1, psnr=26.8, train_wall_s=33.0, step_time_ms_median=7.0)]}  # fmt: skip
    quality = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=k, psnr=p, train_wall_s=None, timing_valid=False) for k, p in ((2, 27.4), (3, 27.2))
    ] + [_run("splatfacto", 1, repeat=k, psnr=p, train_wall_s=None, timing_valid=False) for k, p in ((2, 27.0), (3, 27.2))]}  # fmt: skip
    quality["command"] = "second"
    (tmp_path / "a.json").write_text(json.dumps(timed))
    (tmp_path / "b.json").write_text(json.dumps(quality))
    out = tmp_path / "merged"
    assert cli.main(["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(out)]) == 0
    merged = json.loads((out / "results.json").read_text())
    assert [(r["method"], r["repeat"]) for r in merged["runs"]] == [
        ("splat-plus", 1),
        ("splatfacto", 1),
        ("splat-plus", 2),
        ("splatfacto", 2),
        ("splat-plus", 3),
        ("splatfacto", 3),
    ]
    summary = {s["method"]: s for s in merged["summary"]}
    assert summary["splat-plus"]["metrics"]["psnr"]["n"] == 3
    assert summary["splat-plus"]["metrics"]["psnr"]["mean"] == pytest.approx(27.2)
    assert summary["splat-plus"]["metrics"]["train_wall_s"]["n"] == 1  # timing from the run that had the GPU alone
    assert summary["splat-plus"]["vs_reference"]["psnr"]["diff"] == pytest.approx(0.2)
    assert merged["settings"]["repeats"] == 3 and len(merged["merged_from"]) == 2
    assert "27.20 ± 0.20" in (out / "results.md").read_text()
    # the plot's quality-vs-time points: every repeat's PSNR at the timing run's wall time
    from splatbench.plots import quality_vs_time_points

    points = {p["method"]: p for p in quality_vs_time_points(merged)}
    assert points["splat-plus"]["psnr"] == pytest.approx(27.2) and points["splat-plus"]["psnr_sd"] == pytest.approx(0.2)
    assert points["splat-plus"]["wall_s"] == 30.0 and points["splatfacto"]["wall_s"] == 33.0
    assert points["splat-plus"]["label"] == "splat-plus ×1 (3 runs)"
    single = quality_vs_time_points(fake_results())
    assert len(single) == 4 and all(p["psnr_sd"] is None for p in single)  # one point per ok run, no repeats
    with pytest.raises(ValueError, match="twice|results 1 and in results 2|in results 2"):
        merge.merge_results([timed, timed])
    other = {**quality, "settings": {**quality["settings"], "steps": 7000}}
    with pytest.raises(ValueError, match="steps"):
        merge.merge_results([timed, other])
    # a later command may add variants (runs the other files do not have); a label means one thing in all
    b2_spec = "splat-plus --pipeline.datamanager.cameras-per-step 2"
    with_b2 = {**quality, "settings": {**quality["settings"], "methods": ["splat-plus", "splatfacto", "b2"],
                                       "variants": {"b2": b2_spec}},
               "runs": quality["runs"] + [_run("b2", 1, repeat=2, psnr=27.1, train_wall_s=None, timing_valid=False)]}  # fmt: skip
    merged_b2 = merge.merge_results([timed, with_b2])
    assert merged_b2["settings"]["variants"] == {"b2": b2_spec} and len(merged_b2["runs"]) == 7
    assert merged_b2["settings"]["methods"] == ["splat-plus", "splatfacto", "b2"]
    other_b2 = {**with_b2, "settings": {**with_b2["settings"], "variants": {"b2": "splat-plus --steps-scaler 0.5"}},
                "runs": [_run("b2", 1, repeat=3, psnr=27.0)]}  # fmt: skip
    with pytest.raises(ValueError, match="runs b2 as"):
        merge.merge_results([with_b2, other_b2])
    with pytest.raises(ValueError, match="runs splat-plus as the plain method"):
        merge.merge_results([timed, {**quality, "settings": {**quality["settings"], "variants": {"splat-plus": "x"}}}])
    with pytest.raises(SystemExit):
        cli.main(["--from-json", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--out", str(tmp_path / "x")])


def test_a_merge_of_one_dataset_at_two_paths_needs_data_copies_and_names_both(tmp_path):
    """Repeats made with the scene copied elsewhere on the GPU machine (``--data /tmp/dog``) pool with
    ``--data .dog`` only under --data-copies, and only where the rest of the scene arguments agree; the
    report lists both paths."""
    timed = {**fake_results(), "runs": [_run("splatfacto", 1, repeat=1, psnr=26.8)]}
    timed["settings"] = {**timed["settings"], "scene_args": "--data .dog colmap --downscale-factor 2"}
    moved = {**fake_results(), "runs": [_run("splatfacto", 1, repeat=2, psnr=27.0, timing_valid=False)]}
    moved["settings"] = {**moved["settings"], "scene_args": "--data=/tmp/dog colmap --downscale-factor 2"}
    with pytest.raises(ValueError, match="scene_args"):
        merge.merge_results([timed, moved])
    merged = merge.merge_results([timed, moved], data_copies=True)
    assert merged["settings"]["data_paths"] == [".dog", "/tmp/dog"]
    assert [r["repeat"] for r in merged["runs"]] == [1, 2]
    assert "copied to `.dog`, `/tmp/dog`" in report.markdown_report(merged)
    other_scale = {
        **moved,
        "settings": {**moved["settings"], "scene_args": "--data /tmp/dog colmap --downscale-factor 4"},
    }
    with pytest.raises(ValueError, match="scene_args"):
        merge.merge_results([timed, other_scale], data_copies=True)
    assert (
        "data_paths"
        not in merge.merge_results([timed, {**moved, "settings": timed["settings"]}], data_copies=True)["settings"]
    )
    (tmp_path / "a.json").write_text(json.dumps(timed))
    (tmp_path / "b.json").write_text(json.dumps(moved))
    with pytest.raises(SystemExit, match="scene_args"):
        cli.main(["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "x")])
    assert cli.main(["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--data-copies",
                     "--out", str(tmp_path / "m")]) == 0  # fmt: skip
    assert "/tmp/dog" in (tmp_path / "m" / "results.md").read_text()
    with pytest.raises(SystemExit, match="applies to a merge"):
        cli.main(["--from-json", str(tmp_path / "a.json"), "--data-copies", "--out", str(tmp_path / "y")])


def test_source_digest_changes_with_the_code_and_only_with_it(tmp_path):
    """The digest a run records of the ns-splat-plus sources: equal for equal sources (caches, data and
    build outputs aside), different when one byte or one file name of a source differs."""
    from splatbench.recorder import environment_info, package_source_digest, source_tree_digest

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "sub" / "strategy.py").write_text("grow = 0.5\n")
    before = source_tree_digest(pkg)
    assert len(before) == 12 and int(before, 16) >= 0
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "strategy.cpython-311.pyc").write_bytes(b"\x00compiled")
    (pkg / "notes.txt").write_text("not code")
    assert source_tree_digest(pkg) == before  # a machine's caches do not change the code
    copy = tmp_path / "installed" / "pkg"
    shutil.copytree(pkg, copy)
    assert source_tree_digest(copy) == before  # an installed copy of the same sources agrees
    (pkg / "sub" / "strategy.py").write_text("grow = 0.6\n")
    changed = source_tree_digest(pkg)
    assert changed != before
    (pkg / "sub" / "strategy.py").rename(pkg / "sub" / "budget.py")
    assert source_tree_digest(pkg) not in (before, changed)
    assert package_source_digest("no_such_package_here") is None
    import ns_splat_plus

    digest = environment_info(None)[SOURCE_DIGEST_KEY]
    assert digest == source_tree_digest(Path(ns_splat_plus.__file__).parent) and len(digest) == 12


def test_merge_refuses_to_pool_a_method_trained_from_two_sources(tmp_path):
    """Never pool runs of different code: a method whose runs recorded two source digests is refused;
    one digest (or none, in files written before digests were recorded) merges, and the report names
    each file's device and digest."""

    def runs(digest, device, *specs):
        return [_run(m, 1, repeat=k, psnr=27.0 + k / 10, train_wall_s=30.0 if k == 1 else None,
                     timing_valid=k == 1, environment={"device_name": device, SOURCE_DIGEST_KEY: digest})
                for m, k in specs]  # fmt: skip

    timed = {**fake_results(), "command": "timed", "environment": {"device_name": "H100"},
             "runs": runs("aaaaaaaaaaaa", "H100", ("splat-plus", 1), ("splatfacto", 1))}  # fmt: skip
    same = {**fake_results(), "command": "later", "environment": {"device_name": "H200"},
            "runs": runs("aaaaaaaaaaaa", "H200", ("splat-plus", 2), ("splatfacto", 2))}  # fmt: skip
    older = {**fake_results(), "command": "older", "environment": {"device_name": "H100"},
             "runs": runs(None, "H100", ("splat-plus", 3))}  # fmt: skip
    merged = merge.merge_results([timed, same, older], ["a.json", "b.json", "c.json"], "merge")
    assert [r["repeat"] for r in merged["runs"] if r["method"] == "splat-plus"] == [1, 2, 3]
    assert [p["ns_splat_plus_source"] for p in merged["merged_from"]] == [["aaaaaaaaaaaa"], ["aaaaaaaaaaaa"], []]
    lines = report._provenance_lines(merged)
    assert "  - `b.json` (H200; source aaaaaaaaaaaa): `later`" in lines
    assert "  - `c.json` (H100): `older`" in lines
    changed = {**same, "runs": runs("bbbbbbbbbbbb", "H200", ("splat-plus", 2))}
    with pytest.raises(ValueError, match="splat-plus-1gpu come from 2 versions.*aaaaaaaaaaaa, bbbbbbbbbbbb"):
        merge.merge_results([timed, changed])
    other_method = {**same, "runs": runs("bbbbbbbbbbbb", "H200", ("splatfacto", 2))}
    with pytest.raises(ValueError, match="splatfacto-1gpu come from 2 versions"):
        merge.merge_results([timed, other_method])
    (tmp_path / "a.json").write_text(json.dumps(timed))
    (tmp_path / "b.json").write_text(json.dumps(changed))
    with pytest.raises(SystemExit, match="never pool runs of different code"):
        cli.main(["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "m")])


def test_a_merge_compares_with_the_reference_it_is_given(tmp_path):
    """--from-json A B --reference M: the differences of means are against M, not the first file's reference
    (the timed command's, often splatfacto); a method no file runs is refused."""
    timed = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.0, train_wall_s=30.0, step_time_ms_median=6.0),
        _run("splatfacto", 1, repeat=1, psnr=26.0, train_wall_s=33.0, step_time_ms_median=7.0)]}  # fmt: skip
    timed["reference_method"] = "splatfacto"
    quality = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=2, psnr=27.4, train_wall_s=None, timing_valid=False),
        _run("splatfacto", 1, repeat=2, psnr=26.4, train_wall_s=None, timing_valid=False)]}  # fmt: skip
    quality["reference_method"] = "splat-plus"
    (tmp_path / "a.json").write_text(json.dumps(timed))
    (tmp_path / "b.json").write_text(json.dumps(quality))
    out = tmp_path / "merged"
    argv = ["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(out)]
    assert cli.main(argv) == 0
    merged = json.loads((out / "results.json").read_text())
    assert merged["reference_method"] == "splatfacto"
    assert cli.main(argv + ["--reference", "splat-plus"]) == 0
    merged = json.loads((out / "results.json").read_text())
    assert merged["reference_method"] == "splat-plus"
    compared = {s["method"]: s for s in merged["summary"]}["splatfacto"]
    assert compared["vs_reference"]["psnr"]["diff"] == pytest.approx(-1.0)
    assert "`splatfacto` − `splat-plus`" in (out / "results.md").read_text()
    with pytest.raises(SystemExit, match="--reference splat-plus-mcmc"):
        cli.main(argv + ["--reference", "splat-plus-mcmc"])


def test_merge_keeps_only_the_methods_asked_for(tmp_path):
    """--from-json A B --methods M...: only those methods' runs are merged (a file may hold runs of a
    method that is not part of this comparison); the summary is recomputed over what is kept, and a
    method no file runs is refused."""
    timed = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.0, train_wall_s=30.0, step_time_ms_median=6.0),
        _run("splatfacto", 1, repeat=1, psnr=26.8, train_wall_s=33.0, step_time_ms_median=7.0)]}  # fmt: skip
    older = {**fake_results(), "runs": [
        _run("splat-plus", 1, repeat=2, psnr=27.4, train_wall_s=None, timing_valid=False),
        _run("splatfacto", 1, repeat=2, psnr=27.0, train_wall_s=None, timing_valid=False),
        _run("splat-plus-fast", 1, repeat=2, psnr=20.0, train_wall_s=None, timing_valid=False)]}  # fmt: skip
    older["settings"] = {**older["settings"], "methods": ["splat-plus", "splatfacto", "splat-plus-fast"]}
    older["command"] = "older"
    (tmp_path / "a.json").write_text(json.dumps(timed))
    (tmp_path / "b.json").write_text(json.dumps(older))
    out = tmp_path / "merged"
    argv = ["--from-json", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(out)]
    assert cli.main(argv + ["--methods", "splatfacto", "splat-plus"]) == 0
    merged = json.loads((out / "results.json").read_text())
    assert sorted({r["method"] for r in merged["runs"]}) == ["splat-plus", "splatfacto"]
    assert merged["settings"]["methods"] == ["splatfacto", "splat-plus"]
    summary = {s["method"]: s for s in merged["summary"]}
    assert set(summary) == {"splat-plus", "splatfacto"} and summary["splat-plus"]["metrics"]["psnr"]["n"] == 2
    # a file left without runs is dropped, and the others keep their own names in merged_from
    only_fast = {**older, "runs": [older["runs"][2]], "command": "fast only"}
    only_fast["settings"] = {**older["settings"], "methods": ["splat-plus-fast"]}
    (tmp_path / "c.json").write_text(json.dumps(only_fast))
    assert cli.main(["--from-json", str(tmp_path / "c.json"), *argv[1:], "--methods", "splatfacto", "splat-plus"]) == 0
    merged = json.loads((out / "results.json").read_text())
    assert [m["source"] for m in merged["merged_from"]] == [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert [m["command"] for m in merged["merged_from"]] == [timed.get("command"), "older"]
    # without the selection the other method's run is merged too
    assert cli.main(argv) == 0
    assert "splat-plus-fast" in {r["method"] for r in json.loads((out / "results.json").read_text())["runs"]}
    with pytest.raises(SystemExit, match="no results file runs splat-plus-mcmc"):
        cli.main(argv + ["--methods", "splat-plus", "splat-plus-mcmc"])


def test_a_merged_report_names_its_merge_command_its_files_and_each_method_s_run_count(tmp_path):
    """A merge's report says how to regenerate it (the --from-json command, not the parts' commands
    strung together, which named runs a --methods selection had dropped) and where each file came from;
    methods with different numbers of runs are counted each."""
    timed = {**fake_results(), "command": "timed command", "finished": "2026-01-02T03:30:00+00:00", "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.0, train_wall_s=30.0), _run("splatfacto", 1, repeat=1, psnr=26.8, train_wall_s=33.0)]}  # fmt: skip
    quality = {**fake_results(), "command": "quality command", "created": "2026-01-03T10:00:00+00:00",
               "finished": "2026-01-03T11:00:00+00:00", "runs": [
        _run("splat-plus", 1, repeat=k, psnr=27.0 + k / 10, train_wall_s=None, timing_valid=False) for k in (2, 3, 4)
    ] + [_run("splatfacto", 1, repeat=k, psnr=26.9, train_wall_s=None, timing_valid=False) for k in (2, 3)]}  # fmt: skip
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "merged"
    a.write_text(json.dumps(timed))
    b.write_text(json.dumps(quality))
    argv = ["--from-json", str(a), str(b), "--out", str(out)]
    assert cli.main(argv) == 0
    merged = json.loads((out / "results.json").read_text())
    assert merged["command"] == "python scripts/benchmark.py " + " ".join(argv)
    assert [m["command"] for m in merged["merged_from"]] == ["timed command", "quality command"]
    md = (out / "results.md").read_text()
    assert f"- merged by: `{merged['command']}`" in md
    assert f"`{a}` (NVIDIA H200): `timed command`" in md and f"`{b}` (NVIDIA H200): `quality command`" in md
    assert "repeats per method: splat-plus 4, splatfacto 3" in md
    # the runs' dates: the first command's start to the last one's end, not the first start alone
    assert "- date: 2026-01-02T03:04:05+00:00 to 2026-01-03T11:00:00+00:00" in md
    section = (out / "readme_section.md").read_text()
    assert "Regenerate (merges 2 results files" in section and merged["command"] in section
    assert "measured 2026-01-02 to 2026-01-03 on" in section
    assert "quality command" not in section  # the parts' commands do not regenerate the merge
    # a merge of that merge: its own command, the first merge's command in its merged_from
    c, out2 = tmp_path / "c.json", tmp_path / "merged2"
    c.write_text(json.dumps({**quality, "command": "later", "runs": [
        _run("splatfacto", 1, repeat=4, psnr=27.1, train_wall_s=None, timing_valid=False)]}))  # fmt: skip
    assert cli.main(["--from-json", str(out / "results.json"), str(c), "--out", str(out2)]) == 0
    twice = json.loads((out2 / "results.json").read_text())
    assert [m["command"] for m in twice["merged_from"]] == [merged["command"], "later"]
    assert "4 repeats per method" in (out2 / "results.md").read_text()
    # one command's own report keeps its command
    single = tmp_path / "single"
    assert cli.main(["--from-json", str(a), "--out", str(single)]) == 0
    assert "- command: `timed command`" in (single / "results.md").read_text()
    assert "- date: 2026-01-02T03:04:05+00:00\n" in (single / "results.md").read_text()  # one command: its start


def test_renumber_repeats_pools_several_timed_commands_for_quality_keeping_one_command_s_timing(tmp_path):
    """Two timed commands each hold repeat 1 of every method: --renumber-repeats pools the later one's
    runs under the next free numbers (above any number in either file), discards their timing so that
    the timing rows stay one command's, and says which runs it renumbered; without it the merge stops."""
    first = {**fake_results(), "command": "first timed", "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.0, train_wall_s=30.0, step_time_ms_median=6.0),
        _run("splatfacto", 1, repeat=1, psnr=26.8, train_wall_s=33.0, step_time_ms_median=7.0),
        _run("splatfacto", 1, repeat=2, psnr=26.6, train_wall_s=None, timing_valid=False)]}  # fmt: skip
    second = {**fake_results(), "command": "second timed", "runs": [
        _run("splat-plus", 1, repeat=1, psnr=27.6, train_wall_s=60.0, step_time_ms_median=12.0),
        _run("splatfacto", 1, repeat=1, psnr=27.0, train_wall_s=90.0, step_time_ms_median=14.0),
        _run("splatfacto", 1, repeat=3, psnr=27.2, train_wall_s=None, timing_valid=False)]}  # fmt: skip
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "pooled"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    argv = ["--from-json", str(a), str(b), "--out", str(out)]
    with pytest.raises(SystemExit, match="--renumber-repeats"):
        cli.main(argv)
    assert cli.main(argv + ["--renumber-repeats"]) == 0
    merged = json.loads((out / "results.json").read_text())
    runs = {(r["method"], r["repeat"]): r for r in merged["runs"]}
    # splatfacto's numbers 1-3 are taken across the files, so the second file's repeat 1 becomes 4
    assert sorted(runs) == [("splat-plus", 1), ("splat-plus", 2), ("splatfacto", 1), ("splatfacto", 2),
                            ("splatfacto", 3), ("splatfacto", 4)]  # fmt: skip
    assert runs[("splatfacto", 4)]["psnr"] == 27.0 and runs[("splat-plus", 2)]["psnr"] == 27.6
    assert runs[("splatfacto", 4)]["renumbered_from"] == {"source": str(b), "repeat": 1}
    assert runs[("splatfacto", 4)]["timing_valid"] is False and runs[("splatfacto", 4)]["train_wall_s"] is None
    assert runs[("splatfacto", 3)].get("renumbered_from") is None  # its number was free: kept
    assert runs[("splatfacto", 1)]["train_wall_s"] == 33.0  # the first file keeps its numbers and timing
    summary = {s["method"]: s for s in merged["summary"]}
    assert summary["splatfacto"]["metrics"]["psnr"]["n"] == 4
    assert summary["splatfacto"]["metrics"]["psnr"]["mean"] == pytest.approx((26.8 + 26.6 + 27.0 + 27.2) / 4)
    assert summary["splatfacto"]["metrics"]["train_wall_s"]["n"] == 1  # the other command's 90 s left out
    assert summary["splatfacto"]["metrics"]["train_wall_s"]["mean"] == 33.0
    assert merged["merged_from"][1]["renumbered"] == ["splat-plus-1gpu-r1 -> r2", "splatfacto-1gpu-r1 -> r4"]
    assert "renumbered" not in merged["merged_from"][0]
    assert (
        "(renumbered, timing discarded: splat-plus-1gpu-r1 -> r2, splatfacto-1gpu-r1 -> r4)"
        in (out / "results.md").read_text()
    )
    assert "--renumber-repeats" in merged["command"]  # the regenerate line repeats it
    with pytest.raises(SystemExit, match="several results files"):
        cli.main(["--from-json", str(a), "--out", str(tmp_path / "one"), "--renumber-repeats"])


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("*.py")))
def test_every_script_answers_help(script):
    """``--help`` prints the usage and exits 0 (a % in a help string, or a script that insists on its own
    argument layout first, turns it into a traceback or an error)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "usage:" in done.stdout, done.stdout[-500:] + done.stderr[-2000:]


def test_export_ply_records_the_bytes_and_vertices_of_each_runs_ply(tmp_path, monkeypatch):
    """--export-ply: after ns-eval, ns-export gaussian-splat into the run directory; the record holds the
    PLY's size on disk and its header's vertex count, the report a column and the ratio to the reference.
    A failed export leaves the run ok, with the reason in the notes."""
    settings = BenchmarkSettings(methods=["splat-plus-lite", "splatfacto"], export_ply=True, device_type="cpu",
                                 lpips_standin=False, reference="splatfacto")  # fmt: skip
    from splatbench.options import PROBE_OUT_ENV

    vertices = {"splat-plus-lite": 40, "splatfacto": 100}
    commands = []

    def fake_child(command, log_path, env, timeout_s, label):
        commands.append(command)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("fake\n")
        method = label.split("-1gpu")[0]
        if command[3] == "train":
            base = Path(command[command.index("--output-dir") + 1]) / "exp" / "bench"
            base.mkdir(parents=True)
            (base / "config.yml").write_text("fake")
            Path(env[PROBE_OUT_ENV]).write_text(json.dumps(
                {"steps": [0, 1, 2], "host_begin_s": [0, 0.01, 0.02], "host_end_s": [0.005, 0.015, 0.025],
                 "train_s": 9.0, "final_gaussians": vertices[method]}))  # fmt: skip
        elif command[3] == "eval":
            Path(command[command.index("--output-path") + 1]).write_text(json.dumps({"results": {"psnr": 25.0}}))
        elif method == "splatfacto" and label.endswith("broken"):
            log_path.write_text("ModuleNotFoundError: No module named 'open3d'\n")
            return children.ChildResult(1, 0.1, False, log_path)
        else:
            out = Path(command[command.index("--output-dir") + 1])
            out.mkdir(parents=True)
            header = f"ply\nformat binary_little_endian 1.0\nelement vertex {vertices[method]}\nproperty float x\nend_header\n"
            (out / "splat.ply").write_bytes(header.encode() + bytes(248 * vertices[method]))
        return children.ChildResult(0, 0.1, False, log_path)

    monkeypatch.setattr(children, "run_child", fake_child)
    runs = [runner.run_batch(settings, batch, tmp_path)[0] for batch in runner.plan_batches(settings)]
    exports = [c for c in commands if "gaussian-splat" in c]
    assert len(exports) == 2 and all(c[:4] == [sys.executable, "-m", "nerfstudio.scripts.exporter", "gaussian-splat"]
                                     for c in exports)  # fmt: skip
    lite, facto = runs
    header_bytes = len("ply\nformat binary_little_endian 1.0\nelement vertex 40\nproperty float x\nend_header\n")
    assert lite["ply_bytes"] == header_bytes + 248 * 40 and lite["ply_vertices"] == 40
    assert facto["ply_vertices"] == 100 and lite["status"] == facto["status"] == "ok"
    results = {**fake_results(), "runs": runs, "settings": {**fake_results()["settings"], "repeats": 2}}
    from splatbench.stats import summarize_repeats

    results["summary"] = summarize_repeats(runs, "splatfacto")
    markdown = outputs.write_outputs(results, tmp_path / "report", readme_plot_base=tmp_path)["markdown"].read_text()
    assert "| Gaussians | PLY (MB) | densification |" in markdown
    assert f"| {lite['ply_bytes'] / 1e6:.2f} |" in markdown
    ratio = lite["ply_bytes"] / facto["ply_bytes"]
    assert f"PLY {ratio:.3f}×" in markdown and 0.39 < ratio < 0.41  # 40 against 100 vertices of 248 bytes
    # a failed export: the run keeps its status and quality; the reason is in the report's notes
    broken = runner.RunJob(settings, runner.PlannedRun("splatfacto", 1, 1, "splatfacto-1gpu-broken"), tmp_path / "b")
    assert broken.prepare() and broken.train()
    broken.after_training()
    assert broken.record["status"] == "ok" and broken.record["psnr"] == 25.0 and broken.record["ply_bytes"] is None
    assert "open3d" in broken.record["ply_error"]
    table = report.markdown_table({"runs": [broken.record]})
    assert "`splatfacto-1gpu`: no PLY size: ns-export:" in table and "open3d" in table


def test_bytecode_cached_tells_where_start_up_compiles_sources(tmp_path, monkeypatch):
    """A package whose bytecode is not where Python reads it (PYTHONPYCACHEPREFIX elsewhere, or never
    written) is reported False; after compileall, True; the environment record carries it."""
    import compileall
    import importlib
    import sys

    from splatbench.recorder import bytecode_cached, environment_info

    package = tmp_path / "pkg_without_pyc"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))
    importlib.invalidate_caches()
    assert bytecode_cached("pkg_without_pyc") is False
    assert compileall.compile_dir(str(package), quiet=1)
    assert bytecode_cached("pkg_without_pyc") is True
    assert bytecode_cached("no_such_package_here") is None
    assert "bytecode_cached" in environment_info(None)


@pytest.mark.parametrize(("mode", "program"), [("train", "ns-train"), ("eval", "ns-eval")])
def test_probes_run_under_the_command_line_of_the_command_they_stand_for(mode, program, monkeypatch):
    """A plugin decides from the command line at import what a run of its own gets (splat-plus: its excepthook,
    its quick listing of nerfstudio's external methods): a probed run must show it ns-train's / ns-eval's."""
    import tyro

    from splatbench import probe

    class Parsed(Exception):
        pass

    seen = []

    def parse(*args, **kwargs):
        seen.append(list(sys.argv))
        raise Parsed

    monkeypatch.setattr(sys, "argv", ["/path/to/splatbench/probe.py", mode, "ignored"])  # restored after the test
    monkeypatch.setattr(tyro, "cli", parse)
    argv = ["splat-plus-lite", "--data", "scene"] if mode == "train" else ["--load-config", "run/config.yml"]
    with pytest.raises(Parsed):
        (probe.run_train if mode == "train" else probe.run_eval)(argv)
    assert seen == [[program, *argv]]


def test_bytecode_roots_and_compiling_them(tmp_path, monkeypatch):
    """bytecode_roots: the standard library, the site directory of an installed package (its neighbours are its
    dependencies) and the folder of an editable one; compile_bytecode writes what bytecode_cached looks for."""
    import importlib
    import sys
    import sysconfig

    from splatbench.bytecode import bytecode_roots, compile_bytecode
    from splatbench.recorder import bytecode_cached

    site, checkout = tmp_path / "site-packages", tmp_path / "checkout"
    for parent, name in ((site, "installed_pkg"), (site, "its_dependency"), (checkout, "editable_pkg")):
        (parent / name).mkdir(parents=True)
        (parent / name / "__init__.py").write_text("VALUE = 1\n")
    (site / "installed_pkg-1.0.dist-info").mkdir()
    for path in (site, checkout):
        monkeypatch.syspath_prepend(str(path))
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))  # nothing written beside the sources
    importlib.invalidate_caches()
    roots = bytecode_roots(("installed_pkg", "editable_pkg", "its_dependency", "no_such_package_here"))
    assert roots == [Path(sysconfig.get_paths()["stdlib"]), site, checkout / "editable_pkg"]
    assert bytecode_cached("its_dependency") is False
    ok, seconds = compile_bytecode(roots[1:], workers=1)
    assert ok and seconds >= 0
    assert bytecode_cached("installed_pkg") and bytecode_cached("its_dependency") and bytecode_cached("editable_pkg")


@pytest.mark.parametrize("compile_first", [True, False])
def test_the_benchmark_compiles_missing_bytecode_before_its_first_run(compile_first, tmp_path, monkeypatch):
    """Where nerfstudio has no bytecode on disk, every process would compile its imports at start-up (about 10 s
    each on the GPU machines): the benchmark compiles it once before any child starts, unless told not to."""
    from splatbench import bytecode, recorder

    events = []
    monkeypatch.setattr(recorder, "bytecode_cached", lambda module="nerfstudio": False)
    monkeypatch.setattr(bytecode, "bytecode_roots", lambda: [tmp_path / "site"])
    monkeypatch.setattr(bytecode, "compile_bytecode", lambda roots: events.append(("compile", roots)) or (True, 0.1))

    def fake_child(command, log_path, env, timeout_s, label):
        events.append(("child", command[3]))
        return _fake_two_step_child(command, log_path, env)

    monkeypatch.setattr(children, "run_child", fake_child)
    settings = BenchmarkSettings(methods=["splat-plus"], device_type="cpu", lpips_standin=False,
                                 scene_args="--data scene colmap", compile_bytecode=compile_first)  # fmt: skip
    runner.run_benchmark(settings, tmp_path / "out")
    children_started = [e for e in events if e[0] == "child"]
    assert children_started == [("child", "train"), ("child", "eval")]
    if compile_first:
        assert events[0] == ("compile", [tmp_path / "site"])
    else:
        assert all(e[0] == "child" for e in events)
    flag = ["--methods", "splat-plus", "--scene-args", "--data scene colmap", "--no-compile-bytecode"]
    assert cli.settings_from_args(cli.build_parser().parse_args(flag)).compile_bytecode is False
    assert cli.settings_from_args(cli.build_parser().parse_args(flag[:-1])).compile_bytecode is True


def test_warm_caches_trains_each_method_once_to_its_first_step_before_any_run(tmp_path, monkeypatch):
    """--warm-caches: one training child per method (a variant included), on the timed runs' schedule, told to stop
    after its first step, all before the first timed run; nothing of them is kept but their walls; a method whose
    warm-up run fails is reported and the runs still go on."""
    from splatbench.options import STOP_AFTER_STEPS_ENV

    out = tmp_path / "out"
    settings = BenchmarkSettings(methods=["splat-plus", "graphed"], variants={"graphed": "splat-plus --cuda-graph True"},
                                 steps=500, device_type="cpu", lpips_standin=False, warm_caches=True,
                                 scene_args="--data scene colmap")  # fmt: skip
    order = []

    def fake_child(command, log_path, env, timeout_s, label):
        order.append((label, env.get(STOP_AFTER_STEPS_ENV)))
        if label.endswith("-warm"):
            assert command[command.index("--max-num-iterations") + 1] == "500"  # the warmup visits the run's sizes
            run_dir = Path(command[command.index("--output-dir") + 1])
            assert run_dir.is_dir() and run_dir.parent == out / "warm"
            (run_dir / "left-over").write_text("x")
            log_path.parent.mkdir(parents=True, exist_ok=True)
            failed = "--cuda-graph" in command
            log_path.write_text(
                "Traceback\nRuntimeError: no GPU\n"
                if failed
                else "[bench] stopping after 1 training step(s) at step 0\n"
            )
            return children.ChildResult(1 if failed else 0, 4.25, False, log_path)
        return _fake_two_step_child(command, log_path, env)

    monkeypatch.setattr(children, "run_child", fake_child)
    results = runner.run_benchmark(settings, out)
    assert order[:2] == [("splat-plus-warm", "1"), ("graphed-warm", "1")]  # first, and told to stop
    assert [stop for _, stop in order[2:]] == [None] * (len(order) - 2)  # the runs train their whole schedule
    assert [(w["method"], w["process_wall_s"], w["reached_first_step"]) for w in results["cache_warm_runs"]] == [
        ("splat-plus", 4.25, True), ("graphed", 4.25, False)]  # fmt: skip
    assert [r["status"] for r in results["runs"]] == ["ok", "ok"]
    assert not (out / "warm" / "splat-plus").exists() and not (out / "warm" / "graphed").exists()
    assert json.loads((out / "results.json").read_text())["cache_warm_runs"] == results["cache_warm_runs"]
    assert "`splat-plus` 4.2 s, `graphed` 4.2 s (no first step)" in (out / "results.md").read_text()
    plain = runner.run_benchmark(replace(settings, warm_caches=None), tmp_path / "plain")  # the CPU's default: off
    assert "cache_warm_runs" not in plain and "caches warmed" not in (tmp_path / "plain" / "results.md").read_text()


@pytest.mark.parametrize(
    "flags, warms",
    [
        ([], True),
        (["--device-type", "cpu"], False),
        (["--no-warm-caches"], False),
        (["--device-type", "cpu", "--warm-caches"], True),
    ],  # fmt: skip
)
def test_caches_are_warmed_by_default_on_cuda_only(flags, warms):
    args = cli.build_parser().parse_args(["--methods", "splat-plus", "--scene-args", "--data scene colmap", *flags])
    assert cli.settings_from_args(args).warms_caches is warms


@pytest.mark.slow
def test_a_probe_told_to_stop_after_its_first_step_ends_there_and_keeps_nothing(tmp_path):
    """What --warm-caches runs: the real probe on the CPU stops after one training step of the run, once
    splat-plus's warmup has run, exit status 0, before the probe JSON and any checkpoint are written."""
    from splatbench.options import PROBE_OUT_ENV, STOP_AFTER_STEPS_ENV

    scene = _small_scene(tmp_path)
    env = dict(os.environ, **{STOP_AFTER_STEPS_ENV: "1", PROBE_OUT_ENV: str(tmp_path / "probe.json")})
    command = [sys.executable, "-m", PROBE_MODULE, "train", "splat-plus", "--output-dir", str(tmp_path / "run"),
               "--max-num-iterations", "40", "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
               "--machine.device-type", "cpu", "--data", str(scene), "colmap"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stopped = proc.stdout.find("[bench] stopping after 1 training step(s) at step 0")
    # after the warmup's steps (which go through the same callbacks) and its renders at the later sizes
    assert 0 <= proc.stdout.find("Warmup: 5 training steps") < stopped, proc.stdout[-3000:]
    assert not (tmp_path / "probe.json").exists()
    assert not list((tmp_path / "run").rglob("*.ckpt"))


def test_progress_lines_say_how_long_the_steps_left_take_at_the_pace_so_far(monkeypatch, capsys):
    """A run's progress line (every tenth of its steps) adds the seconds its remaining steps take at the pace
    of the steps timed so far, the first one left out (its set-up), so that concurrent runs that cannot end in
    time can be stopped early."""
    import torch

    from splatbench import recorder

    clock = iter(range(0, 10_000, 1))  # perf_counter: begin and end of each step 1 s apart, steps 2 s apart
    monkeypatch.setattr(recorder.time, "perf_counter", lambda: float(next(clock)))
    steps = recorder.StepRecorder(torch.device("cpu"), lambda: 0, max_steps=100)
    for step in range(30):
        steps.begin(step)
        steps.end(step)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[bench] step")]
    assert lines[0] == "[bench] step 10/100 (~180 s of steps left)"  # 90 steps at 2 s
    assert lines[-1] == "[bench] step 30/100 (~140 s of steps left)"
