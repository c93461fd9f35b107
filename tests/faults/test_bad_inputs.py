"""The bad-input trial: every mistake a new user can make ends in one clear message naming the
file, photo, option or checkpoint, a non-zero exit, no traceback, and nothing lost.

Most cases run the real ns-train / ns-eval / ns-export on one tiny synthetic scene (shared);
cases that fail in the dataset preflight without any process-level effect are checked in-process.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest
import torch
import yaml
from clirun import (
    SPARSE,
    TINY_SCENE,
    assert_ok,
    assert_one_message,
    checkpoints,
    cli_env,
    console_script,
    copy_scene,
    ns_eval,
    ns_train,
    ns_train_cmd,
    run,
    run_dir,
)  # fmt: skip
from inprocess import run_config, train
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

from splatbench.scenes import make_scene


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)


@pytest.fixture(scope="module")
def trained(scene, tmp_path_factory) -> Path:
    """One finished run (3 steps, one checkpoint per step kept), shared by the resume and eval tests; trained
    in this process (they read it through the CLI: ns-train's refusals, ns-eval, ns-export)."""
    config = run_config(scene, tmp_path_factory.mktemp("trained"), "base", 3)
    config.steps_per_save = 1
    config.save_only_latest_checkpoint = False
    return train(config).base_dir


# --- 1. options that cannot work -------------------------------------------------------------------


@pytest.mark.slow
def test_impossible_options_are_refused_at_launch(scene, tmp_path):
    # two through the CLI (a process start costs ~20 s here); every option in-process below
    proc = ns_train(scene, tmp_path, "zero_steps", 5, "--max-num-iterations", "0")  # the later one wins
    assert_one_message(proc, "--max-num-iterations must be at least 1", status=2)
    assert not (tmp_path / "zero_steps").exists(), "a run directory was left behind"
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    proc = run(ns_train_cmd(scene, a_file, "file_out", 5))
    assert_one_message(proc, f"--output-dir {a_file} is a file", status=2)
    assert a_file.read_text() == "not a directory"


def test_impossible_options_each_name_the_option(tmp_path):
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.method import splat_plus_trainer_config
    from ns_splat_plus.training import inputs

    def config(**changes):
        config = splat_plus_trainer_config("splat-plus", strategy="default")
        config.machine.device_type = "cpu"
        for path, value in changes.items():
            target = config
            *parents, name = path.split("__")
            for parent in parents:
                target = getattr(target, parent)
            setattr(target, name, value)
        return config

    inputs.check_options(config())  # the defaults pass
    for degree in (0, 4):  # colour only, and the highest degree gsplat renders
        inputs.check_options(config(pipeline__model__sh_degree=degree))
    cases = [
        ({"max_num_iterations": 0}, "--max-num-iterations"),
        ({"max_num_iterations": -5}, "--max-num-iterations"),
        ({"pipeline__model__refine_every": 0}, "--pipeline.model.refine-every"),
        ({"warmup_steps": -1}, "--warmup-steps"),
        ({"logging__steps_per_log": 0}, "--logging.steps-per-log must be a positive number of steps, got 0"),
        ({"load_step": 299}, "--load-step 299 needs --load-dir"),  # nerfstudio trained from scratch
        (
            {"load_step": 299, "load_checkpoint": Path("step-299.ckpt")},
            "--load-step 299 does not apply to --load-check",
        ),
        (  # nerfstudio resumed from --load-dir's newest checkpoint, without a word about the file named
            {"load_dir": Path("run/nerfstudio_models"), "load_checkpoint": Path("other/step-299.ckpt")},
            "--load-dir run/nerfstudio_models and --load-checkpoint other/step-299.ckpt both name what to resume",
        ),
        ({"pipeline__model__sh_degree": -1}, r"--pipeline.model.sh-degree must be an integer in \[0, 4\], got -1"),
        ({"pipeline__model__sh_degree": 5}, r"--pipeline.model.sh-degree must be an integer in \[0, 4\], got 5"),
        ({"pipeline__model__resolution_schedule": 0}, "--pipeline.model.resolution-schedule must be an integer >= 1"),
        ({"pipeline__model__num_downscales": -1}, "--pipeline.model.num-downscales must be an integer >= 0"),
        ({"pipeline__model__ssim_lambda": 2.0}, r"--pipeline.model.ssim-lambda must be a number in \[0, 1\], got 2.0"),
        ({"pipeline__model__ssim_lambda": -0.5}, r"--pipeline.model.ssim-lambda must be a number in \[0, 1\]"),
        ({"pipeline__model__rasterizer": "gsplat"}, "--pipeline.model.rasterizer gsplat needs CUDA"),
    ]
    for changes, needle in cases:
        with pytest.raises(UserInputError, match=needle) as info:
            inputs.check_options(config(**changes))
        assert info.value.exit_status == 2


# --- 2. two runs with the same name --------------------------------------------------------------


@pytest.mark.slow
def test_same_explicit_timestamp_is_refused_and_keeps_the_first_run(trained, scene):
    out = trained.parent.parent.parent
    before = {p.name: p.read_bytes() for p in checkpoints(trained)}
    config_before = (trained / "config.yml").read_bytes()
    assert before
    proc = ns_train(scene, out, "base", 3, "--steps-per-save", "1")
    assert_one_message(proc, f"the run directory {trained} already exists", "--timestamp", status=2)
    assert {p.name: p.read_bytes() for p in checkpoints(trained)} == before
    assert (trained / "config.yml").read_bytes() == config_before


def test_automatic_timestamp_claimed_twice_gives_two_directories(tmp_path):
    from ns_splat_plus.method import splat_plus_trainer_config
    from ns_splat_plus.training import run_dir as run_dir_mod

    configs = []
    for _ in range(2):
        config = splat_plus_trainer_config("splat-plus", strategy="default")
        config.output_dir = tmp_path
        config.experiment_name = "same"
        config.timestamp = "2030-01-01_000000"  # what set_timestamp gives two runs started in one second
        configs.append(config)
    first = run_dir_mod.claim(configs[0], explicit_timestamp=False)
    second = run_dir_mod.claim(configs[1], explicit_timestamp=False)
    assert first == "2030-01-01_000000" and second == "2030-01-01_000000-1"
    assert configs[0].get_base_dir() != configs[1].get_base_dir()
    assert configs[0].get_base_dir().is_dir() and configs[1].get_base_dir().is_dir()


# --- 3. SIGTERM / SIGINT save a checkpoint, and the run resumes from it ---------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])  # both: each has its own default action
def test_signal_saves_a_checkpoint_and_resume_continues(scene, tmp_path, sig):
    name = sig.name.lower()
    # a checkpoint every 2 steps tells us the loop (and its signal handlers) runs
    proc = subprocess.Popen(
        ns_train_cmd(scene, tmp_path, name, 100000, "--steps-per-save", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
    )
    run = run_dir(tmp_path, name)
    deadline = time.time() + 240
    while not checkpoints(run) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output[-3000:]
    assert "Traceback" not in output, output[-5000:]
    lines = [line for line in output.splitlines() if "training stopped by" in line]
    assert len(lines) == 1 and sig.name in lines[0] and "checkpoint saved" in lines[0], output[-3000:]
    saved = checkpoints(run)[-1]
    assert saved.name in output.replace("\n", "")
    assert (run / "training.png").is_file()  # the picture of the steps it trained
    state = torch.load(saved, map_location="cpu", weights_only=True)
    step = int(state["step"])
    assert saved.name == f"step-{step:09d}.ckpt"

    # the resume: the command the message prints, run as printed (it repeats the run's own command line, --timestamp
    # dropped and --load-dir added) with only --max-num-iterations lowered, so that it ends 3 steps later
    (hint,) = [line.split("resume with: ", 1)[1] for line in output.splitlines() if "resume with: " in line]
    printed = shlex.split(hint)  # one process: the command and nothing after it
    typed = ns_train_cmd(scene, tmp_path, name, 100000, "--steps-per-save", "2")
    expected = ["ns-train", "splat-plus", "--load-dir", str(run / "nerfstudio_models")]
    expected += [arg for arg in typed[2:] if arg not in ("--timestamp", "run")]
    assert printed[: len(expected)] == expected, hint
    printed[0] = typed[0]
    printed[printed.index("--max-num-iterations") + 1] = str(step + 3)
    resumed = subprocess.run(printed, capture_output=True, text=True, env=cli_env(), stdin=subprocess.DEVNULL)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "".join(f"Resumed from {saved}: step {step}".split()) in "".join(resumed.stdout.split())
    assert "other model options" not in resumed.stdout  # the printed command repeats the run's options
    (new_run,) = [path for path in run.parent.iterdir() if path.name != "run"]  # an automatic timestamp
    final = checkpoints(new_run)[-1]
    assert int(torch.load(final, map_location="cpu", weights_only=True)["step"]) == step + 2


# --- 3b. no --data --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dataparser", ["colmap", "nerfstudio-data"])
def test_a_command_without_data_says_no_dataset_was_given(tmp_path, dataparser):
    """Without --data, the parsers look in the current folder: the message was "no COLMAP model at
    colmap/sparse/0", naming a folder the user never typed."""
    cmd = ns_train_cmd(tmp_path, tmp_path / "out", "nodata", 3, dataparser=(dataparser,))
    del cmd[2:4]  # --data PATH
    proc = run(cmd, cwd=tmp_path)  # an empty folder: nothing to train there
    assert_one_message(proc, "no dataset given: pass --data PATH", status=2)
    assert str(tmp_path.resolve()) in proc.stderr and not (tmp_path / "out" / "nodata").exists()


def test_data_given_as_the_current_folder_is_checked_as_given(tmp_path, monkeypatch):
    """`--data .` is a real choice: an empty folder names what is missing there, as any --data does; a scene
    in the current folder trains without --data (the dataparser's default)."""
    from ns_splat_plus.errors import UserInputError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError, match="no COLMAP model at colmap/sparse/0"):
        _preflight(Path("."))
    with pytest.raises(UserInputError, match="no dataset given"):
        _preflight(None)
    make_scene(tmp_path, TINY_SCENE)
    _preflight(None)


def test_colmap_pointed_at_poses_or_at_a_photo_folder_names_the_right_command(tmp_path):
    """A fresh-eyes trial: `colmap` on a folder of transforms.json poses, or --data at a scene's images/,
    was told to run COLMAP; the fix is another dataparser, or the scene's folder."""
    from ns_splat_plus.errors import UserInputError

    poses = tmp_path / "poses"
    poses.mkdir()
    (poses / "transforms.json").write_text("{}")
    with pytest.raises(UserInputError, match="no COLMAP model") as told:
        _preflight(poses)
    assert "`nerfstudio-data`" in str(told.value) and "ns-process-data" not in str(told.value)
    scene = make_scene(tmp_path / "scene", TINY_SCENE)
    with pytest.raises(UserInputError, match="no COLMAP model") as told:
        _preflight(scene / "images")
    assert f"pass --data {scene}" in str(told.value) and "ns-process-data" not in str(told.value)
    # --data at the COLMAP model itself, or at a photo: the scene's folder (the trial was told to make a model in there)
    model = scene / "colmap" / "sparse" / "0"
    with pytest.raises(UserInputError, match="no COLMAP model") as told:
        _preflight(model)
    assert f"--data {model} is a COLMAP model folder: pass the scene's folder, --data {scene}" in str(told.value)
    assert "ns-process-data" not in str(told.value) and "--colmap-path" not in str(told.value)  # found by itself
    moved = copy_scene(scene, tmp_path / "moved")
    (moved / "colmap").rename(moved / "model")
    with pytest.raises(UserInputError, match="no COLMAP model") as told:
        _preflight(moved / "model" / "sparse" / "0")
    assert f"--data {moved} (with `colmap --colmap-path model/sparse/0`)" in str(told.value)
    photo = next((scene / "images").iterdir())
    with pytest.raises(UserInputError) as told:
        _preflight(photo)
    assert f"--data {photo} is a file: pass the scene's folder, --data {scene}" in str(told.value)
    # --colmap-path at the wrong place of a scene whose model is where the parser looks: no --colmap-path to "point"
    with pytest.raises(UserInputError, match="but .* holds one") as told:
        _preflight(scene, colmap_path=Path("sparse/0"))
    assert "point --colmap-path" not in str(
        told.value
    ) and f"train with it: ns-train splat-plus --data {scene} colmap" in str(told.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserInputError, match="ns-process-data images"):  # nothing else there: run COLMAP
        _preflight(empty)


# --- 4-6. COLMAP layouts --------------------------------------------------------------------------


@pytest.mark.slow
def test_colmap_scene_without_the_colmap_subcommand(scene, tmp_path):
    proc = ns_train(scene, tmp_path, "nosub", 3, dataparser=())
    assert_one_message(proc, "add the `colmap` subcommand", status=2)


@pytest.mark.slow
def test_random_init_trains_without_points3d(scene, tmp_path):
    """In this process: the start-up checks (inputs.preflight, in the trainer's set-up) and training;
    the message that names --pipeline.model.random-init True comes through ns-train in tests/cli/test_cli.py."""
    data = copy_scene(scene, tmp_path / "nopoints")
    (data / SPARSE / "points3D.txt").unlink()
    config = run_config(data, tmp_path, "random", 2)
    config.pipeline.model.random_init = True
    train(config)
    assert checkpoints(run_dir(tmp_path, "random"))


def _only_images_2(scene: Path, dest: Path) -> Path:
    """The scene with its photos in images_2/ only, and a COLMAP model of twice their size."""
    data = copy_scene(scene, dest)
    (data / "images").rename(data / "images_2")
    cameras = data / SPARSE / "cameras.txt"
    cam_id, model, w, h, *params = cameras.read_text().split()
    params = [str(2 * float(p)) for p in params]  # fx fy cx cy of a PINHOLE camera
    cameras.write_text(" ".join([cam_id, model, str(2 * int(w)), str(2 * int(h)), *params]) + "\n")
    return data


@pytest.mark.slow
def test_only_downscaled_images(scene, tmp_path):
    data = _only_images_2(scene, tmp_path / "half")
    # what works trains (in this process: `colmap --downscale-factor 2` is the dataparser's option); what does
    # not is refused by ns-train with the option to pass, and without nerfstudio's prompt
    config = run_config(data, tmp_path, "half", 2)
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(downscale_factor=2)
    train(config)
    assert checkpoints(run_dir(tmp_path, "half"))
    assert_one_message(ns_train(data, tmp_path, "nofactor", 2), "`colmap --downscale-factor 2`", status=2)
    proc = ns_train(data, tmp_path, "four", 2, dataparser=("colmap", "--downscale-factor", "4"))
    output = assert_one_message(proc, "--downscale-factor 4 needs", "images_4", status=2)
    assert "[y/n]" not in output  # nerfstudio's Confirm.ask prompt


# --- 7-8. resume on another strategy; a learning rate that diverges -----------------------------


@pytest.mark.slow
def test_a_resume_that_has_no_steps_left_quotes_the_max_num_iterations_to_type(scene, tmp_path):
    """A scaled schedule (--steps-scaler here; splat-plus-lite's preset 1/3 alike): the refusal quoted the scaled
    count as "--max-num-iterations 3" to a user who typed 6. 6 x 1/2 = 3 steps end at step 2; one more step
    needs 4 steps, which 7 x 1/2 rounds up to."""
    scaled = ("--steps-scaler", "0.5")
    assert_ok(ns_train(scene, tmp_path, "half", 6, *scaled))
    load_dir = run_dir(tmp_path, "half") / "nerfstudio_models"
    proc = ns_train(scene, tmp_path, "again", 6, *scaled, "--load-dir", str(load_dir))
    assert_one_message(
        proc,
        "it is at step 2, which already completes the run's 3 steps (--max-num-iterations x 1/2: --steps-scaler 0.5)",
        "pass --max-num-iterations 7 or more to train further",
        status=2,
    )
    assert_ok(ns_train(scene, tmp_path, "longer", 7, *scaled, "--load-dir", str(load_dir)))


@pytest.mark.slow
def test_resume_on_another_strategy_is_refused(trained, scene, tmp_path):
    proc = ns_train(
        scene,
        tmp_path,
        "mcmc",
        10,
        "--load-dir",
        str(trained / "nerfstudio_models"),
        "--pipeline.model.strategy",
        "mcmc",
    )
    assert_one_message(proc, "--pipeline.model.strategy")


@pytest.mark.slow
def test_a_load_step_that_was_not_saved_names_the_saved_steps_and_leaves_no_run_directory(trained, scene, tmp_path):
    from ns_splat_plus.training.checkpoint import checkpoint_steps

    models = trained / "nerfstudio_models"
    proc = ns_train(scene, tmp_path, "nostep", 10, "--load-dir", str(models), "--load-step", "7")
    assert 7 not in checkpoint_steps(models)
    assert_one_message(proc, f"pick one of the saved steps {checkpoint_steps(models)}", status=2)
    assert not run_dir(tmp_path, "nostep").exists(), "a run directory was left behind"


@pytest.mark.slow
def test_diverging_learning_rate_names_the_step(scene, tmp_path):
    proc = ns_train(scene, tmp_path, "lr", 20, "--optimizers.means.optimizer.lr", "1e10")
    output = assert_one_message(proc, "Training stopped at step")
    assert "does not require grad" not in output


# --- 9. damaged COLMAP model files ----------------------------------------------------------------


def _binary_scene(scene: Path, dest: Path) -> Path:
    from nerfstudio.data.utils import colmap_parsing_utils as cu

    data = copy_scene(scene, dest)
    sparse = data / SPARSE
    cu.write_model(*cu.read_model(str(sparse), ".txt"), str(sparse), ".bin")
    for name in ("cameras.txt", "images.txt", "points3D.txt"):
        (sparse / name).unlink()
    return data


def _preflight(data: Optional[Path], **parser_options):
    from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig

    from ns_splat_plus.method import splat_plus_trainer_config
    from ns_splat_plus.training import inputs

    config = splat_plus_trainer_config("splat-plus", strategy="default")
    config.pipeline.datamanager.data = data
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(**parser_options)
    inputs.preflight(config)


def _edit_line(path: Path, index: int, edit) -> None:
    # the synthetic images.txt has an empty 2D-points line after each pose line: kept
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    lines[index] = edit(lines[index].split())
    path.write_text("".join(line + "\n\n" for line in lines))


@pytest.mark.slow
def test_damaged_colmap_files_through_the_cli(scene, tmp_path):
    data = _binary_scene(scene, tmp_path / "bin")  # a clean .bin scene passes: test_damaged_colmap_files_are_named
    (data / SPARSE / "cameras.bin").write_bytes(b"")
    proc = ns_train(data, tmp_path, "bin_empty", 1)
    assert_one_message(proc, f"{data / SPARSE / 'cameras.bin'} is empty", status=2)
    full = copy_scene(scene, tmp_path / "full")
    _camera_model(full, "FULL_OPENCV", 12)
    proc = ns_train(full, tmp_path, "full_opencv", 1)
    assert_one_message(proc, "is a FULL_OPENCV camera, which nerfstudio's COLMAP reader does not read", status=2)
    assert not (tmp_path / "full_opencv").exists()  # no run directory left behind


def test_damaged_colmap_files_are_named(scene, tmp_path):
    from ns_splat_plus.errors import UserInputError

    clean = _binary_scene(scene, tmp_path / "clean")
    _preflight(clean)  # passes
    for i, name in enumerate(("cameras.bin", "images.bin", "points3D.bin")):
        for how in ("empty", "truncated"):
            data = copy_scene(clean, tmp_path / f"{how}{i}")
            path = data / SPARSE / name
            path.write_bytes(b"" if how == "empty" else path.read_bytes()[: path.stat().st_size // 2])
            with pytest.raises(UserInputError, match=f"COLMAP .* file {path}"):
                _preflight(data)

    focal = copy_scene(scene, tmp_path / "focal")
    _edit_line(focal / SPARSE / "cameras.txt", 0, lambda f: " ".join(f[:4] + ["0", "-3"] + f[6:]))
    with pytest.raises(UserInputError, match="camera 1 .* focal length"):
        _preflight(focal)

    dup = copy_scene(scene, tmp_path / "dup")
    images = dup / SPARSE / "images.txt"
    # give the second photo the name of the first
    _edit_line(images, 1, lambda f: " ".join(f[:-1] + ["frame_0000.png"]))
    with pytest.raises(UserInputError, match="frame_0000.png 2 times"):
        _preflight(dup)

    nan = copy_scene(scene, tmp_path / "nan")
    _edit_line(nan / SPARSE / "images.txt", 2, lambda f: " ".join(f[:5] + ["nan"] + f[6:]))
    with pytest.raises(UserInputError, match="photo frame_0002.png .* invalid pose"):
        _preflight(nan)


def _camera_model(data: Path, model: str, count: int) -> None:
    """The first camera of cameras.txt as a ``model`` camera of ``count`` parameters (its fx, fy, cx, cy, then 0s)."""
    _edit_line(
        data / SPARSE / "cameras.txt", 0, lambda f: " ".join([f[0], model, *f[2:4], *(f[4:] + ["0"] * 12)[:count]])
    )


@pytest.mark.parametrize(
    "model,count,needle",
    [
        ("FULL_OPENCV", 12, "is a FULL_OPENCV camera, which nerfstudio's COLMAP reader does not read"),
        ("FOV", 5, "is a FOV camera"),
        ("THIN_PRISM_FISHEYE", 12, "is a THIN_PRISM_FISHEYE camera"),
        ("PINHOLE", 3, r"\(PINHOLE\) has 3 parameters, where a PINHOLE camera has 4"),
        ("OPENCV", 8, None),  # read by nerfstudio: passes
        ("SIMPLE_RADIAL_FISHEYE", 4, None),
    ],
)
def test_camera_models_nerfstudio_cannot_read_are_named(scene, tmp_path, model, count, needle):
    """nerfstudio's parser raised NotImplementedError (FULL_OPENCV, FOV, THIN_PRISM_FISHEYE) or an IndexError (too
    few parameters) with a traceback, and left the run directory behind (a fresh-eyes trial)."""
    from ns_splat_plus.errors import UserInputError

    data = copy_scene(scene, tmp_path / model)
    _camera_model(data, model, count)
    if needle is None:
        _preflight(data)
        return
    with pytest.raises(UserInputError, match=f"camera 1 in {data / SPARSE / 'cameras.txt'} " + needle):
        _preflight(data)


# --- 10. photos -----------------------------------------------------------------------------------


def test_a_downscale_factor_below_1_is_refused_as_such(scene):
    """`colmap --downscale-factor 0` said "needs images_0, which has no images": the factor itself is the mistake."""
    from ns_splat_plus.errors import UserInputError

    _preflight(scene, downscale_factor=1)
    for factor in (0, -2):
        with pytest.raises(
            UserInputError, match=f"`colmap --downscale-factor {factor}`: the factor must be at least 1"
        ):
            _preflight(scene, downscale_factor=factor)


def test_bad_photos_are_named_before_training(scene, tmp_path):
    from PIL import Image

    from ns_splat_plus.errors import UserInputError

    _preflight(scene)
    cases = {
        "missing": (lambda p: p.unlink(), "is missing"),
        "empty": (lambda p: p.write_bytes(b""), "is empty"),
        "garbage": (lambda p: p.write_bytes(b"this is no image" * 10), "cannot be read as an image"),
        "size": (lambda p: Image.new("RGB", (30, 24)).save(p), "is 30x24, but camera 1"),
    }
    for name, (damage, needle) in cases.items():
        data = copy_scene(scene, tmp_path / name)
        photo = data / "images" / "frame_0003.png"
        damage(photo)
        with pytest.raises(UserInputError, match=f"photo {photo} {needle}"):
            _preflight(data)
    # with a downscale factor, the photo must be the camera's size divided by it
    half = _only_images_2(scene, tmp_path / "half")
    _preflight(half, downscale_factor=2)
    Image.new("RGB", (64, 48)).save(half / "images_2" / "frame_0005.png")
    with pytest.raises(UserInputError, match="frame_0005.png is 64x48, .*--downscale-factor 2 the photo must be 32x24"):
        _preflight(half, downscale_factor=2)


@pytest.mark.slow
def test_truncated_photo_is_named_when_decoded(scene, tmp_path):
    from PIL import Image

    data = copy_scene(scene, tmp_path / "trunc")
    photo = data / "images" / "frame_0001.jpg"
    # a JPEG whose header is intact but whose data is cut: only decoding sees it
    src = data / "images" / "frame_0001.png"
    Image.open(src).convert("RGB").save(photo, quality=95)
    src.unlink()
    images_txt = data / SPARSE / "images.txt"
    images_txt.write_text(images_txt.read_text().replace("frame_0001.png", "frame_0001.jpg"))
    data_bytes = photo.read_bytes()
    start_of_scan = data_bytes.index(b"\xff\xda")  # headers end here; cut inside the compressed data
    photo.write_bytes(data_bytes[: start_of_scan + (len(data_bytes) - start_of_scan) // 2])
    proc = ns_train(data, tmp_path, "trunc", 2)
    assert_one_message(proc, f"photo {photo} cannot be decoded", status=2)


# --- 11. ns-eval / ns-export on a run with missing, stray or truncated checkpoints --------------


def _copy_run(trained: Path, output_dir: Path, data: Optional[Path] = None) -> Path:
    """A copy of the run in another output dir (and with another dataset, if given): config.yml names both."""
    dest = output_dir / "base" / "splat-plus" / "run"
    shutil.copytree(trained, dest)
    cfg = dest / "config.yml"
    config = yaml.load(cfg.read_text(), Loader=yaml.Loader)
    config.output_dir = output_dir
    if data is not None:
        config.pipeline.datamanager.data = config.pipeline.datamanager.dataparser.data = data
    cfg.write_text(yaml.dump(config))
    return dest


@pytest.mark.slow
def test_eval_and_export_on_damaged_checkpoint_dirs(trained, tmp_path):
    import json

    def copy_run(name: str) -> Path:
        return _copy_run(trained, tmp_path / name)

    steps = checkpoints(trained)
    assert len(steps) >= 2  # the newest is used; an older one is left to fall back to

    deleted = copy_run("deleted")
    shutil.rmtree(deleted / "nerfstudio_models")
    proc = ns_eval(deleted / "config.yml", tmp_path / "deleted.json")
    assert_one_message(
        proc, f"splat-plus: Error: Checkpoint {deleted / 'nerfstudio_models'}", "no step-<N>.ckpt", status=2
    )
    assert not (tmp_path / "deleted.json").exists()

    stray = copy_run("stray")
    (stray / "nerfstudio_models" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    proc = ns_eval(stray / "config.yml", tmp_path / "stray.json")
    assert_ok(proc)
    result = json.loads((tmp_path / "stray.json").read_text())
    assert result["checkpoint"].endswith(steps[-1].name)
    assert "psnr" in result["results"]
    export = run(
        [
            console_script("ns-export"),
            "gaussian-splat",
            "--load-config",
            str(stray / "config.yml"),
            "--output-dir",
            str(tmp_path / "export"),
        ]
    )
    assert_ok(export)
    assert list((tmp_path / "export").glob("*.ply"))

    truncated = copy_run("truncated")
    newest = truncated / "nerfstudio_models" / steps[-1].name
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    proc = ns_eval(truncated / "config.yml", tmp_path / "truncated.json")
    assert_one_message(proc, f"Checkpoint {newest}", "truncated")
    assert not (tmp_path / "truncated.json").exists()


def _ns_export(kind: str, config_yml: Path, output_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return run(
        [console_script("ns-export"), kind, "--load-config", str(config_yml), "--output-dir", str(output_dir), *extra]
    )


@pytest.mark.slow
def test_export_and_viewer_of_a_run_without_checkpoints_is_one_message_with_exit_status_2(trained, tmp_path):
    # the CheckpointError reached Python bare: printed without "splat-plus: " and exit status 1
    copied = _copy_run(trained, tmp_path / "deleted")
    shutil.rmtree(copied / "nerfstudio_models")
    needles = (f"splat-plus: Error: Checkpoint {copied / 'nerfstudio_models'}", "no step-<N>.ckpt", "What to do:")
    assert_one_message(_ns_export("gaussian-splat", copied / "config.yml", tmp_path / "export"), *needles, status=2)
    viewer = [console_script("ns-viewer"), "--load-config", str(copied / "config.yml")]
    assert_one_message(run(viewer, timeout=120), *needles, status=2)


@pytest.mark.slow
@pytest.mark.parametrize("kind,reads", [("pointcloud", "along rays"), ("marching-cubes", "SDF field")])
def test_an_export_that_needs_a_nerf_says_so_and_names_gaussian_splat(trained, tmp_path, kind, reads):
    # each ended in a message blaming --load-config ("is not the config.yml of a training run")
    config_yml, export = trained / "config.yml", tmp_path / "export"
    proc = _ns_export(kind, config_yml, export)
    output = assert_one_message(
        proc,
        f"splat-plus: ns-export {kind} needs a NeRF-type model",
        reads,
        f"What to do: export the Gaussians as a PLY: ns-export gaussian-splat --load-config {config_yml} "
        f"--output-dir {export}",
        status=2,
    )
    assert "is not the config.yml" not in output and "Done loading checkpoint" not in output, output[-3000:]
    assert not export.exists(), "the --output-dir ns-export made is left, empty"


@pytest.mark.slow
def test_a_gaussian_splat_crop_that_holds_no_gaussian_is_one_message(trained, tmp_path):
    # nerfstudio's PLY writer raised a ValueError traceback ("... and not empty"), exit status 1
    crop = ["--obb-center", "100", "100", "100", "--obb-rotation", "0", "0", "0", "--obb-scale", "0.1", "0.1", "0.1"]
    proc = _ns_export("gaussian-splat", trained / "config.yml", tmp_path / "export", *crop)
    assert_one_message(
        proc,
        "splat-plus: ns-export gaussian-splat: the crop box --obb-center 100 100 100 --obb-rotation 0 0 0 "
        "--obb-scale 0.1 0.1 0.1 holds none of the run's Gaussians",
        "What to do: enlarge --obb-scale",
        status=2,
    )
    assert not (tmp_path / "export").exists(), "the --output-dir ns-export made is left, empty"


@pytest.mark.slow
def test_eval_names_a_colmap_file_damaged_since_training(trained, scene, tmp_path):
    # ns-eval parses the scene again, without ns-train's preflight
    data = _binary_scene(scene, tmp_path / "bin")
    points = data / SPARSE / "points3D.bin"
    points.write_bytes(points.read_bytes()[: points.stat().st_size // 2])
    run_copy = _copy_run(trained, tmp_path / "out", data=data)
    proc = ns_eval(run_copy / "config.yml", tmp_path / "damaged.json")
    # shown as ns-train shows it: a SplatPlusError reaching Python unhandled printed bare and exited 1
    assert_one_message(proc, f"splat-plus: the COLMAP points3D file {points}", "What to do: re-export", status=2)
    assert "cannot be read" in proc.stderr and not (tmp_path / "damaged.json").exists()


@pytest.mark.slow
def test_eval_names_a_photo_the_dataparser_opens_that_is_missing_since_training(trained, scene, tmp_path):
    """nerfstudio's colmap parser opens the first photo for its size: a missing one ended ns-eval in a
    FileNotFoundError traceback from PIL."""
    data = copy_scene(scene, tmp_path / "data")
    first = data / "images" / "frame_0000.png"
    first.unlink()
    run_copy = _copy_run(trained, tmp_path / "out", data=data)
    proc = ns_eval(run_copy / "config.yml", tmp_path / "metrics.json")
    assert_one_message(proc, f"splat-plus: photo {first} is missing", status=2)
    assert not (tmp_path / "metrics.json").exists()


# --- 12. ns-eval with no held-out image -----------------------------------------------------------


@pytest.mark.slow
def test_eval_with_an_empty_split(scene, tmp_path):
    # the run trains in this process (every photo in training: no eval image); ns-eval is the subject
    config = run_config(scene, tmp_path, "noeval", 1)
    config.pipeline.datamanager.dataparser = ColmapDataParserConfig(eval_mode="fraction", train_split_fraction=1.0)
    train(config)
    out_json = tmp_path / "noeval.json"
    proc = ns_eval(run_dir(tmp_path, "noeval") / "config.yml", out_json)
    assert_one_message(proc, "no images to evaluate", "eval_mode fraction", "train fraction 1.0", status=2)
    assert not out_json.exists()
