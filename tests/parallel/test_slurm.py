"""The SLURM templates (configs/slurm/*.sbatch) under a real SLURM on this machine (:mod:`slurm_cluster`).

CPU ranks (gloo) on the synthetic scene: ``single_node.sbatch`` with ``DEVICE_TYPE=cpu`` and 2 tasks,
``multi_node.sbatch`` on 2 nodes x 1 task (two slurmd on this host), and a run stopped by SIGTERM
(scancel: the time limit's signal), resumed by a second job, stopped again by the template's
time-limit warning (USR1) and requeued, to the end.

On a machine that ``scripts/setup.sh`` prepared as root (it installs slurm-wlm and munge and writes
``.venv/slurm-installed``) these tests fail when a SLURM program is missing; elsewhere (setup.sh not
run as root, or not on Debian) they skip, naming why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import pytest
import slurm_cluster
from clirun import console_script

from splatbench.scenes import SceneSpec, make_scene

REPO = Path(__file__).resolve().parents[2]
SINGLE_NODE = REPO / "configs" / "slurm" / "single_node.sbatch"
MULTI_NODE = REPO / "configs" / "slurm" / "multi_node.sbatch"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL")
CPU_JOB = ["--gpus-per-node=0", "--cpus-per-task=1", "--open-mode=append"]
"""sbatch options that turn the GPU templates into CPU jobs; the output of a requeued job is appended."""
TRAIN = [
    "--pipeline.model.num-downscales", "0", "--data-parallel.replica-check-every", "5", "--warmup-steps", "0",
    "--steps-per-save", "1000", "--logging.local-writer.enable", "False",
]  # fmt: skip
"""Few cheap steps, no periodic checkpoint. On 2 ranks the schedule is halved; refines start after
the pause that follows the opacity reset at step 0 (a rank's 11 cameras + refine-every steps)."""
SHORT = ["--max-num-iterations", "60", "--pipeline.model.warmup-length", "10", "--pipeline.model.refine-every", "10"]
"""Steps 0-29 on 2 ranks, refines at steps 20 and 25."""


def _require_slurm() -> None:
    missing = slurm_cluster.tools_missing()
    if missing:
        if slurm_cluster.SETUP_MARKER.exists():
            pytest.fail(
                f"SLURM programs missing: {', '.join(missing)}; scripts/setup.sh installed them here before "
                f"({slurm_cluster.SETUP_MARKER}): run it again (as root) or apt-get install slurm-wlm munge"
            )
        pytest.skip(
            f"no SLURM here ({', '.join(missing)} missing): scripts/setup.sh installs it when run as root on Debian"
        )
    if os.geteuid() != 0:
        if slurm_cluster.SETUP_MARKER.exists():
            pytest.fail("the SLURM tests start slurmd, which runs jobs as root: run them as root")
        pytest.skip("the SLURM tests start slurmd, which needs root")


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("slurm-scene") / "scene", SceneSpec(n_views=24, width=64, height=48))


def _job_env(scene: Path, out: Path, **extra: str) -> Dict[str, str]:
    return {
        "DATA": str(scene),
        "OUTPUT_DIR": str(out),
        "NS_TRAIN": console_script("ns-train"),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def _two_ranks_completed(info: dict, log: Path, run: Path, placement: str) -> Path:
    """Assert that a 2-rank CPU job completed with exit 0 on ``placement``, trained to step 29 through at
    least two refines, and ended with identical replicas; returns its run directory."""
    output = log.read_text()
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), output[-5000:]
    assert f"splat-plus: using 2 CPU processes (0 GPUs) via slurm ({placement}, gloo)" in output
    ranks = _ranks(run, 2)
    assert [r["final_step"] for r in ranks] == [29, 29]
    assert len(_refines(run)) >= 2
    assert ranks[0]["final_checksum"] == ranks[1]["final_checksum"] is not None
    return run


def _ranks(run: Path, world: int) -> List[dict]:
    return [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(world)]


def _refines(run: Path) -> List[dict]:
    records = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
    return [r for r in records if r["event"] == "refine"]


def _wait_for_text(
    path: Path, text: str, count: int, timeout: float, cluster: slurm_cluster.SlurmCluster, job: int
) -> None:
    """Wait until ``text`` is ``count`` times in the job's output; else TimeoutError with the output's end,
    the job's fields and the daemons' logs (what SLURM did with the job)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(
        f"{text!r} not {count} times in {path} after {timeout} s:\n"
        + (path.read_text()[-4000:] if path.exists() else "(no file)")
        + f"\njob {job}: {cluster.job(job)}\n{cluster.logs()}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("given,expected", [({}, "3"), ({"OMP_NUM_THREADS": "2"}, "2")])
def test_the_cpu_template_gives_each_rank_its_task_s_cpus_as_threads(tmp_path, given, expected):
    """DEVICE_TYPE=cpu: OMP_NUM_THREADS is the task's --cpus-per-task unless set (a trial: unset, 2 ranks on one
    node trained 12x slower than under torchrun, which sets 1). srun here is a stand-in that prints it."""
    (tmp_path / "bin").mkdir()
    srun = tmp_path / "bin" / "srun"
    srun.write_text('#!/bin/bash\necho "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"\n')
    srun.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS" and not k.startswith("SLURM_")}
    env.update(PATH=f"{tmp_path / 'bin'}:{env['PATH']}", SLURM_JOB_ID="7", SLURM_CPUS_PER_TASK="3", DATA=str(tmp_path))
    env.update(DEVICE_TYPE="cpu", OUTPUT_DIR=str(tmp_path / "out"), **given)
    proc = subprocess.run(["bash", str(SINGLE_NODE)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"OMP_NUM_THREADS={expected}" in proc.stdout.splitlines(), proc.stdout


@pytest.mark.slow
def test_single_node_template_trains_two_cpu_tasks(tmp_path, scene):
    """sbatch single_node.sbatch, DEVICE_TYPE=cpu, 2 tasks: one gloo group through srun, exit 0."""
    _require_slurm()
    cluster = slurm_cluster.start_cluster(tmp_path / "slurm")
    try:
        log = tmp_path / "job.out"
        job = cluster.sbatch(
            *CPU_JOB, "--ntasks-per-node=2", f"--output={log}", str(SINGLE_NODE), *SHORT, *TRAIN,
            env=_job_env(scene, tmp_path / "out", DEVICE_TYPE="cpu", RUN_NAME="one"),
            cwd=tmp_path,
        )  # fmt: skip
        info = cluster.wait_for(job, DONE, timeout=400)
    finally:
        cluster.stop()
    run = _two_ranks_completed(info, log, tmp_path / "out" / "scene" / "splat-plus" / "one", "1 node x 2 processes")
    assert list((run / "nerfstudio_models").glob("*.ckpt")) == [run / "nerfstudio_models" / "step-000000029.ckpt"]


@pytest.mark.slow
def test_stopped_job_saves_a_checkpoint_and_resumes_to_the_end(tmp_path, scene):
    """Job 1 is scancelled (SIGTERM, as at the time limit): it stops with a checkpoint. Job 2, same
    RUN_NAME, resumes; SLURM's time-limit warning (USR1 to the batch script, as ``--signal=B:USR1@120``
    sends it) stops it with a checkpoint and the script requeues the job, which resumes again and
    finishes step 99; both ranks stay identical."""
    _require_slurm()
    cluster = slurm_cluster.start_cluster(tmp_path / "slurm")
    env = _job_env(scene, tmp_path / "out", DEVICE_TYPE="cpu", RUN_NAME="long")
    args = [*CPU_JOB, "--ntasks-per-node=2"]
    # steps 0-99 on 2 ranks, refines every 10 steps from step 10 to the end: each job's part (at least 24
    # steps, between two stops agreed 25 steps apart) refines, wherever the stops fall (they follow the CPU's speed)
    train = [
        "--max-num-iterations", "200", "--pipeline.model.warmup-length", "20", "--pipeline.model.refine-every", "20",
        "--pipeline.model.stop-split-at", "200", *TRAIN,
    ]  # fmt: skip
    logs = [tmp_path / "job1.out", tmp_path / "job2.out"]
    try:
        first = cluster.sbatch(*args, f"--output={logs[0]}", str(SINGLE_NODE), *train, env=env, cwd=tmp_path)
        _wait_for_text(logs[0], "Start-up:", 1, 300, cluster, first)  # printed once both ranks are about to train
        time.sleep(2)  # the loop's SIGTERM handler is set right after that line (before it, SIGTERM kills)
        cluster.run("scancel", str(first))
        cluster.wait_for(first, DONE, timeout=300)
        _wait_for_text(logs[0], "checkpoint saved", 1, 120, cluster, first)
        second = cluster.sbatch(
            *args, "--requeue", f"--output={logs[1]}", str(SINGLE_NODE), *train, env=env, cwd=tmp_path
        )
        _wait_for_text(logs[1], "Start-up:", 1, 300, cluster, second)
        time.sleep(2)
        cluster.run("scancel", "--batch", "--signal=USR1", str(second))  # what --signal=B:USR1@120 sends
        _wait_for_text(logs[1], f"job {second}: requeued", 1, 300, cluster, second)
        cluster.wait_for(second, ("PENDING",), timeout=120)
        # SLURM holds a requeued job for about two minutes (its begin time) so that the old run's processes
        # are gone and the new launch's credential is newer than the old one's revocation (slurmd refuses a
        # launch from the second the job was killed in). The test waits for both, then starts the job
        # (a start time in the future would wait for the scheduler's next periodic pass instead).
        cluster.wait_idle(60)
        time.sleep(2)
        cluster.run("scontrol", "update", f"JobId={second}", "StartTime=now")
        _wait_for_text(logs[1], "Start-up:", 2, 300, cluster, second)  # the requeued job started again
        info = cluster.wait_for(second, DONE, timeout=300)
    finally:
        cluster.stop()
    out1, out2 = (log.read_text() for log in logs)
    # ranks agree on a stop every 25 steps: job 1 stops at step 0 or 25, job 2 at the next multiple of 25
    first_stop = re.search(r"training stopped by SIGTERM after step (\d+); checkpoint saved", out1)
    assert first_stop is not None, out1[-5000:]
    second_stop = re.search(r"training stopped by SIGTERM after step (\d+); checkpoint saved", out2)
    assert second_stop is not None, out2[-5000:]
    steps = int(first_stop.group(1)), int(second_stop.group(1))
    assert steps[0] % 25 == 0 and steps[0] < steps[1] < 99 and steps[1] % 25 == 0
    assert (info["JobState"], info["ExitCode"], info["Restarts"]) == ("COMPLETED", "0:0", "1"), out2[-5000:]
    runs = tmp_path / "out" / "scene" / "splat-plus"
    assert f"resuming from {runs / 'long' / 'nerfstudio_models'} into {runs / 'long-1'}" in out2
    assert f"job {second}: requeued" in out2
    assert out2.count("Resumed from ") == 2, out2[-5000:]  # one line per resumed job, not one per rank
    assert "other model options" not in out2  # the same options, each scaled for 2 ranks alike
    assert f"restart 1): resuming from {runs / 'long-1' / 'nerfstudio_models'} into {runs / 'long-2'}" in out2
    saved = {
        run: sorted(p.name for p in (runs / run / "nerfstudio_models").glob("*.ckpt"))
        for run in ("long", "long-1", "long-2")
    }
    assert saved == {
        "long": [f"step-{steps[0]:09d}.ckpt"],
        "long-1": [f"step-{steps[1]:09d}.ckpt"],
        "long-2": ["step-000000099.ckpt"],
    }
    for run, stop in (("long-1", steps[0]), ("long-2", steps[1])):  # each rank checked the checkpoint's Gaussians
        resumed = _ranks(runs / run, 2)
        assert [r["resumed_at_step"] for r in resumed] == [stop + 1] * 2 and all(r["initial_match"] for r in resumed)
    ranks = _ranks(runs / "long-2", 2)
    assert [r["final_step"] for r in ranks] == [99, 99]
    assert ranks[0]["final_checksum"] == ranks[1]["final_checksum"] is not None
    assert _refines(runs / "long-1") + _refines(runs / "long-2")  # densification went on in the resumed jobs


@pytest.mark.slow
def test_multi_node_template_runs_two_nodes(tmp_path, scene):
    """sbatch multi_node.sbatch on 2 nodes x 1 task: two slurmd on this host ("multiple slurmd"),
    ranks on different nodes, identical replicas."""
    _require_slurm()
    cluster = slurm_cluster.start_cluster(tmp_path / "slurm", nodes=2)
    try:
        log = tmp_path / "job.out"
        job = cluster.sbatch(
            *CPU_JOB, "--nodes=2", "--ntasks-per-node=1", f"--output={log}", str(MULTI_NODE),
            *SHORT, *TRAIN, env=_job_env(scene, tmp_path / "out", DEVICE_TYPE="cpu", RUN_NAME="two"),
            cwd=tmp_path,
        )  # fmt: skip
        info = cluster.wait_for(job, DONE, timeout=400)
    finally:
        cluster.stop()
    _two_ranks_completed(info, log, tmp_path / "out" / "scene" / "splat-plus" / "two", "2 nodes x 1 process")
