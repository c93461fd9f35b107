"""The benchmark's --warm-caches runs: :func:`warm_caches`, before any run of :func:`splatbench.runner.run_benchmark`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List

from splatbench import children
from splatbench.options import PROGRESS_PREFIX, STOP_AFTER_STEPS_ENV
from splatbench.settings import BenchmarkSettings, log


def warm_caches(
    settings: BenchmarkSettings, out_dir: Path, train_command: Callable[..., List[str]]
) -> List[Dict[str, Any]]:
    """--warm-caches: each method's training started once on one GPU and ended after its first step, its warmup
    included (``ProbeOptions.stop_after_steps``), before any timed run. A method's first process on a machine compiles
    what later ones load from disk (Triton's kernels for each image size the warmup renders, the driver's
    cache); without this, the first timed run pays it for every run after it. One record per method: its
    process wall (the cold start) and whether it reached its first step; nothing of the run is kept.
    ``train_command``: :func:`splatbench.runner.train_command`, the command of the runs themselves."""
    records = []
    for method in settings.methods:
        if method in settings.peers:
            continue
        run_dir = out_dir / "warm" / method
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        standin = children.lpips_standin_home(out_dir) if children.uses_lpips_standin(settings, method) else None
        env = children.child_env(settings, 1, run_dir / "probe.json", standin, settings.nerfstudio_method(method))
        env[STOP_AFTER_STEPS_ENV] = "1"
        log(f"{method}: warming caches (its training, ended after the first step)")
        child = children.run_child(train_command(settings, method, 1, run_dir), out_dir / "logs" / f"{method}.warm.log",
                                   env, settings.timeout_s, f"{method}-warm")  # fmt: skip
        text = child.log_path.read_text(errors="replace") if child.log_path.is_file() else ""
        stopped = child.returncode == 0 and not child.timed_out and f"{PROGRESS_PREFIX} stopping after" in text
        records.append({"method": method, "process_wall_s": child.wall_s, "reached_first_step": stopped,
                        "log": str(child.log_path)})  # fmt: skip
        if stopped:
            log(f"{method}: caches warm ({child.wall_s:.0f} s, its cold start)")
        else:
            reason = "timed out" if child.timed_out else children.failure_reason(child.log_path)
            log(f"{method}: the cache-warming run did not reach its first step ({reason}); the runs go on")
        shutil.rmtree(run_dir, ignore_errors=True)
    return records
