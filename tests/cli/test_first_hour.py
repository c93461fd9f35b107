"""The first hour of a new user, through the real ns-train (issue 46, section 2).

* a COLMAP scene laid out as COLMAP, 3DGS and Mip-NeRF 360 lay it out (``images/`` + ``sparse/0/`` at the
  top) trains with the README's ``ns-train splat-plus --data scene colmap``, and every message about a
  missing model names the command that works (it went round in a loop: "no COLMAP model at
  scene/colmap/sparse/0" with ``colmap``, "add the colmap subcommand" without);
* a run shorter than its schedule says at start-up that it will not densify and not reach full
  resolution, with the numbers of the schedule it really uses (scaled by --steps-scaler, ranks, cameras).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from clirun import assert_ok, assert_one_message, ns_train_cmd, run, run_dir
from shared_runs import FIRST_HOUR_SCENE, short_run_command, short_splat_plus_run

from splatbench.scenes import make_scene

TINY_SCENE = FIRST_HOUR_SCENE  # large enough for the default resolution schedule's 1/4 (16x12: the SSIM window fits)


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)


def top_level_layout(scene: Path, dest: Path) -> Path:
    """The scene as a COLMAP / 3DGS / Mip-NeRF 360 download: images/ and sparse/0/ at the top."""
    dest.mkdir()
    shutil.copytree(scene / "images", dest / "images")
    shutil.copytree(scene / "colmap" / "sparse", dest / "sparse")
    return dest


@pytest.mark.slow
def test_top_level_sparse_model_trains_with_the_colmap_subcommand(scene, tmp_path):
    data = top_level_layout(scene, tmp_path / "cup")
    proc = run(ns_train_cmd(data, tmp_path, "top", 1))
    assert_ok(proc)
    output = proc.stdout + proc.stderr
    line = f"so the COLMAP model in {data / 'sparse' / '0'} is used (as `colmap --colmap-path sparse/0`)"
    assert line in output.replace("\n", ""), output[-3000:]
    # config.yml names the model used: ns-eval and ns-viewer of this run read the same one
    trained = run_dir(tmp_path, "top")
    saved = yaml.load((trained / "config.yml").read_text(), Loader=yaml.Loader)
    assert Path(saved.pipeline.datamanager.dataparser.colmap_path) == Path("sparse/0")
    assert sorted((trained / "nerfstudio_models").glob("step-*.ckpt"))


@pytest.mark.slow
def test_messages_about_a_missing_model_name_the_command_that_works(scene, tmp_path):
    data = top_level_layout(scene, tmp_path / "cup")
    # without `colmap`: nerfstudio-data looks for transforms.json; the message is the README's command
    proc = run(ns_train_cmd(data, tmp_path, "nosub", 1, dataparser=()))
    assert_one_message(proc, f"ns-train splat-plus --data {data} colmap", status=2)
    # a model elsewhere: --colmap-path named in the message
    (data / "sparse").rename(data / "reconstruction")
    proc = run(ns_train_cmd(data, tmp_path, "elsewhere", 1))
    assert_one_message(
        proc, f"ns-train splat-plus --data {data} colmap --colmap-path reconstruction/0", "holds one", status=2
    )


def short_run_lines(output: str):
    return [line for line in output.replace("\n ", " ").splitlines() if line.startswith("Short run:")]


@pytest.mark.slow
def test_short_run_says_it_does_not_densify_or_reach_full_resolution(scene, tmp_path, tmp_path_factory):
    # the README's command with only --max-num-iterations: the default schedule (refines from step 500,
    # full resolution from step 6000); here 2 steps, so both are missed. The run (ns-train's entry point, which
    # also lists the modules imported at step 0) is shared with tests/cli/test_startup_imports.py.
    short = short_splat_plus_run(tmp_path_factory)
    assert short["returncode"] == 0, short["stdout"][-3000:] + short["stderr"][-3000:]
    lines = short_run_lines(short["stdout"])
    assert len(lines) == 2, short["stdout"][-3000:]
    assert lines[0].startswith("Short run: the first refine would be at step 600, after the last step 1: "), lines
    assert "this run does not densify" in lines[0]
    assert lines[1].startswith("Short run: the resolution schedule ends at step 6000, after the last step 1: "), lines
    assert "this run trains at 1/4 resolution" in lines[1]

    # splat-plus-lite's schedule is a third of splatfacto's (--steps-scaler 1/3): --max-num-iterations 6 runs
    # 2 steps, its refines start after step 167 (every 100), the resolution schedule ends at 2 x 2000
    proc = run(short_run_command(scene, tmp_path, method="splat-plus-lite", steps=6))
    assert_ok(proc)
    lines = short_run_lines(proc.stdout)
    assert len(lines) == 3, proc.stdout[-3000:]
    assert lines[0].startswith("Short run: the first refine would be at step 200, after the last step 1: "), lines
    assert lines[1].startswith("Short run: the resolution schedule ends at step 4000, after the last step 1: "), lines
    # those are the run's steps, a third of the typed ones (a fresh-eyes trial read them as the options' units)
    assert lines[2] == (
        "Short run: the steps above count the run's 2 steps (--max-num-iterations x 1/3: --steps-scaler 0.333); "
        "the options named scale by the same factor"
    ), lines


def test_the_suggested_colmap_command_pastes_as_printed_where_paths_have_spaces(tmp_path):
    """The command a COLMAP scene without the colmap subcommand is told to run, split as a POSIX shell splits it."""
    from ns_splat_plus.training.inputs import colmap_command

    data = tmp_path / "my scene"
    (data / "recon 1" / "0").mkdir(parents=True)
    command = colmap_command(SimpleNamespace(method_name="splat-plus-lite"), data, data / "recon 1" / "0")
    command, note = command.split(" (", 1)  # the command, then a note in parentheses
    assert note == "other options before `colmap`)"
    assert shlex.split(command) == [
        "ns-train", "splat-plus-lite", "--data", str(data), "colmap", "--colmap-path", "recon 1/0",
    ]  # fmt: skip
