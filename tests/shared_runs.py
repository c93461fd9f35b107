"""CLI runs that tests of several files read, each made once per test session (``clirun.once``): every
process started costs seconds of imports, so a run whose output several tests check is started once.

    run = two_ranks_with_evaluations(tmp_path_factory)
    run["train"]["output"], run["run_dir"], run["eval"]["stdout"]
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from clirun import cli_env, console_script, ns_train_cmd, once, torchrun_cmd

from splatbench.scenes import SceneSpec, make_scene

TWO_RANKS_SUMMARY = (
    r"Trained 16 steps in \d+\.\d s \(\d+\.\d s since the process started\): ([\d,]+) Gaussians\. "
    r"Next: (ns-eval --load-config \S+ --output-path \S+)"
)
"""The line that ends the run of :func:`two_ranks_with_evaluations` (rich may wrap it: match it on the output
with runs of whitespace made one space)."""


def two_ranks_with_evaluations(tmp_path_factory) -> dict:
    """``torchrun --nproc-per-node 2 ns-train splat-plus`` on CPU ranks, then the ``ns-eval`` command it prints,
    as a user runs them (stdout a pipe).

    24 views of 64x48 (21 train, 3 eval: not a multiple of 4, and both ranks score eval photos), cameras-per-step
    auto (2 per rank on 2 ranks), the one-camera schedule scaled for 2 ranks x 2 cameras: 16 steps, refines every
    2 from step 2, replica checks every 4, one eval image and eval loss at step 10, all images at the last step
    (15), warmup 1 step. Read by tests/parallel/test_rank_local_images.py (shards, the split evaluation, the
    batch of 2 cameras per rank) and tests/cli/test_console_summary.py (what the console says).

    Returns {"run_dir", "train": {"returncode", "output"}, "eval": {"command", "returncode", "stdout"}}: the
    tests assert on them (nothing is asserted here, so that each test reports what it checks)."""

    def make(folder: Path) -> dict:
        scene = make_scene(folder / "scene", SceneSpec(n_views=24, width=64, height=48))
        extra = ("--pipeline.datamanager.cameras-per-step", "auto")  # 2 on 2 ranks: as passing 2, once resolved
        extra += ("--pipeline.model.warmup-length", "8", "--pipeline.model.refine-every", "8")
        extra += ("--data-parallel.replica-check-every", "4")
        extra += ("--steps-per-eval-image", "40", "--steps-per-eval-batch", "40", "--steps-per-eval-all-images", "60")
        cmd = torchrun_cmd(2, ns_train_cmd(scene, folder / "out", "shards", 64, *extra, warmup_steps=1))
        env = {k: v for k, v in cli_env().items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
        train = subprocess.run(cmd, capture_output=True, text=True, timeout=540, env=env, stdin=subprocess.DEVNULL)
        result = {
            "run_dir": str(folder / "out" / "shards" / "splat-plus" / "run"),
            "train": {"returncode": train.returncode, "output": train.stdout + train.stderr},
            "eval": None,
        }
        printed = re.findall(TWO_RANKS_SUMMARY, re.sub(r"\s+", " ", train.stdout))
        if train.returncode == 0 and printed:
            command = printed[0][1]  # the ns-eval command the run printed, as a user pastes it
            args = shlex.split(command)
            proc = subprocess.run(
                [console_script(args[0]), *args[1:]], capture_output=True, text=True, timeout=300, env=env,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            result["eval"] = {"command": command, "returncode": proc.returncode, "stdout": proc.stdout + proc.stderr}
        return result

    return once(tmp_path_factory, "two-ranks-with-evaluations", make)


FIRST_HOUR_SCENE = SceneSpec(n_views=8, width=64, height=48, focal=56.0, n_points=200)
"""Large enough for the default resolution schedule's 1/4 (16x12: the SSIM window fits)."""

LISTING_DRIVER = """
import json, os, sys
import ns_splat_plus.training.loop as loop
step_of_loop = loop.run_training_step
def listing_step(trainer, step):
    if step == 0:
        json.dump(sorted(sys.modules), open(os.environ["MODULES_AT_STEP_0"], "w"))
    return step_of_loop(trainer, step)
loop.run_training_step = listing_step
from nerfstudio.scripts.train import entrypoint
entrypoint()
"""
"""ns-train's own entry point, with the training loop's step wrapped to list the imported modules at step 0."""


def short_run_command(scene: Path, out: Path, method: str = "splat-plus", steps: int = 2) -> list:
    """The README's command with only --max-num-iterations (and the CPU, no warmup, tensorboard): the default
    schedule, so a run of a few steps neither densifies nor reaches full resolution."""
    return [
        console_script("ns-train"), method, "--data", str(scene), "--output-dir", str(out),
        "--experiment-name", "short", "--timestamp", "run", "--max-num-iterations", str(steps),
        "--warmup-steps", "0", "--machine.device-type", "cpu", "--vis", "tensorboard", "colmap",
    ]  # fmt: skip


def short_splat_plus_run(tmp_path_factory) -> dict:
    """:func:`short_run_command` (splat-plus, 2 steps) on :data:`FIRST_HOUR_SCENE`, run by ns-train's own entry
    point with :data:`LISTING_DRIVER` (nothing else changed): what it printed, and the modules imported when
    its first training step started. Read by tests/cli/test_first_hour.py (the short-run lines) and
    tests/cli/test_startup_imports.py (the modules).

    Returns {"returncode", "stdout", "stderr", "run_dir", "modules" (None if the listing was not written)}."""

    def make(folder: Path) -> dict:
        import json

        from clirun import run

        scene = make_scene(folder / "scene", FIRST_HOUR_SCENE)
        listing = folder / "modules.json"
        cmd = short_run_command(scene, folder / "out")
        proc = run([sys.executable, "-c", LISTING_DRIVER, *cmd[1:]], cwd=folder, MODULES_AT_STEP_0=str(listing))
        return {
            "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
            "run_dir": str(folder / "out" / "short" / "splat-plus" / "run"),
            "modules": json.loads(listing.read_text()) if listing.exists() else None,
        }  # fmt: skip

    return once(tmp_path_factory, "short-splat-plus-run", make)
