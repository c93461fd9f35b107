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


def test_eval_metrics_are_read_past_images_and_a_cut_last_record(tmp_path: Path):
    """The reader skips image records unread (tensorboard's own checks their CRC in pure Python: a
    minute for 30 large eval images) and gives tensorboard's values; a file cut mid-record (still being
    written) gives what came before the cut."""
    import numpy as np
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event
    from torch.utils.tensorboard import SummaryWriter

    events = SummaryWriter(log_dir=str(tmp_path))
    noise = (np.random.default_rng(0).random((3, 200, 200)) * 255).astype(np.uint8)  # a PNG over 64 KiB
    for step, psnr in ((10, 17.5), (20, 20.25), (30, 21.0)):
        events.add_image("Eval Images/img", noise, step)
        events.add_scalar("Eval Images Metrics/psnr", psnr, step)
        events.add_scalar("Eval Images Metrics Dict (all images)/ssim", psnr / 40, step)
    events.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    small = list(run_plots._small_events(path, Event))
    assert small and not any(v.tag == "Eval Images/img" for e in small for v in e.summary.value), "an image was parsed"
    everything = list(EventFileLoader(str(path)).Load())
    assert sum(v.tag == "Eval Images/img" for e in everything for v in e.summary.value) == 3  # the file holds them
    want = {
        "one eval image": {"psnr": [(10, 17.5), (20, 20.25), (30, 21.0)]},
        "all eval images": {"ssim": [(10, 17.5 / 40), (20, 20.25 / 40), (30, 21.0 / 40)]},
    }
    got = run_plots.read_eval_metrics(tmp_path)
    assert got.keys() == want.keys()
    for group, metrics in want.items():
        for key, series in metrics.items():
            assert [s for s, _ in got[group][key]] == [s for s, _ in series]
            assert [v for _, v in got[group][key]] == pytest.approx([v for _, v in series])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])  # the last scalar record cut short
    cut = run_plots.read_eval_metrics(tmp_path)
    assert cut["one eval image"]["psnr"] == got["one eval image"]["psnr"]
    assert [s for s, _ in cut["all eval images"]["ssim"]] == [10, 20]


def test_only_records_with_an_eval_tag_are_parsed(tmp_path: Path, monkeypatch):
    """A long run's event file is mostly training scalars: the reader parses only the records that
    name an eval group, and still finds every eval value."""
    from tensorboard.compat.proto.event_pb2 import Event
    from torch.utils.tensorboard import SummaryWriter

    events = SummaryWriter(log_dir=str(tmp_path))
    for step in range(0, 200, 10):
        events.add_scalar("Train Loss", 0.1, step)
        events.add_scalar("Train Metrics Dict/psnr", 20.0, step)  # "psnr", but not an eval group
    events.add_scalar("Eval Images Metrics Dict (all images)/psnr", 22.5, 100)
    events.close()
    parsed = []

    class CountingEvent:
        @staticmethod
        def FromString(data: bytes) -> Event:  # noqa: N802 (protobuf's name)
            event = Event.FromString(data)
            parsed.append([v.tag for v in event.summary.value])
            return event

    real = run_plots._small_events
    monkeypatch.setattr(
        run_plots, "_small_events", lambda path, _, containing=(): real(path, CountingEvent, containing)
    )
    assert run_plots.read_eval_metrics(tmp_path) == {"all eval images": {"psnr": [(100, 22.5)]}}
    assert parsed == [["Eval Images Metrics Dict (all images)/psnr"]], parsed


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
