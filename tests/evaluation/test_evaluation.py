"""Evaluation: no autograd anywhere, held-out split only, LPIPS null (never 0), ns-eval output, memory."""

from __future__ import annotations

import json
import os

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import evaluation


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 30-step CPU run with a checkpoint and config.yml (shared by the tests of this module)."""
    root = tmp_path_factory.mktemp("evaluation")
    scene = small_scene(root / "scene")
    config = trainer_config(scene, root / "out", steps=30)
    config.warmup_steps = 0  # warmup is tested elsewhere; saves time here
    trainer = build_trainer(config)
    trainer.train()
    close_writers()
    return trainer


def _record_grad_mode(model, monkeypatch):
    """Wrap model.get_outputs to record grad mode and whether any output requires grad."""
    seen = []
    original = model.get_outputs

    def recording(camera):
        outputs = original(camera)
        tensors = [v for v in outputs.values() if isinstance(v, torch.Tensor)]
        seen.append((torch.is_grad_enabled(), any(t.requires_grad for t in tensors)))
        return outputs

    monkeypatch.setattr(model, "get_outputs", recording)
    return seen


def test_every_eval_path_runs_without_autograd(trained, monkeypatch):
    pipeline = trained.pipeline
    model = pipeline.model
    assert model.lpips is None  # offline: no AlexNet weights on CI
    seen = _record_grad_mode(model, monkeypatch)
    pipeline.train()

    averages = pipeline.get_average_eval_image_metrics(step=5)
    metrics, images = pipeline.get_eval_image_metrics_and_images(step=5)
    outputs, losses, eval_metrics = pipeline.get_eval_loss_dict(step=5)
    # the viewer's path: nerfstudio's render state machine calls model.eval(), get_outputs_for_camera
    camera, _ = evaluation.eval_camera_and_batch(pipeline.datamanager, 0, torch.device("cpu"))
    model.eval()
    model.get_outputs_for_camera(camera)
    model.train()

    num_eval = len(pipeline.datamanager.eval_dataset)
    assert len(seen) == num_eval + 3  # every render went through the recorder
    assert all(grad_enabled is False for grad_enabled, _ in seen), seen
    assert all(requires_grad is False for _, requires_grad in seen), seen
    assert not any(v.requires_grad for v in losses.values())
    assert not any(isinstance(v, torch.Tensor) and v.requires_grad for v in outputs.values())
    assert torch.is_grad_enabled() and pipeline.training  # restored afterwards
    # numbers only for the writer: LPIPS unavailable is left out, never logged as 0
    assert "lpips" not in averages and "lpips" not in metrics
    assert averages["psnr"] > 5.0 and 0.0 < averages["ssim"] <= 1.0
    assert metrics["num_rays"] == 48 * 36 and images["img"].shape == (36, 96, 3)
    writer_ready = {**averages, **metrics, **eval_metrics}
    assert all(isinstance(v, float) or isinstance(v, int) for v in writer_ready.values())


def test_eval_images_stay_on_the_host_and_split_is_held_out(trained):
    datamanager = trained.pipeline.datamanager
    cached = datamanager.cached_eval
    assert all(d["image"].device.type == "cpu" for d in cached)
    split = evaluation.describe_split(datamanager)
    assert split["eval_mode"] == "interval" and split["eval_interval"] == 8
    assert split["num_images"] == len(datamanager.eval_dataset) == 2
    assert split["held_out"] is True and split["num_train_images"] == 14
    assert split["image_filenames"] == ["frame_0000.png", "frame_0008.png"]
    before = dict(cached[1])
    # another device ("meta" exists on every machine): the batch moves, the cache must not
    camera, batch = evaluation.eval_camera_and_batch(datamanager, 1, torch.device("meta"))
    assert batch["image"].device.type == "meta" and camera.shape == (1,)
    assert cached[1].keys() == before.keys() and all(cached[1][k] is v for k, v in before.items())
    assert cached[1]["image"].device.type == "cpu"


def test_averages_skip_missing_lpips_and_never_report_zero():
    report = evaluation.EvalReport(
        per_image=[{"psnr": 20.0, "ssim": 0.5, "lpips": None}, {"psnr": 22.0, "ssim": 0.7, "lpips": None}],
        split={},
        num_gaussians=10,
    )
    averages = report.averages(get_std=True)
    assert averages["psnr"] == pytest.approx(21.0) and averages["psnr_std"] == pytest.approx(2**0.5)
    assert averages["lpips"] is None and averages["lpips_std"] is None
    assert evaluation.mean_and_std([0.3]) == (0.3, None)  # one image: no std (not NaN, invalid JSON)
    assert evaluation.mean_and_std([None, 0.2, 0.4])[0] == pytest.approx(0.3)
    assert "lpips" not in evaluation.scalar_metrics(averages)


def test_memory_tracker_is_null_off_the_gpu_and_counts_nested_evaluation_once(monkeypatch):
    tracker = evaluation.PeakMemoryTracker(torch.device("cpu"))
    with tracker.evaluating():
        with tracker.evaluating():
            pass
    summary = tracker.as_dict()
    assert summary["train_peak_bytes"] is None and summary["eval_peak_bytes"] is None
    assert summary["num_evaluations"] == 0 and summary["measure"] is None  # nothing is measured off the GPU
    assert evaluation.memory_tracker("cpu") is evaluation.memory_tracker(torch.device("cpu"))

    # on a GPU (torch's peak counter simulated here): a nested evaluation is one evaluation, and its peak
    # is kept apart from training's
    counter = {"allocated": 0, "peak": 0}

    def allocate(num_bytes):
        counter["allocated"] += num_bytes
        counter["peak"] = max(counter["peak"], counter["allocated"])
        counter["allocated"] -= num_bytes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: counter["peak"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: counter.update(peak=0))
    gpu = evaluation.PeakMemoryTracker(torch.device("cuda"))
    allocate(100)  # training
    with gpu.evaluating():
        allocate(300)
        with gpu.evaluating():  # e.g. get_average_eval_image_metrics inside the trainer's eval_iteration
            allocate(250)
    assert gpu.num_evaluations == 1 and gpu.as_dict()["num_evaluations"] == 1
    assert (gpu.train_peak_bytes, gpu.eval_peak_bytes) == (100, 300)
    gpu.start_training_window()
    allocate(120)
    assert gpu.observe_training() == 120
    with gpu.evaluating():
        allocate(50)
    summary = gpu.as_dict()
    assert summary["num_evaluations"] == gpu.num_evaluations == 2
    assert (summary["train_peak_bytes"], summary["eval_peak_bytes"], gpu.last_eval_peak_bytes) == (120, 300, 50)


def test_checkpoint_loads_with_weights_only_and_dir_holds_only_checkpoints(trained):
    files = sorted(p.name for p in trained.checkpoint_dir.iterdir())
    assert files == ["step-000000029.ckpt"]  # the temporary file of the save is not left there
    state = torch.load(trained.checkpoint_dir / files[0], map_location="cpu", weights_only=True)
    assert state["step"] == 29 and state["method_name"] == "splat-plus"
    assert state["pipeline"]["_model.gauss_params.means"].shape[0] == trained.pipeline.model.num_points
    assert set(state["strategy_state"]) >= {"grad2d", "count"}


@pytest.mark.slow
def test_ns_eval_cli_writes_nerfstudio_json_with_split_per_image_and_null_lpips(trained, tmp_path):
    config_path = trained.base_dir / "config.yml"
    out = tmp_path / "metrics.json"
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    from clirun import ns_eval

    proc = ns_eval(config_path, out, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["method_name"] == "splat-plus" and report["checkpoint"].endswith("step-000000029.ckpt")
    results = report["results"]
    for key in ("psnr", "psnr_std", "ssim", "ssim_std", "num_rays_per_sec", "fps"):
        assert isinstance(results[key], float), key
    assert results["lpips"] is None and results["lpips_std"] is None and results["lpips_available"] is False
    assert results["num_gaussians"] == trained.pipeline.model.num_points
    assert results["split"]["held_out"] is True and results["split"]["split"] == "test"
    per_image = results["per_image"]
    assert (
        [m["image"] for m in per_image] == ["frame_0000.png", "frame_0008.png"] == results["split"]["image_filenames"]
    )
    assert all(m["lpips"] is None and m["psnr"] > 5.0 for m in per_image)
    assert results["psnr"] == pytest.approx(sum(m["psnr"] for m in per_image) / 2)
    assert results["memory"]["device"] == "cpu" and results["memory"]["eval_peak_bytes"] is None


def test_evaluation_with_lpips_on_reports_it(trained, monkeypatch):
    """Stand-in AlexNet weights placed locally (as a user who copied the file): LPIPS is a number."""
    import torchvision

    from ns_splat_plus import upstream

    monkeypatch.setenv("TORCH_HOME", os.environ["TORCH_HOME"] + "-lpips-on")
    path = upstream.alexnet_weights_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    model = trained.pipeline.model
    monkeypatch.setattr(model, "lpips", upstream.build_lpips())
    assert model.lpips is not None
    report = evaluation.evaluate_all_images(trained.pipeline)
    values = [m["lpips"] for m in report.per_image]
    assert all(isinstance(v, float) and v > 0.0 for v in values), values
    results = report.ns_eval_results()
    assert results["lpips_available"] is True and results["lpips"] == pytest.approx(sum(values) / len(values))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_eval_peak_does_not_exceed_train_peak(tmp_path, monkeypatch):
    """Training at 1/4 resolution, evaluating at full: the strip + host-metric path is exercised."""
    from ns_splat_plus.model import model as model_module

    strips = []
    original = model_module.strip_rows

    def recording(height, width, max_pixels):
        rows = original(height, width, max_pixels)
        strips.append(rows)
        return rows

    monkeypatch.setattr(model_module, "strip_rows", recording)
    scene = small_scene(tmp_path / "scene")
    config = trainer_config(scene, tmp_path / "out", steps=60)
    config.machine.device_type = "cuda"
    config.steps_per_eval_all_images = 20
    config.steps_per_eval_image = 10
    config.pipeline.datamanager.cache_images = "gpu"
    config.pipeline.model.num_downscales = 2  # train at 1/4 resolution, evaluate at full
    config.pipeline.model.resolution_schedule = 1000
    trainer = build_trainer(config)
    trainer.train()
    close_writers()
    assert any(rows is not None and len(rows) > 1 for rows in strips), strips  # eval renders went in strips
    tracker = evaluation.memory_tracker(trainer.pipeline.device)
    assert all(d["image"].device.type == "cpu" for d in trainer.pipeline.datamanager.cached_eval)
    assert tracker.train_peak_bytes and tracker.eval_peak_bytes
    assert tracker.eval_peak_bytes <= tracker.train_peak_bytes, tracker.as_dict()


def test_a_metric_runs_whole_in_strips_or_on_the_host_by_the_device_memory_left():
    from ns_splat_plus.model.metrics import MIN_STRIP_ROWS, SSIM_BYTES_PER_PIXEL, rows_per_strip

    H, W, halo, per_pixel = 1080, 1920, 10, SSIM_BYTES_PER_PIXEL
    whole = per_pixel * H * W
    assert rows_per_strip(H, W, per_pixel, halo, free_bytes=None) is None  # off CUDA / no training peak known
    assert rows_per_strip(H, W, per_pixel, halo, free_bytes=whole) is None
    rows = rows_per_strip(H, W, per_pixel, halo, free_bytes=whole // 3)
    assert rows is not None and MIN_STRIP_ROWS <= rows < H
    assert per_pixel * W * (rows + halo) <= whole // 3 < per_pixel * W * (rows + halo + 1)  # the most that fits
    smallest = per_pixel * W * (MIN_STRIP_ROWS + halo)
    assert rows_per_strip(H, W, per_pixel, halo, free_bytes=smallest) == MIN_STRIP_ROWS
    assert rows_per_strip(H, W, per_pixel, halo, free_bytes=smallest - 1) == 0  # the host
    assert rows_per_strip(H, W, per_pixel, halo, free_bytes=-(10**9)) == 0  # the device already above the peak


def test_images_held_on_the_host_go_to_the_device_in_crops_within_a_known_limit():
    """Renders over training's pixel budget are held on the host: their metrics go to the device only as
    crops (their copies counted), never without a known training peak, and whole only as one strip."""
    from ns_splat_plus.model.metrics import IMAGE_COPIES_BYTES_PER_PIXEL, SSIM_BYTES_PER_PIXEL, device_rows

    H, W, halo, per_pixel = 1080, 1920, 10, SSIM_BYTES_PER_PIXEL
    with_copies = (per_pixel + IMAGE_COPIES_BYTES_PER_PIXEL) * W
    assert device_rows(H, W, per_pixel, halo, free_bytes=None, held_on_host=True) == 0
    assert device_rows(H, W, per_pixel, halo, free_bytes=None, held_on_host=False) is None
    assert device_rows(H, W, per_pixel, halo, free_bytes=with_copies * H, held_on_host=True) == H
    assert device_rows(H, W, per_pixel, halo, free_bytes=per_pixel * W * H, held_on_host=False) is None
    rows = device_rows(H, W, per_pixel, halo, free_bytes=per_pixel * W * H, held_on_host=True)  # the copies count
    assert rows is not None and with_copies * (rows + halo) <= per_pixel * W * H < with_copies * (rows + halo + 1)
    assert device_rows(H, W, per_pixel, halo, free_bytes=with_copies * (64 + halo) - 1, held_on_host=True) == 0


@pytest.fixture
def stand_in_lpips(tmp_path, monkeypatch):
    """torchmetrics' LPIPS as the model builds it, with stand-in AlexNet weights (no network)."""
    import torchvision

    from ns_splat_plus import upstream

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    path = upstream.alexnet_weights_path()
    path.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    return upstream.build_lpips()


def _image_pair(height, width, seed=1):
    generator = torch.Generator().manual_seed(seed)
    a = torch.rand(1, 3, height, width, generator=generator)
    return a, (a + 0.1 * torch.randn(a.shape, generator=generator)).clamp(0, 1)


@pytest.mark.parametrize("height, width", [(203, 317), (480, 64), (97, 130)])
def test_lpips_in_row_strips_is_the_whole_image_value(stand_in_lpips, height, width):
    """Each strip reads far enough beyond its rows, on every layer's stride grid, for its share of every
    feature map to be the whole image's: the same LPIPS at any strip height (float rounding aside)."""
    from ns_splat_plus import upstream

    geometry = upstream.lpips_strip_geometry(stand_in_lpips)
    assert [m.stride for m in geometry] == [4, 8, 16, 16, 16]  # AlexNet's five feature maps
    a, b = _image_pair(height, width)
    with torch.no_grad():
        whole = float(stand_in_lpips.net(a, b, normalize=True))
        assert whole > 0
        for rows in (16, 40, 100, height):
            assert float(upstream.lpips_in_row_strips(stand_in_lpips, a, b, rows)) == pytest.approx(whole, rel=1e-5)


def test_an_lpips_of_another_structure_is_never_split(stand_in_lpips):
    """Strips are computed from the layers they know (convolutions, max-pooling, ReLU); any other layer or
    setting makes the geometry None, and the metric runs whole (or on the host)."""
    import copy

    from ns_splat_plus import upstream

    assert upstream.lpips_strip_geometry(stand_in_lpips) is not None
    other = copy.deepcopy(stand_in_lpips)
    other.net.net.slice2.add_module("unknown", torch.nn.Dropout())  # a layer the row maps do not know
    assert upstream.lpips_strip_geometry(other) is None
    pooled = copy.deepcopy(stand_in_lpips)
    pooled.net.net.slice2[0].ceil_mode = True  # SqueezeNet's pooling rounds up: rows no longer on one grid
    assert upstream.lpips_strip_geometry(pooled) is None
    spatial = copy.deepcopy(stand_in_lpips)
    spatial.net.spatial = True  # a per-pixel map, not a mean
    assert upstream.lpips_strip_geometry(spatial) is None
    a, b = _image_pair(64, 64)
    with pytest.raises(ValueError):
        upstream.lpips_in_row_strips(other, a, b, 16)


@pytest.mark.parametrize("height", [75, 203])
def test_ssim_in_row_strips_is_the_whole_image_value(height):
    from pytorch_msssim import SSIM

    from ns_splat_plus.model.metrics import ssim_in_row_strips

    ssim = SSIM(data_range=1.0, size_average=True, channel=3)
    a, b = _image_pair(height, 150)
    whole = float(ssim(a, b))
    for rows in (1, 7, 64, height - 10):
        assert float(ssim_in_row_strips(ssim, a, b, rows)) == pytest.approx(whole, rel=1e-6), rows


def test_image_metrics_are_the_same_whole_in_strips_and_on_the_host(trained, stand_in_lpips, monkeypatch):
    """The metrics of one render with the device memory left for all of it, for strips only, and for less
    than the smallest strip (the host): the same numbers, and each path taken where it should be."""
    from ns_splat_plus import upstream
    from ns_splat_plus.model import metrics
    from ns_splat_plus.model.metrics import LPIPS_BYTES_PER_PIXEL, SSIM_BYTES_PER_PIXEL

    model = trained.pipeline.model
    monkeypatch.setattr(model, "lpips", stand_in_lpips)
    monkeypatch.setattr(model, "eval_pixel_budget", lambda: 0)
    H, W = 480, 160
    a, b = _image_pair(H, W, seed=3)
    outputs = {"rgb": a[0].permute(1, 2, 0).contiguous(), "background": torch.zeros(3)}
    batch = {"image": b[0].permute(1, 2, 0).contiguous()}
    calls = []
    for name, module in (("ssim_in_row_strips", metrics), ("lpips_in_row_strips", upstream)):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, _real=real, _name=name: calls.append(_name) or _real(*args))
    results = {}
    strips = LPIPS_BYTES_PER_PIXEL * W * 260  # LPIPS: 81 rows a strip (its halo: 179), SSIM: 396 of 480
    assert strips < SSIM_BYTES_PER_PIXEL * H * W
    for label, free in (("whole", None), ("strips", strips), ("host", 1)):
        monkeypatch.setattr(metrics, "_free_bytes", lambda device, limit, _free=free: _free)
        calls.clear()
        with torch.no_grad():
            results[label], _ = metrics.image_metrics(model, outputs, batch)
        results[label]["calls"] = sorted(set(calls))
        results[label]["places"] = dict(model.metric_places)
    for label in ("whole", "strips", "host"):  # the place the report gives is the path taken
        assert results[label]["places"] == {"ssim": label, "lpips": label}, (label, results[label]["places"])
    assert results["whole"]["calls"] == [] and results["host"]["calls"] == []
    assert results["strips"]["calls"] == ["lpips_in_row_strips", "ssim_in_row_strips"]
    for key in ("psnr", "ssim", "lpips"):
        assert results["whole"][key] is not None and results["whole"][key] > 0
        for label in ("strips", "host"):
            assert results[label][key] == pytest.approx(results["whole"][key], rel=1e-5), (label, key)


def test_ns_eval_reports_where_its_metrics_ran_and_says_so_when_not_whole(trained, stand_in_lpips, monkeypatch, capsys):
    """ns-eval's JSON counts, per metric, the images whose SSIM / LPIPS ran whole, in strips or on the host
    (each image's record says which), its averages ignore that record, and the console names every metric
    that did not run whole, with the limit it kept to; nothing is said when all ran whole."""
    from ns_splat_plus.model import metrics

    pipeline = trained.pipeline
    monkeypatch.setattr(pipeline.model, "lpips", stand_in_lpips)
    monkeypatch.setattr(pipeline, "run_info", {"train_peak_memory_bytes": 3 * 2**20}, raising=False)
    num_images = len(pipeline.datamanager.eval_dataset)
    assert num_images >= 2
    printed = {}
    answers = {"whole": None, "strips": metrics.MIN_STRIP_ROWS, "host": 0}  # device_rows' three kinds of answer
    for label, rows in answers.items():
        # the test images (36 rows) are smaller than a strip: the planner's answer is set, not derived
        monkeypatch.setattr(metrics, "device_rows", lambda *args, _rows=rows: _rows)
        capsys.readouterr()
        results = pipeline.get_average_eval_image_metrics(get_std=True)  # as ns-eval calls it
        printed[label] = capsys.readouterr().out
        assert results["metrics_computed_on"] == {"ssim": {label: num_images}, "lpips": {label: num_images}}, label
        assert all(m["computed_on"] == {"ssim": label, "lpips": label} for m in results["per_image"])
        assert "computed_on" not in results and isinstance(results["psnr"], float)
    assert "in row strips" not in printed["whole"] and "on the host" not in printed["whole"]
    of = f"for {num_images} of {num_images} images (within the training peak, 3.0 MiB)"
    assert f"SSIM and LPIPS in row strips on the GPU {of}" in " ".join(printed["strips"].split()), printed
    assert f"SSIM and LPIPS on the host {of}" in " ".join(printed["host"].split()), printed
    counts = {"ssim": {"whole": 2, "strips": 1}, "lpips": {"host": 3}}
    summary = evaluation.places_summary(counts, 3, None)
    assert summary == "SSIM in row strips on the GPU for 1 of 3 images, LPIPS on the host for 3 of 3 images"


def test_ns_eval_holds_its_metrics_to_the_training_peak_of_the_checkpoint_not_of_its_own_load(trained, monkeypatch):
    """The limit SSIM and LPIPS are held to (strips or the host above it) is the training peak: under
    ns-eval the checkpoint's, not the peak of this process, which has only loaded the model (a few MiB:
    with it, every metric of a large image went to the host). In a training process, its own peak; after a
    resume, the larger of the two. ns-eval's JSON records the limit used."""
    pipeline = trained.pipeline
    tracker = evaluation.memory_tracker(pipeline.device)  # off the GPU it counts nothing: its peak is set here
    mib = 2**20
    cases = {  # (this process's training peak, the checkpoint's): the limit
        "ns-eval": ((1 * mib, 300 * mib), 300 * mib),
        "in training": ((200 * mib, None), 200 * mib),
        "resumed, above the checkpoint's": ((400 * mib, 300 * mib), 400 * mib),
        "nothing known": ((None, None), None),
    }
    for label, ((own, saved), limit) in cases.items():
        monkeypatch.setattr(tracker, "train_peak_bytes", own)
        monkeypatch.setattr(pipeline, "run_info", {"train_peak_memory_bytes": saved} if saved else {}, raising=False)
        results = pipeline.get_average_eval_image_metrics()  # as ns-eval calls it
        assert results["memory"]["metrics_limit_bytes"] == limit, label
        assert pipeline.model.eval_memory_limit_bytes == limit, label  # what image_metrics reads


def test_lpips_is_built_at_the_first_evaluation_not_at_start_up(tmp_path, monkeypatch):
    """Set-up and training never build LPIPS (nor try AlexNet's download: offline, every rank waited for it
    to fail before step 0); the first evaluation that scores images builds it, once."""
    from ns_splat_plus import upstream

    built = []
    real = upstream.build_lpips
    monkeypatch.setattr(upstream, "build_lpips", lambda warn=True: built.append(warn) or real(warn=warn))
    scene = small_scene(tmp_path / "scene")
    config = trainer_config(scene, tmp_path / "out", steps=3)
    config.warmup_steps = 0
    trainer = build_trainer(config)
    trainer.train()
    close_writers()
    assert built == [], "LPIPS was built before any evaluation"
    assert not any(k.startswith("lpips.") for k in trainer.pipeline.model.state_dict()), (
        "LPIPS weights would be written into checkpoints"
    )
    evaluation.evaluate_all_images(trainer.pipeline)
    evaluation.evaluate_all_images(trainer.pipeline)
    assert built == [False], built


def test_training_is_bitwise_the_same_whether_or_not_lpips_can_be_built(tmp_path, monkeypatch):
    """LPIPS is built at the first evaluation, mid-run: building it (AlexNet's initial draws) must not move
    the training's random stream (the random background draws from it every step). 20 steps with a refine
    and an all-images evaluation at step 10, once without AlexNet's weights and once with stand-in weights."""
    import torchvision

    from ns_splat_plus import upstream

    scene = small_scene(tmp_path / "scene")
    finals = {}
    for label in ("without weights", "with weights"):
        monkeypatch.setenv("TORCH_HOME", str(tmp_path / f"torch-home-{label.replace(' ', '-')}"))
        if label == "with weights":
            path = upstream.alexnet_weights_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
        config = trainer_config(scene, tmp_path / label.replace(" ", "-"), steps=20)
        config.steps_per_eval_all_images = 10
        config.warmup_steps = 0  # warmup is tested elsewhere; saves time here
        trainer = build_trainer(config)
        trainer.train()
        close_writers()
        model = trainer.pipeline.model
        assert (model.lpips is not None) == (label == "with weights"), label
        finals[label] = {k: v.detach().clone() for k, v in model.gauss_params.items()}
    a, b = finals.values()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "LPIPS moved the training's randomness"


def test_lpips_runs_without_cudnn_benchmark_and_keeps_the_users_other_cudnn_settings(
    trained, stand_in_lpips, monkeypatch
):
    """ns-train turns cudnn.benchmark on, whose search at a full-size AlexNet input can take gigabytes of
    workspace: LPIPS runs with it off, and leaves TF32 and determinism as the user set them."""
    from ns_splat_plus.model import metrics

    model = trained.pipeline.model
    seen = []

    class Recording(torch.nn.Module):
        def forward(self, a, b):
            seen.append((torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic))
            return stand_in_lpips(a, b)

    monkeypatch.setattr(model, "lpips", Recording())
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    a, b = _image_pair(48, 64)
    outputs = {"rgb": a[0].permute(1, 2, 0).contiguous(), "background": torch.zeros(3)}
    with torch.no_grad():
        metrics.image_metrics(model, outputs, {"image": b[0].permute(1, 2, 0).contiguous()})
    assert seen == [(False, True)]
    assert torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic  # restored


def test_ns_eval_says_when_the_checkpoint_is_of_a_run_that_stopped_early(trained, monkeypatch, capsys):
    """A fresh-eyes trial: ns-eval of a run stopped at step 140 of 3000 printed its PSNR like a finished run's."""
    pipeline = trained.pipeline
    for (step, last), said in (((140, 3000), True), ((29, 30), False)):
        monkeypatch.setattr(pipeline, "run_info", {"max_num_iterations": last}, raising=False)
        monkeypatch.setattr(pipeline, "loaded_step", step, raising=False)
        capsys.readouterr()
        pipeline.get_average_eval_image_metrics()  # as ns-eval calls it
        printed = " ".join(capsys.readouterr().out.split())
        line = f"The checkpoint is of step {step} of a run of {last} steps: it stopped early"
        assert (line in printed) == said, printed[-1500:]
