"""What the console says at the end of a run and of ns-eval, and only once (issue 46, section 2).

One run of the documented multi-rank command (torchrun, 2 CPU ranks) with evaluations on, then
ns-eval with the command the run printed, then ns-export: the real commands, stdout a pipe. The run and
ns-eval are shared_runs.two_ranks_with_evaluations, made once for this file and
tests/parallel/test_rank_local_images.py (which checks the ranks' shards and the split evaluation on them).

* the end of training: one line with the steps, wall time, Gaussian count and the ns-eval command;
  nerfstudio's "Training Finished" box once, not once per rank;
* ns-eval: PSNR / SSIM / LPIPS on the console, not only in the JSON;
* what every rank would print alike ("Saving checkpoints to", the fresh-start line) once per run;
* the LPIPS-unavailable warning once per command that computes LPIPS (not per rank), and not at all in
  ns-export; nerfstudio's GradScaler FutureWarning (raised in the trainer's set-up) not at all.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from clirun import console_script
from shared_runs import TWO_RANKS_SUMMARY, two_ranks_with_evaluations

LPIPS_LINE = "LPIPS unavailable"
ONCE_PER_RUN = ("Saving checkpoints to", "No checkpoint to load, so training from scratch", "Start-up: ")
"""nerfstudio's Trainer.__init__ line, the trainer's fresh-start line (its checksum: the ranks' line
"initial Gaussians identical on all 2 ranks" names them all) and the start-up time (the slowest rank's)."""
SUMMARY = re.compile(TWO_RANKS_SUMMARY)


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
    """torchrun, 2 CPU ranks, 16 steps with an all-images evaluation at the last, then the printed ns-eval."""
    shared = two_ranks_with_evaluations(tmp_path_factory)
    assert shared["train"]["returncode"] == 0, shared["train"]["output"][-5000:]
    return shared["train"]["output"], Path(shared["run_dir"]), shared["eval"]


@pytest.mark.slow
def test_training_ends_with_one_summary_line_and_one_box(two_ranks):
    output, run, _ = two_ranks
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
    for line in ONCE_PER_RUN:  # what both ranks would say alike, said by rank 0
        if output.count(line) != 1:
            problems.append(f"{output.count(line)} lines with {line!r}")
    if not re.search(r"^Start-up: [\d.]+ s .*\(the slowest of 2 ranks; the fastest [\d.]+ s", output, re.M):
        problems.append("no start-up line naming the slowest of the 2 ranks")
    assert not problems, f"{problems}:\n{output[-5000:]}"


@pytest.mark.slow
def test_ns_eval_prints_its_metrics_and_ns_export_no_lpips_warning(two_ranks, tmp_path):
    output, run, evaluated = two_ranks
    command = SUMMARY.findall(re.sub(r"\s+", " ", output))[0][1]
    assert evaluated is not None and evaluated["command"] == command  # ns-eval ran the printed command
    assert evaluated["returncode"] == 0, evaluated["stdout"][-4000:]
    results = json.loads((run / "metrics.json").read_text())["results"]
    line = f"PSNR {results['psnr']:.2f} dB, SSIM {results['ssim']:.3f}, LPIPS n/a on 3 held-out images"
    assert line in evaluated["stdout"].replace("\n", ""), evaluated["stdout"][-4000:]
    assert evaluated["stdout"].count(LPIPS_LINE) == 1, evaluated["stdout"][-4000:]

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


def test_the_printed_ns_eval_command_pastes_as_printed_where_paths_have_spaces(tmp_path):
    """The summary's next command, split as a POSIX shell splits it, is ns-eval with the run's own paths."""
    from ns_splat_plus.training.console import training_summary

    run = tmp_path / "my runs" / "x y" / "splat-plus" / "it's here"
    line = training_summary(10, 1.0, 2.0, 800, run)
    argv = shlex.split(line.split("Next: ", 1)[1])
    assert argv == ["ns-eval", "--load-config", str(run / "config.yml"), "--output-path", str(run / "metrics.json")]
    plain = training_summary(10, 1.0, None, 800, Path("/runs/a/splat-plus/t"))  # nothing to quote: as before
    assert plain == (
        "Trained 10 steps in 1.0 s: 800 Gaussians. "
        "Next: ns-eval --load-config /runs/a/splat-plus/t/config.yml --output-path /runs/a/splat-plus/t/metrics.json"
    )
