"""The benchmark's child processes: running one with its log, its environment, the GPUs it sees.

Entry point: :func:`run_child` (one process, output to its log, progress lines to the console),
:func:`child_env`, :func:`failure_reason`, :func:`visible_gpu_ids`, :func:`prebuild_gsplat`.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from splatbench.options import OPTION_ENVS, PROBE_OUT_ENV, PROGRESS_PREFIX, SAFE_PATH_ENV, ProbeOptions
from splatbench.settings import BenchmarkSettings, log


@dataclass
class ChildResult:
    returncode: Optional[int]
    wall_s: float
    timed_out: bool
    log_path: Path


def run_child(
    command: Sequence[str], log_path: Path, env: Dict[str, str], timeout_s: Optional[float], label: str
) -> ChildResult:
    """Run one child process; its whole output goes to ``log_path``, its progress lines to the console."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    timed_out = threading.Event()
    with open(log_path, "w", encoding="utf8") as log_file:
        log_file.write("$ " + shlex.join(command) + "\n")
        log_file.flush()
        process = subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,  # its own process group: a timeout stops torchrun's workers too
        )

        def stop_on_timeout() -> None:
            timed_out.set()
            try:
                os.killpg(process.pid, signal.SIGTERM)
                time.sleep(10)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, stop_on_timeout) if timeout_s else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log_file.write(line)
                log_file.flush()
                if line.startswith(PROGRESS_PREFIX):
                    log(f"  {label}: {line[len(PROGRESS_PREFIX) :].strip()}")
            process.wait()
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGTERM)
            raise
        finally:
            if timer is not None:
                timer.cancel()
    return ChildResult(process.returncode, time.perf_counter() - start, timed_out.is_set(), log_path)


_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Interrupt)|AssertionError|Traceback)\b.*")


def failure_reason(log_path: Path, max_chars: int = 300) -> str:
    """The most telling line of a failed child's log: the last exception line, else the last line."""
    try:
        lines = [line.rstrip() for line in log_path.read_text(encoding="utf8", errors="replace").splitlines()]
    except OSError:
        return "no log"
    lines = [line for line in lines if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line) and not line.strip().startswith("Traceback"):
            return line.strip()[:max_chars]
    return (lines[-1].strip() if lines else "no output")[:max_chars]


def lpips_standin_home(out_dir: Path) -> Optional[Path]:
    """A TORCH_HOME holding randomly initialised AlexNet weights, or None if the real ones are there.

    splatfacto builds torchmetrics' LPIPS, which downloads AlexNet, when the model is constructed: on
    an offline machine it cannot even start. With stand-in weights it trains normally (LPIPS plays no
    part in training) and its LPIPS is discarded (reported null), never compared.
    """
    from splatbench.runtime import alexnet_weights_path

    if alexnet_weights_path().is_file():
        return None
    home = out_dir / "lpips-standin"
    weights = home / "hub" / "checkpoints" / alexnet_weights_path().name
    if not weights.is_file():
        import torch
        import torchvision

        weights.parent.mkdir(parents=True, exist_ok=True)
        with torch.random.fork_rng(devices=[]):  # the caller's random stream goes on as if nothing was drawn
            torch.manual_seed(0)
            torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)
    return home


def uses_lpips_standin(settings: BenchmarkSettings, method: str) -> bool:
    # every method gets them, so that evaluation computes LPIPS (its memory is measured with LPIPS on);
    # splatfacto could not even be constructed offline without them
    return settings.lpips_standin


def probe_options(settings: BenchmarkSettings) -> ProbeOptions:
    """What the benchmark's train probes measure besides step times, memory and Gaussians."""
    return ProbeOptions(
        gpu_busy_steps=settings.gpu_busy_steps,
        gpu_busy_start=settings.gpu_busy_start,
        gpu_busy_at=settings.gpu_busy_at,
        gpu_busy_every=settings.gpu_busy_every,
        skip_steps=settings.effective_skip,
    )


def child_env(
    settings: BenchmarkSettings,
    num_gpus: int,
    probe_out: Path,
    standin_home: Optional[Path] = None,
    method: str = "",
) -> Dict[str, str]:
    env = dict(os.environ)
    if standin_home is not None:
        env["TORCH_HOME"] = str(standin_home)
    if method.startswith("splat-plus"):
        # splat-plus's own checkpoints load with weights_only: measured as users run it, whatever this shell says
        env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    elif method or standin_home is not None:
        # the baseline methods' checkpoints hold numpy scalars that torch >= 2.6 refuses to load by default
        # (nerfstudio #3683), whether or not their LPIPS weights are stand-ins
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    for name in OPTION_ENVS:  # the benchmark's settings decide, not what this shell happens to export
        env.pop(name, None)
    env.update(probe_options(settings).env())
    env[PROBE_OUT_ENV] = str(probe_out)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(SAFE_PATH_ENV)
    if settings.device_type == "cuda":
        visible = visible_gpu_ids()
        if visible and len(visible) >= num_gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(visible[:num_gpus])  # W runs see exactly W GPUs
    return env


def visible_gpu_ids() -> List[str]:
    """The GPUs this benchmark may use: CUDA_VISIBLE_DEVICES, else nvidia-smi's list (no CUDA init here)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        return [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        out = None
    if out is not None and out.returncode == 0:
        return [line.strip() for line in out.stdout.splitlines() if line.strip()]
    import torch  # no nvidia-smi: ask the driver (device count only, no context on a GPU)

    return [str(i) for i in range(torch.cuda.device_count())]


GSPLAT_BUILD = "from gsplat.cuda import _backend; assert _backend._C is not None, 'gsplat CUDA extension unavailable'"


def prebuild_gsplat(out_dir: Path, timeout_s: Optional[float]) -> bool:
    """Build (or load from cache) gsplat's JIT-compiled CUDA extension once, before any timed run,
    so that no method's wall time includes the compilation (~100 s on a fresh machine)."""
    log("building / loading gsplat's CUDA extension once (no run pays its JIT compilation)")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    child = run_child(
        [sys.executable, "-c", GSPLAT_BUILD], out_dir / "logs" / "gsplat-build.log", env, timeout_s, "gsplat"
    )
    ok = child.returncode == 0 and not child.timed_out
    log(
        f"gsplat extension {'ready' if ok else 'NOT available: ' + failure_reason(child.log_path)} ({child.wall_s:.0f} s)"
    )
    return ok
