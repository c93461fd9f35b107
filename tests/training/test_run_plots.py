"""training.png: the picture of a run that rank 0 writes at the end of training (training/run_plots.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from PIL import Image

from ns_splat_plus.training import run_plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

RECORDS = [
    {"step": 0, "event": "start", "strategy": "default", "num_gaussians": 800},
    {"step": 0, "event": "opacity_reset", "value": 0.2, "num_gaussians": 800},
    {"step": 99, "event": "gradient_summary", "first_step": 0, "num_steps": 100, "norm_mean": 0.0045,
     "norm_max": 0.19, "zero_steps": 0},
    {"step": 150, "event": "refine", "strategy": "default", "duplicated": 10, "split": 788, "pruned": 320,
     "num_gaussians_before": 800, "num_gaussians": 1278,
     "grad2d": {"threshold": 0.0008, "median": 0.00096, "p90": 0.0095, "p99": 0.0287, "max": 0.057}},
    {"step": 199, "event": "gradient_summary", "first_step": 100, "num_steps": 100, "norm_mean": 0.003,
     "norm_max": 0.12, "zero_steps": 0},
    {"step": 250, "event": "refine", "strategy": "default", "duplicated": 4, "split": 120, "pruned": 60,
     "num_gaussians_before": 1278, "num_gaussians": 1342,
     "grad2d": {"threshold": 0.0008, "median": 0.0007, "p90": 0.006, "p99": 0.02, "max": 0.04}},
]  # fmt: skip


def assert_png(path: Path, min_size=(400, 300)) -> None:
    assert path.is_file(), f"no {path}"
    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size >= min_size, image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is None or len(colours) > 50, "an empty picture"


def test_plot_of_a_hand_made_densification_jsonl(tmp_path: Path):
    jsonl = tmp_path / "densification.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + '{"step": 300, "event": "ref')  # a cut last line
    records = run_plots.read_records(jsonl)
    assert [r["step"] for r in records] == [r["step"] for r in RECORDS]
    eval_metrics = {"all eval images": {"psnr": [(100, 18.0), (200, 21.5)], "ssim": [(100, 0.6), (200, 0.7)]}}
    out = run_plots.plot_run(records, tmp_path / "training.png", eval_metrics, title="hand-made")
    assert out == tmp_path / "training.png"
    assert_png(out)


def test_write_run_plot_reads_the_run_folder_and_its_tensorboard_eval(tmp_path: Path):
    """The run folder's densification.jsonl and nerfstudio's eval scalars in a TensorBoard event file."""
    from torch.utils.tensorboard import SummaryWriter

    (tmp_path / "densification.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    events = SummaryWriter(log_dir=str(tmp_path))
    for step, psnr in ((100, 17.5), (200, 20.25)):
        events.add_scalar("Eval Images Metrics/psnr", psnr, step)
        events.add_scalar("Eval Images Metrics/ssim", 0.5, step)
        events.add_scalar("Train Loss", 0.1, step)  # not an eval metric
    events.close()
    assert run_plots.read_eval_metrics(tmp_path) == {
        "one eval image": {"psnr": [(100, 17.5), (200, 20.25)], "ssim": [(100, 0.5), (200, 0.5)]}
    }
    assert run_plots.write_run_plot(tmp_path) == tmp_path / run_plots.PLOT_NAME
    assert_png(tmp_path / run_plots.PLOT_NAME)


def test_no_matplotlib_costs_one_line_and_no_plot(tmp_path: Path, monkeypatch, capsys):
    import sys

    (tmp_path / "densification.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert run_plots.write_run_plot(tmp_path) is None
    assert not (tmp_path / run_plots.PLOT_NAME).exists()
    assert "matplotlib is not installed" in capsys.readouterr().out


@pytest.mark.slow
def test_a_short_cpu_run_writes_training_png(tmp_path: Path):
    """30 steps, the one-image evaluation every 10 steps (TensorBoard on): the picture of the run, eval included."""
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=30)
    config.steps_per_eval_image = 10
    try:
        trainer = build_trainer(config)
        trainer.train()
    finally:
        close_writers()
    run = config.get_base_dir()
    assert_png(run / run_plots.PLOT_NAME)
    assert run_plots.read_records(run / "densification.jsonl")[0]["event"] == "start"
    psnr = run_plots.read_eval_metrics(run)["one eval image"]["psnr"]
    assert [step for step, _ in psnr] == [10, 20]  # the evaluations up to the last step, flushed before the plot
