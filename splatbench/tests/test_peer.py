"""``--peer``: another project's trainer side by side with nerfstudio's methods (splatbench/peer.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from splatbench import cli, merge

# A stand-in for another project's trainer (a shell script, as scripts/peers/fastgs/train_one.sh is): it checks
# what it was given and reports made-up metrics that depend on its seed, so the test can tell which run wrote which row.
FAKE_PEER = r"""
set -eu
data=$1 run_dir=$2 seed=${3:-}
test -f "$data/marker.txt"
test -d "$run_dir" && test -z "$(ls -A "$run_dir")"
[ "$seed" = 3 ] && exit 0  # a run that ends without writing its results
s=${seed:-0}
wall=null; [ "$s" = 1 ] && wall=123.5  # seed 1 reports its training process's own wall
printf '{"psnr": 2%s.0, "ssim": 0.9%s, "num_gaussians": %s000, "train_wall_s": 1.5, "process_wall_s": %s}' \
  "$s" "$s" "$((s + 1))" "$wall" > "$run_dir/peer_results.json"
"""


def _run(tmp_path: Path, *extra: str, out_name: str = "out") -> dict:
    scene = tmp_path / "scene"
    scene.mkdir(exist_ok=True)
    (scene / "marker.txt").write_text("a scene")
    peer = tmp_path / "fake_peer.sh"
    peer.write_text(FAKE_PEER)
    out = tmp_path / out_name
    cli.main([
        "--methods", "peer-a", "--device-type", "cpu", "--scene-args", f"--data {scene} colmap",
        "--peer", f"peer-a=bash {peer} {{data}} {{run_dir}} {{seed}}", "--out", str(out), *extra,
    ])  # fmt: skip
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow  # starts the peer's command (a process)
def test_a_peer_runs_its_command_per_repeat_and_its_metrics_reach_the_report(tmp_path):
    results = _run(tmp_path, "--repeats", "3", "--seed-per-repeat")
    runs = {r["repeat"]: r for r in results["runs"]}
    assert [runs[k]["psnr"] for k in (1, 2)] == [21.0, 22.0]  # each repeat got its own seed
    assert [runs[k]["num_gaussians"] for k in (1, 2)] == [2000, 3000]
    assert runs[1]["status"] == runs[2]["status"] == "ok"
    assert runs[1]["process_wall_s"] == 123.5 and 0 < runs[1]["command_wall_s"] < 123.5  # the peer's own
    assert runs[2]["process_wall_s"] == runs[2]["command_wall_s"] > 0  # else the whole command's
    assert runs[1]["train_wall_s"] == 1.5
    assert str(tmp_path / "scene") in runs[1]["train_command"]
    assert runs[3]["status"] == "failed" and "peer_results.json" in runs[3]["error"]
    table = (tmp_path / "out" / "results.md").read_text()
    assert "`peer-a`" in table and "21.50" in table  # the mean PSNR of the two runs that reported


@pytest.mark.slow  # starts the peer's command (a process)
def test_a_peer_without_seed_per_repeat_gets_its_own_default_seed(tmp_path):
    (run,) = _run(tmp_path)["runs"]
    assert run["psnr"] == 20.0 and run["status"] == "ok"


def test_a_peer_on_several_gpus_is_recorded_as_unsupported_without_running(tmp_path):
    runs = _run(tmp_path, "--gpus", "2")["runs"]
    assert runs[0]["status"] == "unsupported" and "one GPU" in runs[0]["error"]
    assert not (tmp_path / "out" / "logs").exists()


@pytest.mark.parametrize(
    ("peer", "methods", "message"),
    [
        ("peer-a=run {scene}", "peer-a", "'scene' is not a placeholder"),
        ("peer-b=run {data}", "peer-a", "list peer-b in --methods"),
        ("peer-a=", "peer-a", "expected LABEL=COMMAND"),
    ],
)
def test_peer_mistakes_stop_before_any_run(tmp_path, peer, methods, message):
    with pytest.raises(SystemExit, match=message):
        cli.main(["--methods", methods, "--device-type", "cpu", "--scene-args", "--data x colmap", "--peer", peer,
                  "--out", str(tmp_path)])  # fmt: skip
    assert not (tmp_path / "results.json").exists()


def test_a_peer_that_reads_data_needs_data_in_the_scene_arguments(tmp_path):
    with pytest.raises(SystemExit, match=r"--peer 'p': it uses \{data\}: give the scene's folder as --data"):
        cli.main(["--methods", "p", "--device-type", "cpu", "--scene-args", "blender-data", "--peer", "p=run {data}",
                  "--out", str(tmp_path)])  # fmt: skip


@pytest.mark.slow  # starts the peer's command (a process)
def test_peer_runs_of_separate_commands_merge_only_when_the_peer_is_the_same_command(tmp_path):
    first = _run(tmp_path, "--seed-per-repeat", out_name="a")
    second = _run(tmp_path, "--seed-per-repeat", "--first-repeat", "2", out_name="b")
    merged = merge.merge_results([first, second])
    assert [r["psnr"] for r in merged["runs"]] == [21.0, 22.0]
    assert merged["settings"]["peers"] == first["settings"]["peers"]
    other = copy.deepcopy(second)
    other["settings"]["peers"]["peer-a"] += " --another-setting"
    with pytest.raises(ValueError, match="runs peer-a as .* not one experiment"):
        merge.merge_results([first, other])


@pytest.mark.slow  # starts the peer's command (a process)
def test_a_concurrent_peer_quality_run_keeps_no_timing_figure(tmp_path):
    runs = {
        r["repeat"]: r for r in _run(tmp_path, "--repeats", "2", "--seed-per-repeat", "--concurrent-quality")["runs"]
    }
    assert runs[1]["timing_valid"] is True and runs[1]["command_wall_s"] > 0
    assert runs[2]["timing_valid"] is False and runs[2]["psnr"] == 22.0
    assert runs[2]["process_wall_s"] is None and runs[2]["train_wall_s"] is None and "command_wall_s" not in runs[2]
