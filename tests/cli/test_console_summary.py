"""What the console says at the end of a run and of ns-eval, and only once (issue 46, section 2).

One run of the documented multi-rank command (torchrun, 2 CPU ranks) with evaluations on, then
ns-eval with the command the run printed, then ns-export: the real commands, stdout a pipe.

* the end of training: one line with the steps, wall time, Gaussian count and the ns-eval command;
  nerfstudio's "Training Finished" box once, not once per rank;
* ns-eval: PSNR / SSIM / LPIPS on the console, not only in the JSON;
* the LPIPS-unavailable warning once per command that computes LPIPS (not per rank), and not at all in
  ns-export; nerfstudio's GradScaler FutureWarning (raised in the trainer's set-up) not at all.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess

import pytest
from clirun import console_script

from splatbench.scenes import SceneSpec, make_scene

SPEC = SceneSpec(n_views=16, width=32, height=24, focal=28.0, n_points=200)
"""16 views: 2 held out (every 8th), so that each of the 2 ranks scores one in the all-images evaluation."""
LPIPS_LINE = "LPIPS unavailable"
SUMMARY = re.compile(
    r"Trained 2 steps in \d+\.\d s \(\d+\.\d s since the process started\): ([\d,]+) Gaussians\. "
    r"Next: (ns-eval --load-config \S+ --output-path \S+)"
)


def _run(cmd, timeout: int = 540) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    return subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """torchrun, 2 CPU ranks, 2 steps (4 one-camera steps scaled for 2 ranks), an all-images evaluation every step."""
    tmp = tmp_path_factory.mktemp("summary")
    scene = make_scene(tmp / "scene", SPEC)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        console_script("torchrun"), "--nproc-per-node", "2", "--master-port", str(port),
        console_script("ns-train"), "splat-plus", "--data", str(scene), "--output-dir", str(tmp / "out"),
        "--experiment-name", "summary", "--timestamp", "run", "--max-num-iterations", "4",
        "--machine.device-type", "cpu", "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
        "--warmup-steps", "0", "--pipeline.model.num-downscales", "0",
        "--steps-per-eval-all-images", "2", "--steps-per-eval-image", "100000", "--steps-per-eval-batch", "0",
        "colmap",
    ]  # fmt: skip
    proc = _run(cmd)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return proc.stdout, tmp / "out" / "summary" / "splat-plus" / "run"


@pytest.mark.slow
def test_training_ends_with_one_summary_line_and_one_box(two_ranks):
    output, run = two_ranks
    found = SUMMARY.findall(re.sub(r"\s+", " ", output))  # rich may wrap the long line
    problems = []
    if len(found) != 1:
        problems.append(f"{len(found)} summary lines")
    else:
        gaussians, command = found[0]
        assert int(gaussians.replace(",", "")) > 0
        assert command == f"ns-eval --load-config {run / 'config.yml'} --output-path {run / 'metrics.json'}"
    if output.count("Training Finished") != 1:
        problems.append(f"{output.count('Training Finished')} 'Training Finished' boxes")
    if output.count(LPIPS_LINE) != 1:  # evaluated on both ranks, said by rank 0
        problems.append(f"{output.count(LPIPS_LINE)} LPIPS warnings")
    if "GradScaler" in output:
        problems.append("nerfstudio's GradScaler FutureWarning")
    assert not problems, f"{problems}:\n{output[-5000:]}"


@pytest.mark.slow
def test_ns_eval_prints_its_metrics_and_ns_export_no_lpips_warning(two_ranks, tmp_path):
    output, run = two_ranks
    command = SUMMARY.findall(re.sub(r"\s+", " ", output))[0][1]
    args = shlex.split(command)
    proc = _run([console_script(args[0]), *args[1:]])
    assert proc.returncode == 0, proc.stdout[-4000:]
    results = json.loads((run / "metrics.json").read_text())["results"]
    line = f"PSNR {results['psnr']:.2f} dB, SSIM {results['ssim']:.3f}, LPIPS n/a on 2 held-out images"
    assert line in proc.stdout.replace("\n", ""), proc.stdout[-4000:]
    assert proc.stdout.count(LPIPS_LINE) == 1, proc.stdout[-4000:]

    proc = _run(
        [
            console_script("ns-export"),
            "gaussian-splat",
            "--load-config",
            str(run / "config.yml"),
            "--output-dir",
            str(tmp_path / "export"),
        ]
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert LPIPS_LINE not in proc.stdout, proc.stdout[-4000:]
