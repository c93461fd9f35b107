"""What a newcomer reads in the terminal: ns-train's start-up and progress output in a log (no terminal),
``--print-config``, ``ns-export gaussian-splat`` naming what it wrote, and a build without setuptools warnings.

The runs are the README's synthetic quickstart, shortened: the real ns-train / ns-export commands, on
the CPU, with stdout a pipe (as in a SLURM log or ``ns-train ... > log``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import pytest
from clirun import CPU_CLI_ARGS, console_script, free_port

from splatbench.scenes import SceneSpec, make_scene

REPO = Path(__file__).resolve().parents[2]
STEPS = 100
STEPS_PER_LOG = 10
QUICKSTART_ARGS = [  # the README's synthetic quickstart (the viewer on, as by default), shortened
    "--machine.device-type",
    "cpu",
    "--viewer.websocket-host",
    "127.0.0.1",
    "--pipeline.model.num-downscales",
    "0",
    "--pipeline.model.warmup-length",
    "40",
    "--pipeline.model.refine-every",
    "20",
]
MAX_LINES = 50 + STEPS // STEPS_PER_LOG
"""About 45 lines of start-up and end messages (deprecation warnings of torch / nerfstudio included), and one
row per logging step. Before the fix the same run printed ~300 lines of config and a 14-line copy of the
progress table and viewer banner at every logging step."""


def _run(cmd, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", "CI")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quickstart")
    scene = make_scene(tmp / "scene", SceneSpec(n_views=16, width=48, height=36, focal=42.0))
    out = tmp / "outputs"
    proc = _run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            str(scene),
            "--output-dir",
            str(out),
            "--timestamp",
            "run",
            "--max-num-iterations",
            str(STEPS),
            "--viewer.websocket-port",
            str(free_port()),
            *QUICKSTART_ARGS,
            "colmap",
        ]
    )
    return {"output": proc.stdout, "run_dir": out / "scene" / "splat-plus" / "run", "tmp": tmp}


@pytest.mark.slow
def test_ns_train_output_is_short_without_a_terminal(quickstart):
    output, run_dir = quickstart["output"], quickstart["run_dir"]
    lines = output.splitlines()
    assert len(lines) < MAX_LINES, f"{len(lines)} lines:\n{output[-6000:]}"
    # the config: saved in the run directory, one line says where, the dump only with --print-config
    assert (run_dir / "config.yml").exists()
    assert "SplatPlusTrainerConfig(" not in output
    assert sum(f"Config: {run_dir / 'config.yml'}" in line for line in lines) == 1, output[:3000]
    # the progress table as plain rows: each logging step once, no cursor movements, the viewer address once
    for step in range(0, STEPS, STEPS_PER_LOG):
        rows = [line for line in lines if re.match(rf"{step} \(\d+\.\d+%\)", line)]
        assert len(rows) == 1, (step, rows)
    assert "\x1b[" not in output.replace("\x1b[0m", ""), "cursor movements in a log"
    assert output.count("Viewer running locally at: http://127.0.0.1:") == 1
    # trained from scratch: the initial count is said once, by the trainer
    assert len(re.findall(r"Initial Gaussians: \d+", output)) == 1


@pytest.mark.slow
def test_print_config_prints_the_whole_config(tmp_path):
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=8, width=32, height=24, focal=28.0))
    proc = _run(
        [
            console_script("ns-train"),
            "splat-plus",
            "--data",
            str(scene),
            "--output-dir",
            str(tmp_path / "out"),
            "--max-num-iterations",
            "1",
            "--print-config",
            "True",
            *CPU_CLI_ARGS,
            "colmap",
        ]
    )
    assert "SplatPlusTrainerConfig(" in proc.stdout and "steps_scaler=" in proc.stdout, proc.stdout[-3000:]
    assert "Config: " in proc.stdout and "--print-config True also prints it" not in proc.stdout


def _ns_export(kind: str, run_dir: Path, output_dir: Path) -> subprocess.CompletedProcess:
    """``ns-export KIND --load-config RUN/config.yml --output-dir OUTPUT_DIR``, as the docs give it."""
    return _run(
        [
            console_script("ns-export"),
            kind,
            "--load-config",
            str(run_dir / "config.yml"),
            "--output-dir",
            str(output_dir),
        ]
    )


@pytest.mark.slow
def test_ns_export_says_what_it_wrote(quickstart):
    export_dir = quickstart["tmp"] / "export"
    proc = _ns_export("gaussian-splat", quickstart["run_dir"], export_dir)
    ply = export_dir / "splat.ply"
    header = ply.read_bytes()[:2000].decode("latin-1")
    count = int(re.search(r"element vertex (\d+)", header).group(1))
    assert f"Exported {count} Gaussians to {ply}\n" in proc.stdout, proc.stdout[-3000:]  # a new file: no more said
    # a checkpoint is loaded: the count the model was built with (before loading) is not the model's
    assert "Initial Gaussians" not in proc.stdout, proc.stdout[-3000:]
    # again into the same folder (another run's export, say): nerfstudio overwrites it, and that is said
    again = _ns_export("gaussian-splat", quickstart["run_dir"], export_dir)
    assert f"Exported {count} Gaussians to {ply} (the file that was there is replaced)" in again.stdout, again.stdout


@pytest.mark.slow
def test_ns_export_cameras_writes_the_poses_of_both_splits(quickstart):
    """nerfstudio 1.1.5's `ns-export cameras` asserts that the training cameras carry metadata (for the camera
    optimizer's index): it ended in an AssertionError, which was then blamed on the config.yml."""
    export_dir = quickstart["tmp"] / "cameras"
    proc = _ns_export("cameras", quickstart["run_dir"], export_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = json.loads((export_dir / "transforms_train.json").read_text())
    evaluated = json.loads((export_dir / "transforms_eval.json").read_text())
    assert len(train) > 0 and len(evaluated) > 0
    assert all(len(frame["transform"]) == 3 and len(frame["transform"][0]) == 4 for frame in train + evaluated)


def test_pyproject_builds_without_setuptools_warnings():
    """setuptools reads our pyproject.toml without a deprecation warning (a TOML-table licence gave three per
    build: about 45 lines of scripts/setup.sh's output), and the licence is an SPDX expression."""
    from setuptools.dist import Distribution
    from setuptools.warnings import SetuptoolsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = Distribution()
        dist.parse_config_files([str(REPO / "pyproject.toml")])
    messages = [str(w.message).strip().splitlines()[0] for w in caught if issubclass(w.category, SetuptoolsWarning)]
    assert not messages, messages
    assert dist.metadata.license_expression == "Apache-2.0"


@pytest.mark.slow
def test_the_readmes_pythonwarnings_hides_nerfstudios_import_warnings(tmp_path):
    """The README's advice for the FutureWarnings that nerfstudio's imports print before any plugin runs: the
    variable it gives hides them (here on a command that stops at its first check, after every import)."""
    from clirun import run

    setting = re.search(r"export PYTHONWARNINGS=(\S+)`", (REPO / "README.md").read_text())
    assert setting is not None, "the README no longer gives the PYTHONWARNINGS setting"
    cmd = [console_script("ns-train"), "splat-plus", "--data", str(tmp_path / "missing"), *CPU_CLI_ARGS, "colmap"]
    proc = run(cmd, cwd=tmp_path, PYTHONWARNINGS=setting.group(1))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "does not exist" in output, output[-3000:]
    assert "FutureWarning" not in output, output[-3000:]
