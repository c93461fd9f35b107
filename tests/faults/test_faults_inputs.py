"""Issue 33, bad inputs and faults: every case ends in one message naming the file, option or path and
what to do, exit status 2 (input and options) or 1 (other), no traceback, no file of an earlier run
changed; checks that can run before the work run before it.

CLI cases run the real ns-train / ns-eval / ns-export / ns-viewer on one tiny synthetic scene;
pure validation logic is checked in-process. A folder that cannot be written is a path under /sys
(sysfs refuses new files, also to root: EACCES/EPERM) for ns-train, and for ns-eval / ns-export a
read-only bind mount (EROFS) where this process may mount (root with CAP_SYS_ADMIN), else /sys too.
A full disk is ``NS_SPLAT_PLUS_MIN_FREE_BYTES`` (every free-space check asks for that much more),
and a really full tmpfs where mounting is allowed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from clirun import (
    SPARSE,
    TINY_SCENE,
    assert_ok,
    assert_one_message,
    checkpoints,
    console_script,
    copy_scene,
    nerfstudio_scene,
    ns_eval,
    ns_train,
    ns_train_cmd,
    run,
    run_dir,
    snapshot,
)
from inprocess import run_config, train

from splatbench.scenes import make_scene

STEPS = 2


def _sixteen_bit_grey(photo: Path, seed: int = 0) -> np.ndarray:
    """Rewrite ``photo`` as a 16-bit greyscale PNG (Pillow mode I;16) whose low bytes are noise; returns
    its pixels as they must reach training (8 bits, round(v / 257)). A low byte equal to the high one
    (v * 257) would read the same either way: the noise tells a right conversion from upstream's."""
    from PIL import Image

    grey = np.asarray(Image.open(photo).convert("L")).astype(np.uint16)
    noise = np.random.default_rng(seed).integers(0, 256, size=grey.shape, dtype=np.uint16)
    values = grey * 256 + noise
    Image.fromarray(values).save(photo)  # uint16 -> mode I;16
    with Image.open(photo) as written:
        assert written.mode == "I;16"
    return ((values.astype(np.int64) + 128) // 257).astype(np.uint8)


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)


@pytest.fixture(scope="module")
def sixteen_bit_scene(scene, tmp_path_factory):
    """The scene with frame_0000.png (the held-out photo of the interval split) a 16-bit greyscale PNG."""
    data = copy_scene(scene, tmp_path_factory.mktemp("g16") / "scene")
    expected = _sixteen_bit_grey(data / "images" / "frame_0000.png")
    return data, expected


@pytest.fixture(scope="module")
def trained(sixteen_bit_scene, tmp_path_factory) -> Path:
    """One finished run on the 16-bit scene: its run directory. Trained in this process (its set-up decodes
    the 16-bit held-out photo, as ns-train's does); the tests give it to ns-eval, ns-export, ns-viewer, ns-train."""
    data, _ = sixteen_bit_scene
    return train(run_config(data, tmp_path_factory.mktemp("trained"), "base", STEPS)).base_dir


@contextlib.contextmanager
def _mounted(*args: str) -> Iterator[bool]:
    """``mount args...`` for the block (True), or False where this process may not mount."""
    target = args[-1]
    if shutil.which("mount") is None or os.geteuid() != 0:
        yield False
        return
    if subprocess.run(["mount", *args], capture_output=True).returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", target], capture_output=True)


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory) -> Iterator[Path]:
    """An existing folder that cannot be written: a read-only bind mount (EROFS) where possible, else
    a folder that does not exist under /sys (EACCES/EPERM, also for root)."""
    base = tmp_path_factory.mktemp("ro")
    source, target = base / "source", base / "read_only"
    source.mkdir()
    target.mkdir()
    with _mounted("-o", "bind,ro", str(source), str(target)) as mounted:
        if mounted:
            try:
                (target / "probe").write_bytes(b"")
                mounted = False  # the mount did not make it read-only
            except OSError:
                pass
        yield target if mounted else Path("/sys/splat-plus-read-only")


def assert_nothing_under(path: Path) -> None:
    assert not path.exists() or not any(path.iterdir()), list(path.rglob("*"))


# --- 1. a COLMAP model with one registered photo -------------------------------------------------


def _keep_poses(images_txt: Path, count: int) -> None:
    lines = images_txt.read_text().splitlines()
    poses = [line for line in lines if line.strip() and not line.startswith("#")]
    images_txt.write_text("".join(line + "\n\n" for line in poses[:count]))


@pytest.mark.slow
def test_one_registered_photo_is_refused(scene, tmp_path):
    data = copy_scene(scene, tmp_path / "one")
    _keep_poses(data / SPARSE / "images.txt", 1)
    proc = ns_train(data, tmp_path / "out", "one", STEPS)
    assert_one_message(
        proc,
        f"{data / SPARSE / 'images.txt'} registers only one photo (frame_0000.png)",
        "at least 2 photos",
        "What to do: re-run COLMAP",
        status=2,
    )
    assert "ZeroDivisionError" not in proc.stdout + proc.stderr
    assert not run_dir(tmp_path / "out", "one").exists()


# --- 2. photos of two sizes, several cameras per step ------------------------------------------


def _two_sizes(scene: Path, dest: Path) -> Path:
    """The scene with its even-numbered photos at twice the size (their own COLMAP camera 2)."""
    from PIL import Image

    data = copy_scene(scene, dest)
    cam_id, model, w, h, *params = (data / SPARSE / "cameras.txt").read_text().split()
    double = [str(2 * float(p)) for p in params]
    (data / SPARSE / "cameras.txt").write_text(
        f"1 {model} {w} {h} {' '.join(params)}\n2 {model} {2 * int(w)} {2 * int(h)} {' '.join(double)}\n"
    )
    images_txt = data / SPARSE / "images.txt"
    lines = []
    for line in images_txt.read_text().splitlines():
        fields = line.split()
        if len(fields) == 10 and not line.startswith("#") and int(fields[9][6:10]) % 2 == 0:
            fields[8] = "2"
            photo = data / "images" / fields[9]
            Image.open(photo).resize((2 * int(w), 2 * int(h))).save(photo)
            line = " ".join(fields)
        lines.append(line)
    images_txt.write_text("\n".join(lines) + "\n")
    return data


@pytest.mark.slow
def test_photos_of_two_sizes_train_with_several_cameras_per_step(scene, tmp_path):
    from ns_splat_plus.parallel.sharding import cameras_for_step
    from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig

    # the run's 2 steps (8 iterations / 4 cameras per step): the 7 training photos are frames 1-7
    # (frame 0 is held out); the first step's first camera is alone of its size, the second has two
    seed = SplatPlusDataManagerConfig().train_cameras_sampling_seed
    same_size = []
    for step in range(2):
        frames = [i + 1 for i in cameras_for_step(step, 0, 1, 7, seed, 4)]
        same_size.append(sum(f % 2 == frames[0] % 2 for f in frames))
    assert 1 in same_size and max(same_size) > 1, f"pick other sizes: a lone camera is the case ({same_size})"

    data = _two_sizes(scene, tmp_path / "sizes")
    proc = ns_train(data, tmp_path, "sizes", 8, "--pipeline.datamanager.cameras-per-step", "4")
    assert_ok(proc)
    assert "permute(sparse_coo)" not in proc.stdout + proc.stderr
    assert checkpoints(run_dir(tmp_path, "sizes"))


# --- 6-8. a full disk, a read-only output folder: refused before any work -----------------------


@pytest.mark.slow
def test_full_disk_at_start_up_changes_no_earlier_run(trained, scene):
    out = trained.parent.parent.parent  # holds an earlier run
    before = snapshot(out)
    proc = run(ns_train_cmd(scene, out, "full", STEPS), NS_SPLAT_PLUS_MIN_FREE_BYTES=str(2**62))
    assert_one_message(proc, f"disk full: --output-dir {out}", "What to do: free disk space", status=1)
    assert "OSError" not in proc.stdout + proc.stderr
    assert snapshot(out) == before
    assert not (out / "full").exists()


@pytest.mark.slow
def test_really_full_disk_at_start_up(scene, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)) as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN); the test above simulates it")
        (disk / "earlier.txt").write_text("an earlier run's file")
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
            while True:  # until ENOSPC: a really full disk
                f.write(b"\0" * 4096)
                f.flush()
        before = snapshot(disk)
        proc = ns_train(scene, disk / "out", "full", STEPS)
        assert_one_message(proc, f"disk full: --output-dir {disk / 'out'}", "free disk space", status=1)
        assert snapshot(disk) == before


@pytest.mark.slow
def test_read_only_output_dir_of_ns_train(scene):
    # sysfs: no new file there (EACCES, also for root), and it reports 0 bytes free, as read-only
    # squashfs or ISO images do: the message must name the permission, not a full disk (the
    # read-only bind mount, EROFS, is the test below, where this process may mount)
    if not Path("/sys").is_dir():
        pytest.skip("no /sys (not Linux)")
    out = Path("/sys/splat-plus-read-only/out")
    proc = ns_train(scene, out, "ro", STEPS)
    assert_one_message(proc, f"--output-dir {out} cannot be written", "What to do: pass an --output-dir", status=2)
    assert "OSError" not in proc.stdout + proc.stderr
    assert not out.exists()


@pytest.mark.slow
def test_read_only_outputs_of_ns_eval_and_ns_export_are_checked_first(trained, read_only_dir, tmp_path):
    config_yml = trained / "config.yml"
    before = snapshot(trained)
    metrics = read_only_dir / "metrics.json"
    proc = ns_eval(config_yml, metrics)
    output = assert_one_message(proc, f"--output-path {metrics} cannot be written", "What to do", status=2)
    # refused before the checkpoint was loaded and the evaluation ran
    assert "Done loading checkpoint" not in output and "Evaluated" not in output, output[-3000:]

    export = read_only_dir / "export"
    proc = run(
        [console_script("ns-export"), "gaussian-splat", "--load-config", str(config_yml), "--output-dir", str(export)]
    )
    output = assert_one_message(proc, f"--output-dir {export} cannot be written", "What to do", status=2)
    assert "Done loading checkpoint" not in output, output[-3000:]
    assert not metrics.exists() and not export.exists()
    assert snapshot(trained) == before


@pytest.mark.slow
def test_an_ns_eval_output_path_that_is_not_a_json_file_is_refused_first(trained, tmp_path):
    # nerfstudio asserts the .json suffix only after the evaluation, and the assertion was blamed on --load-config
    config_yml = trained / "config.yml"
    before = snapshot(trained)
    text = tmp_path / "metrics.txt"
    proc = ns_eval(config_yml, text)
    output = assert_one_message(
        proc, f"--output-path {text} must be a .json file", f"pass --output-path {tmp_path / 'metrics.json'}", status=2
    )
    assert "Done loading checkpoint" not in output and "load-config" not in output, output[-3000:]
    folder = tmp_path / "d.json"
    folder.mkdir()
    proc = ns_eval(config_yml, folder)
    output = assert_one_message(proc, f"--output-path {folder} is a folder, not a .json file", "metrics.json", status=2)
    assert "Done loading checkpoint" not in output and "load-config" not in output, output[-3000:]
    assert not text.exists() and list(folder.iterdir()) == [] and snapshot(trained) == before


@pytest.mark.slow
def test_an_ns_eval_render_output_path_that_is_a_file_is_refused_first(trained, tmp_path):
    # nerfstudio makes the folder after loading the checkpoint: a FileExistsError traceback, exit status 1
    config_yml = trained / "config.yml"
    a_file = tmp_path / "renders.png"
    a_file.write_bytes(b"not a folder")
    proc = ns_eval(config_yml, tmp_path / "m.json", "--render-output-path", str(a_file))
    output = assert_one_message(
        proc, f"splat-plus: --render-output-path {a_file} is a file, not a folder", "What to do", status=2
    )
    assert "Done loading checkpoint" not in output, output[-3000:]
    assert a_file.read_bytes() == b"not a folder" and not (tmp_path / "m.json").exists()


# --- 9-12, 22. ns-eval / ns-viewer / ns-export / ns-train --load-config of a bad config.yml ---------


def _copy_run(trained: Path, dest: Path, **fields) -> Path:
    """A copy of the run under ``dest`` (config.yml names its own output dir), with ``fields`` changed."""
    import yaml

    run = dest / "base" / "splat-plus" / "run"
    shutil.copytree(trained, run)
    config = yaml.load((run / "config.yml").read_text(), Loader=yaml.Loader)
    config.output_dir = dest
    for name, value in fields.items():
        target = config
        *parents, last = name.split(".")
        for parent in parents:
            target = getattr(target, parent)
        setattr(target, last, value)
    (run / "config.yml").write_text(yaml.dump(config))
    return run


@pytest.mark.slow
def test_eval_of_a_run_whose_dataset_was_moved(trained, sixteen_bit_scene, tmp_path):
    data = copy_scene(sixteen_bit_scene[0], tmp_path / "dataset")
    run = _copy_run(trained, tmp_path / "out", **{"pipeline.datamanager.data": data})
    data.rename(tmp_path / "dataset_renamed")
    before = snapshot(run)
    proc = ns_eval(run / "config.yml", tmp_path / "metrics.json")
    assert_one_message(
        proc,
        f"the dataset of this run, {data}, does not exist",
        f"put the dataset back at {data}",
        "config.yml",
        status=2,
    )
    assert "AssertionError" not in proc.stdout + proc.stderr
    assert not (tmp_path / "metrics.json").exists()
    assert snapshot(run) == before


@pytest.mark.slow
def test_eval_of_a_copied_or_moved_run_loads_the_checkpoints_beside_its_config(trained, tmp_path):
    """config.yml names its run directory: a copy loaded the original's checkpoints without a word, and a moved
    run had "no checkpoint". Here the original's checkpoint is damaged: only the copy's evaluates."""
    original = _copy_run(trained, tmp_path / "out")
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(original, copy)  # config.yml unchanged: it still names `original`
    for ckpt in (original / "nerfstudio_models").glob("*.ckpt"):
        ckpt.write_bytes(ckpt.read_bytes()[:100])
    proc = ns_eval(copy / "config.yml", tmp_path / "metrics.json")
    assert_ok(proc)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert f"names its run directory {original}, not the folder it is in" in output, output[-3000:]
    assert f"loading the checkpoints beside it, in {copy / 'nerfstudio_models'}" in output
    assert "psnr" in json.loads((tmp_path / "metrics.json").read_text())["results"]
    shutil.rmtree(original)  # moved: nothing left where config.yml points
    assert_ok(ns_eval(copy / "config.yml", tmp_path / "moved.json"))
    in_place = _copy_run(trained, tmp_path / "in-place")  # where its config.yml says it is: not a word
    proc = ns_eval(in_place / "config.yml", tmp_path / "in-place.json")
    assert_ok(proc)
    assert "names its run directory" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_eval_from_another_folder_reads_a_relative_data_from_where_ns_train_ran(tmp_path):
    """config.yml keeps --data as typed (../scene), and nerfstudio read it from the folder ns-eval ran in: from another
    folder the dataset "did not exist", or the scene that lay at that relative path there was scored without a word.
    Here another scene lies there: ns-eval from that folder must score the run's own."""
    import dataclasses

    make_scene(tmp_path / "scene", TINY_SCENE)
    trained_in = tmp_path / "f1"
    trained_in.mkdir()
    assert_ok(run(ns_train_cmd(Path("../scene"), Path("rel_out"), "r", STEPS), cwd=trained_in))
    config_yml = trained_in / "rel_out" / "r" / "splat-plus" / "run" / "config.yml"
    proc = ns_eval(config_yml, tmp_path / "from_f1.json", cwd=trained_in)
    assert_ok(proc)
    assert "relative to where ns-train ran" not in proc.stdout + proc.stderr  # the same folder: not a word
    elsewhere = tmp_path / "f3" / "deep"
    elsewhere.mkdir(parents=True)
    make_scene(elsewhere.parent / "scene", dataclasses.replace(TINY_SCENE, seed=7))  # ../scene from there
    proc = ns_eval(Path("../../f1") / config_yml.relative_to(trained_in), tmp_path / "from_f3.json", cwd=elsewhere)
    assert_ok(proc)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert f"the run's --data ../scene is relative to where ns-train ran: reading {tmp_path / 'scene'}" in output, (
        output[-3000:]
    )
    assert "moved or copied" not in output  # its checkpoints are where its config.yml lies, as trained
    scores = [json.loads((tmp_path / name).read_text())["results"] for name in ("from_f1.json", "from_f3.json")]
    assert scores[0]["psnr"] == scores[1]["psnr"], scores


def _without_top_level(text: str, key: str) -> str:
    """A YAML document without its top-level ``key`` (the line and the indented block under it)."""
    lines, skipping = [], False
    for line in text.splitlines():
        if line.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and line.startswith((" ", "-")):
            continue
        skipping = False
        lines.append(line)
    return "\n".join(lines) + "\n"


def _bad_config(kind: str, trained: Path, folder: Path) -> Path:
    """A config.yml that cannot be used, of one ``kind``; written in ``folder``."""
    import yaml
    from nerfstudio.engine.trainer import TrainerConfig

    saved = (trained / "config.yml").read_text()
    path = folder / f"{kind}.yml"
    if kind == "missing":
        return path
    if kind == "no_pipeline":  # a trainer config of another kind, without a pipeline (case 11)
        text = _without_top_level(yaml.dump(TrainerConfig(method_name="splat-plus")), "pipeline")
    elif kind == "other_method":  # a run of a method that is not installed here
        text = yaml.dump(TrainerConfig(method_name="some-plugin-not-installed"))
    elif kind == "truncated":  # cut inside a class tag: not YAML any more
        cut = saved.index("!!python/object:ns_splat_plus.training.pipeline") + len("!!python/object:ns_splat_plus.tr")
        text = saved[:cut]
    elif kind == "foreign_class":  # a class of a package not installed here (another plugin, a renamed module)
        tag = "!!python/object:ns_splat_plus.parallel.config.DataParallelConfig"
        text = saved.replace(tag, "!!python/object:some_plugin_not_installed.config.DataParallelConfig")
    elif kind == "empty":
        text = ""
    elif kind == "sh_degree":
        text = saved.replace("    sh_degree: 3\n", "    sh_degree: three\n")
    elif kind == "max_num_iterations":
        text = saved.replace(f"\nmax_num_iterations: {STEPS}\n", "\nmax_num_iterations: forty\n")
    else:
        raise ValueError(kind)
    assert text != saved
    path.write_text(text)
    return path


LOAD_CONFIG_CASES = [
    # (entry point, kind of config.yml, what the message says)
    ("ns-eval", "missing", ["missing.yml does not exist", "What to do: pass --load-config"]),
    ("ns-eval", "no_pipeline", ["no_pipeline.yml is not the config.yml of a training run", "What to do"]),
    ("ns-eval", "sh_degree", ["pipeline.model.sh_degree is 'three', but it must be of type int", "What to do"]),
    ("ns-train", "max_num_iterations", ["max_num_iterations is 'forty', but it must be of type int", "What to do"]),
    ("ns-train", "empty", ["empty.yml is not the config.yml of a training run", "What to do"]),
    ("ns-viewer", "truncated", ["truncated.yml cannot be read as a config.yml", "What to do"]),
    ("ns-eval", "foreign_class", ["cannot find module 'some_plugin_not_installed.config'", "What to do: install"]),
    ("ns-export", "other_method", ["method 'some-plugin-not-installed', which is not installed", "What to do"]),
]


def _load_config_cmd(entry: str, config_yml: Path, out: Path):
    if entry == "ns-eval":
        return [console_script("ns-eval"), "--load-config", str(config_yml), "--output-path", str(out / "m.json")]
    if entry == "ns-train":
        return [console_script("ns-train"), "splat-plus", "--load-config", str(config_yml)]
    if entry == "ns-viewer":
        return [console_script("ns-viewer"), "--load-config", str(config_yml)]
    return [
        console_script("ns-export"), "gaussian-splat", "--load-config", str(config_yml), "--output-dir", str(out / "e")
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("entry,kind,needles", LOAD_CONFIG_CASES, ids=[f"{e}-{k}" for e, k, _ in LOAD_CONFIG_CASES])
def test_bad_load_config_is_one_message(trained, tmp_path, entry, kind, needles):
    config_yml = _bad_config(kind, trained, tmp_path)
    before = snapshot(trained)
    workdir = tmp_path / "cwd"  # where a relative output dir (outputs/) of a foreign config would land
    workdir.mkdir()
    proc = run(_load_config_cmd(entry, config_yml, tmp_path), cwd=workdir)
    assert_one_message(proc, str(config_yml), *needles, status=2)
    assert snapshot(trained) == before
    assert_nothing_under(workdir)
    assert not (tmp_path / "m.json").exists()
    assert not (tmp_path / "e").exists()  # ns-export makes its --output-dir before it reads the config: removed


def _raised_in(path: str, function: str, exc: BaseException, calls: str = "") -> BaseException:
    """``exc`` raised by a function ``function`` of a file named ``path`` (a stand-in for nerfstudio's), which
    first calls ``calls`` of the same file if given: the traceback :func:`uncaught.describe` reads."""
    source = f"def {function}():\n    {calls + '()' if calls else 'raise EXC'}\n"
    if calls:
        source += f"def {calls}():\n    raise EXC\n"
    scope = {"EXC": exc}
    exec(compile(source, path, "exec"), scope)
    try:
        scope[function]()
    except BaseException as raised:  # noqa: BLE001
        return raised
    raise AssertionError("it did not raise")


def test_an_error_after_the_config_loaded_is_not_blamed_on_the_config():
    """`ns-export cameras` ended in an AssertionError of nerfstudio's pose collection, after eval_setup had loaded
    the config, and the message said "--load-config ... is not the config.yml of a training run"."""
    from ns_splat_plus.training import uncaught

    argv = ["ns-export", "cameras", "--load-config", "run/config.yml", "--output-dir", "e"]
    loading = _raised_in("/site-packages/nerfstudio/utils/eval_utils.py", "eval_setup", AssertionError())
    described = uncaught.describe(loading, argv)
    assert described is not None and "is not the config.yml of a training run" in described[0]
    after = _raised_in("/site-packages/nerfstudio/scripts/exporter.py", "main", AssertionError(), calls="collect")
    assert uncaught.describe(after, argv) is None  # a bug: Python's traceback, not a message about the config
    training = _raised_in("/site-packages/nerfstudio/scripts/train.py", "train_loop", TypeError("x"))
    assert uncaught.describe(training, ["ns-train", "splat-plus", "--load-config", "c.yml"]) is None
    train_main = _raised_in("/site-packages/nerfstudio/scripts/train.py", "main", AttributeError("x"))
    assert uncaught.describe(train_main, ["ns-train", "splat-plus", "--load-config", "c.yml"]) is not None


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.9, 0.999])
def test_truncated_config_in_process(trained, tmp_path, capsys, fraction):
    """ns-eval's own loading (eval_setup) of config.yml cut at several places before its pipeline
    (YAML writes fields in alphabetical order): a message naming the file, never a traceback."""
    from nerfstudio.utils.eval_utils import eval_setup

    from ns_splat_plus.training import uncaught

    saved = (trained / "config.yml").read_text()
    cut = saved[: int(saved.index("\npipeline:") * fraction)]
    path = tmp_path / "cut.yml"
    path.write_text(cut)
    argv = ["ns-eval", "--load-config", str(path)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.argv", argv)
        with pytest.raises(BaseException) as info:
            eval_setup(path)
    if isinstance(info.value, SystemExit):  # our __setstate__: printed, exit status 2
        assert info.value.code == 2
        assert f"{path} is not a complete config.yml" in capsys.readouterr().err
    else:
        described = uncaught.describe(info.value, argv)
        assert described is not None, repr(info.value)
        assert str(path) in described[0] and described[1] == 2


@pytest.mark.slow
def test_wrong_type_in_saved_config_in_process(trained, tmp_path, capsys):
    import yaml

    saved = (trained / "config.yml").read_text()
    for field, value in (("steps_per_save", "'10'"), ("max_num_iterations", "forty"), ("steps_scaler", "half")):
        text = "\n".join(f"{field}: {value}" if line.startswith(f"{field}:") else line for line in saved.splitlines())
        assert text != saved
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.argv", ["ns-eval", "--load-config", "edited.yml"])
            with pytest.raises(SystemExit) as info:
                yaml.load(text, Loader=yaml.Loader)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"edited.yml: {field} is {yaml.safe_load(value)!r}" in err, err


# --- 15-16. cameras per step and the steps scaler -------------------------------------------------


@pytest.mark.slow
def test_more_cameras_per_step_than_photos(scene, tmp_path):
    proc = ns_train(scene, tmp_path, "many", STEPS, "--pipeline.datamanager.cameras-per-step", "100")
    assert_one_message(
        proc,
        "--pipeline.datamanager.cameras-per-step 100 asks for more distinct cameras per step than the 7 training photos",
        "What to do: pass --pipeline.datamanager.cameras-per-step 7 or less",
        status=2,
    )
    assert not run_dir(tmp_path, "many").exists()


@pytest.mark.parametrize(
    "typed, shown",
    [
        ([], "4 (splat-plus-fast's default) asks"),  # it named a 4 the user never typed
        (["--pipeline.datamanager.cameras-per-step", "auto"], "auto (4 here) asks"),
        (["--pipeline.datamanager.cameras-per-step", "4"], "4 asks"),
    ],
)
def test_too_many_cameras_per_step_is_named_as_it_came(monkeypatch, typed, shown):
    import sys
    from types import SimpleNamespace

    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training import inputs

    monkeypatch.setattr(sys, "argv", ["ns-train", "splat-plus-fast", *typed])
    datamanager = SimpleNamespace(cameras_per_step=4)  # as the launch leaves it: auto resolved
    config = SimpleNamespace(method_name="splat-plus-fast", pipeline=SimpleNamespace(datamanager=datamanager))
    with pytest.raises(UserInputError) as err:
        inputs.check_cameras_per_step_fits(config, 2, 1)
    assert f"--pipeline.datamanager.cameras-per-step {shown} for more distinct cameras" in str(err.value), err.value


def test_steps_scaler_that_leaves_no_schedule_is_refused():
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.method import splat_plus_lite_trainer_config, splat_plus_trainer_config
    from ns_splat_plus.training import inputs

    config = splat_plus_trainer_config("splat-plus", strategy="default")
    config.machine.device_type = "cpu"
    inputs.check_options(config)
    for scaler, needle in (
        (1e-9, "--steps-scaler 1e-09 turns the 30000-step schedule into"),
        (0.0, "--steps-scaler must be a positive number"),
        (-1.0, "--steps-scaler must be a positive number"),
        (math.nan, "--steps-scaler must be a positive number"),
        (math.inf, "--steps-scaler must be a positive number"),
    ):
        config.steps_scaler = scaler
        with pytest.raises(UserInputError, match=needle) as info:
            inputs.check_options(config)
        assert info.value.exit_status == 2
    # splat-plus-lite's preset 1/3 was not typed: the way out names --max-num-iterations too
    lite = splat_plus_lite_trainer_config()
    lite.max_num_iterations = 2
    with pytest.raises(
        UserInputError, match="pass --max-num-iterations 3 or more, or a --steps-scaler of at least 0.5"
    ):
        inputs.check_options(lite)


# --- 17. a 16-bit greyscale photo ---------------------------------------------------------------


@pytest.mark.slow
def test_sixteen_bit_photo_is_read_as_eight_bit(trained, sixteen_bit_scene, tmp_path):
    from PIL import Image

    _, expected = sixteen_bit_scene
    renders = tmp_path / "renders"
    proc = ns_eval(trained / "config.yml", tmp_path / "metrics.json", "--render-output-path", str(renders))
    assert_ok(proc)
    per_image = json.loads((tmp_path / "metrics.json").read_text())["results"]["per_image"]
    index = next(entry["index"] for entry in per_image if entry["image"].endswith("frame_0000.png"))
    # eval_img_<i>.png: the ground truth as evaluation saw it, beside the render
    shown = np.asarray(Image.open(renders / f"eval_img_{index:04d}.png").convert("RGB"))[:, : expected.shape[1]]
    diff = np.abs(shown.astype(int) - expected[:, :, None].astype(int))
    assert diff.max() <= 1, f"the 16-bit photo reached evaluation as other pixels (max difference {diff.max()})"


def test_photo_pixel_formats(tmp_path):
    from PIL import Image

    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training.images.photo import photo_pixels

    rgb = np.random.default_rng(1).integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    grey = np.asarray(Image.fromarray(rgb).convert("L"))

    def saved(image: Image.Image, name: str) -> Path:
        image.save(tmp_path / name)
        return tmp_path / name

    values16 = grey.astype(np.uint16) * 256 + 200
    assert np.array_equal(photo_pixels(saved(Image.fromarray(rgb), "rgb.png")), rgb)  # as upstream
    assert np.array_equal(photo_pixels(saved(Image.fromarray(grey), "grey.png")), np.repeat(grey[:, :, None], 3, 2))
    sixteen = photo_pixels(saved(Image.fromarray(values16), "g16.png"))
    assert sixteen.shape == (6, 8, 3)
    assert np.abs(sixteen[:, :, 0].astype(int) - (values16.astype(int) + 128) // 257).max() == 0
    as_int32 = photo_pixels(saved(Image.fromarray(values16.astype(np.int32)), "i32.tif"))  # mode I
    assert np.array_equal(as_int32, sixteen)
    palette = Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    assert np.array_equal(photo_pixels(saved(palette, "p.png")), np.asarray(palette.convert("RGB")))
    palette.info["transparency"] = 0
    assert photo_pixels(saved(palette, "pt.png")).shape == (6, 8, 4)
    bilevel = Image.fromarray(grey).convert("1")
    assert set(np.unique(photo_pixels(saved(bilevel, "b.png")))) <= {0, 255}
    cmyk = Image.fromarray(rgb).convert("CMYK")
    assert photo_pixels(saved(cmyk, "c.jpg")).shape == (6, 8, 3)
    assert photo_pixels(saved(Image.fromarray(rgb).convert("LA"), "la.png")).shape == (6, 8, 4)
    floating = saved(Image.fromarray(grey.astype(np.float32) / 255.0), "f.tif")
    with pytest.raises(UserInputError, match=f"photo {floating} is a floating-point image") as info:
        photo_pixels(floating)
    assert info.value.exit_status == 2


# --- 19. a NaN in one pose of a transforms.json ---------------------------------------------------


def _edit_frame(transforms: Path, index: int, edit) -> str:
    content = json.loads(transforms.read_text())
    edit(content["frames"][index])
    transforms.write_text(json.dumps(content))  # writes NaN and Infinity, which json.loads reads back
    return content["frames"][index]["file_path"]


@pytest.mark.slow
def test_nan_pose_in_transforms_json_names_the_frame(scene, tmp_path):
    data = nerfstudio_scene(scene, tmp_path / "ns")
    name = _edit_frame(data / "transforms.json", 3, lambda f: f["transform_matrix"][1].__setitem__(3, math.nan))
    proc = ns_train(data, tmp_path, "nan", STEPS, dataparser=("nerfstudio-data",))
    output = assert_one_message(
        proc,
        f"frame {name} in {data / 'transforms.json'} has a transform_matrix with 1 NaN or infinite entries",
        "What to do: fix that frame's transform_matrix",
        status=2,
    )
    assert "SfM points" not in output
    assert not run_dir(tmp_path, "nan").exists()


def test_bad_poses_in_transforms_json_in_process(scene, tmp_path):
    from nerfstudio.data.dataparsers.instant_ngp_dataparser import InstantNGPDataParserConfig
    from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.method import splat_plus_trainer_config
    from ns_splat_plus.training import inputs

    clean = nerfstudio_scene(scene, tmp_path / "clean")

    def preflight(data: Path, parser) -> None:
        config = splat_plus_trainer_config("splat-plus", strategy="default")
        config.pipeline.datamanager.data = data
        config.pipeline.datamanager.dataparser = parser
        inputs.preflight(config)

    for parser in (NerfstudioDataParserConfig, InstantNGPDataParserConfig):
        preflight(clean, parser())  # passes
    cases = [
        (
            lambda f: f["transform_matrix"][0].__setitem__(0, math.inf),
            "has a transform_matrix with 1 NaN or infinite entries",
        ),
        (lambda f: f.pop("transform_matrix"), "has no 4x4 transform_matrix"),
        (lambda f: f.__setitem__("transform_matrix", [[1, 0, 0], [0, 1, 0]]), "has no 4x4 transform_matrix"),
    ]
    for i, (edit, needle) in enumerate(cases):
        data = copy_scene(clean, tmp_path / f"bad{i}")
        name = _edit_frame(data / "transforms.json", 5, edit)
        for parser in (NerfstudioDataParserConfig(), InstantNGPDataParserConfig()):
            with pytest.raises(UserInputError, match=f"frame {name} in .*transforms.json {needle}") as info:
                preflight(data, parser)
            assert info.value.exit_status == 2


def test_ctrl_c_at_start_up_says_what_the_command_had_not_done_yet():
    """ns-eval and ns-export train nothing: "stopped ... before training" misdescribed them (a fresh-eyes trial)."""
    from ns_splat_plus.training import uncaught

    for prog, before in (("ns-train", "training or any output was saved"), ("ns-eval", "any output was saved")):
        message, status = uncaught.describe(KeyboardInterrupt(), [f"/venv/bin/{prog}", "x"])
        assert message == f"{prog}: stopped by Ctrl-C (SIGINT) before {before}" and status == 130
    message, _ = uncaught.describe(KeyboardInterrupt(), ["ns-export", "gaussian-splat"])
    assert "training" not in message


def test_an_empty_photo_folder_says_what_to_do(tmp_path):
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training import inputs

    (tmp_path / "images").mkdir()
    with pytest.raises(UserInputError, match="no images found in") as raised:
        inputs.check_image_layout(tmp_path / "images", None)
    assert "What to do: put the photos the COLMAP model lists into" in str(raised.value)
