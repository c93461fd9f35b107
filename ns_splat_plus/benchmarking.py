"""Benchmark nerfstudio methods against each other: speed, memory and held-out quality, in one run.

Entry point: ``scripts/benchmark.py`` (``python scripts/benchmark.py --help``). For every method and
GPU count it trains in a fresh process through :mod:`ns_splat_plus.bench_probe` (nerfstudio's real
``ns-train`` main with a recording trainer subclass; ``torchrun`` for several GPUs), evaluates the
result with nerfstudio's ``ns-eval`` main in another fresh process, and writes

    OUT/results.json        every number, the settings, the environment and the exact command
    OUT/results.md          a Markdown table (+ comparison against the reference method)
    OUT/readme_section.md   the README "Results" section (table, one plot, date, GPU, versions, command)
    OUT/plots/*.png         held-out PSNR vs wall time, step time, memory, speedup vs GPU count
    OUT/logs/*.log          the full output of every child process
    OUT/runs/<tag>/         the nerfstudio run directories

How things are measured (identically for every method):

* step time: the time of one whole training iteration (from nerfstudio's first before-iteration
  callback to its last after-iteration callback, so densification is in and evaluation, logging
  and checkpoints are out), taken as the interval between consecutive iteration starts on the GPU
  timeline (CUDA events, no synchronisation in the loop; host clock on CPU). The median skips the
  first ``--skip-steps`` iterations (kernel compilation, caches, warm-up).
* wall time: ``train`` = nerfstudio's ``Trainer.train`` (the training loop incl. the final
  checkpoint), ``process`` = the whole training process incl. start-up.
* memory: ``torch.cuda.max_memory_allocated`` around every iteration (reset before, read after),
  max over iterations (train peak); over the whole ns-eval process, model loading included (eval peak).
* quality: nerfstudio's ``ns-eval`` on the held-out split; LPIPS is null when its weights are not
  available offline (never 0).
* Gaussians: the model's count at the end; densification: summed refine events of the run's
  ``densification.jsonl`` (splat-plus writes it; methods without one get null).

The quality gate (:func:`quality_gate`, ``scripts/quality_gate.py``) compares a results JSON with a
stored baseline and fails on regressions beyond per-metric tolerances.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

SCHEMA_VERSION = 1
GIB = 1024**3
MIB = 1024**2
FOX_SCENE_ARGS = "--data ../shared/data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
DEFAULT_METHODS = ("splat-plus", "splatfacto")
# Methods that train on several GPUs. splatfacto crashes at start on 2 GPUs (DESIGN.md): its
# multi-GPU runs are recorded as unsupported unless --force-multi-gpu asks to try.
MULTI_GPU_METHODS = ("splat-plus", "splat-plus-mcmc", "splat-plus-fast")
REFINE_COUNT_KEYS = ("duplicated", "split", "pruned", "relocated", "added")
PROBE_MODULE = "ns_splat_plus.bench_probe"


def log(message: str) -> None:
    """One progress line on the console (flushed: visible while a long run goes on)."""
    stamp = _dt.datetime.now().strftime("%H:%M:%S")
    print(f"[benchmark {stamp}] {message}", flush=True)


# --- settings --------------------------------------------------------------------------------------


@dataclass
class BenchmarkSettings:
    methods: List[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    gpus: List[int] = field(default_factory=lambda: [1])
    steps: int = 3000
    skip_steps: int = 100
    scene_args: str = FOX_SCENE_ARGS
    train_args: str = ""
    method_args: Dict[str, str] = field(default_factory=dict)
    multi_gpu_args: str = ""
    device_type: str = "cuda"
    launcher: str = "torchrun"  # for W > 1: torchrun, or spawn (ns-train --machine.num-devices W)
    eval_every: int = 0  # in-training evaluation of all images every N steps (0: none; ns-eval after)
    run_eval: bool = True
    timeout_s: Optional[float] = None
    force_multi_gpu: bool = False
    prebuild_gsplat: bool = True
    reference: Optional[str] = None  # method the others are compared with (default: splatfacto if listed)
    scene_name: Optional[str] = None
    lpips_standin: bool = True  # let methods that need AlexNet at construction start offline (LPIPS then null)

    @property
    def effective_skip(self) -> int:
        """Steps left out of the median: --skip-steps, at most half the run (tiny CPU runs)."""
        return max(0, min(self.skip_steps, self.steps // 2))

    def reference_method(self) -> Optional[str]:
        if self.reference:
            return self.reference
        if "splatfacto" in self.methods:
            return "splatfacto"
        return self.methods[-1] if len(self.methods) > 1 else None

    def describe_scene(self) -> str:
        if self.scene_name:
            return self.scene_name
        tokens = shlex.split(self.scene_args)
        if "--data" in tokens and tokens.index("--data") + 1 < len(tokens):
            return Path(tokens[tokens.index("--data") + 1]).name
        return "scene"


def run_tag(method: str, num_gpus: int) -> str:
    return f"{method}-{num_gpus}gpu"


# --- child processes -------------------------------------------------------------------------------


def train_command(settings: BenchmarkSettings, method: str, num_gpus: int, run_dir: Path) -> List[str]:
    """The command that trains ``method`` on ``num_gpus`` GPUs through the probe."""
    common = [
        "--output-dir", str(run_dir),
        "--timestamp", "bench",
        "--max-num-iterations", str(settings.steps),
        "--vis", "tensorboard",
        "--viewer.quit-on-train-completion", "True",
        "--machine.device-type", settings.device_type,
        # evaluation happens in ns-eval, after training, not inside the timed loop
        "--steps-per-eval-image", "0",
        "--steps-per-eval-batch", "0",
        "--steps-per-eval-all-images", str(settings.eval_every),
        "--steps-per-save", str(max(settings.steps * 10, 1_000_000)),  # only the final checkpoint
    ]  # fmt: skip
    if num_gpus == 1 or settings.launcher == "spawn":
        common += ["--machine.num-devices", str(num_gpus)]
    extra = shlex.split(settings.train_args) + shlex.split(settings.method_args.get(method, ""))
    if num_gpus > 1:
        extra += shlex.split(settings.multi_gpu_args.replace("{W}", str(num_gpus)))
    probe_args = ["train", method, *common, *extra, *shlex.split(settings.scene_args)]
    if num_gpus > 1 and settings.launcher == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(num_gpus),
            "-m", PROBE_MODULE, *probe_args,
        ]  # fmt: skip
    return [sys.executable, "-m", PROBE_MODULE, *probe_args]


def eval_command(config_path: Path, output_path: Path) -> List[str]:
    return [sys.executable, "-m", PROBE_MODULE, "eval", "--load-config", str(config_path), "--output-path", str(output_path)]


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
    from ns_splat_plus.bench_probe import PROGRESS_PREFIX

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
                    log(f"  {label}: {line[len(PROGRESS_PREFIX):].strip()}")
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
    from ns_splat_plus.compat import alexnet_weights_path

    if alexnet_weights_path().is_file():
        return None
    home = out_dir / "lpips-standin"
    weights = home / "hub" / "checkpoints" / alexnet_weights_path().name
    if not weights.is_file():
        import torch
        import torchvision

        weights.parent.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)
    return home


def uses_lpips_standin(settings: BenchmarkSettings, method: str) -> bool:
    # splat-plus builds LPIPS only from real local weights (compat.build_lpips); others need the stand-in
    return settings.lpips_standin and not method.startswith("splat-plus")


def child_env(
    settings: BenchmarkSettings, num_gpus: int, probe_out: Path, standin_home: Optional[Path] = None
) -> Dict[str, str]:
    from ns_splat_plus.bench_probe import PROBE_OUT_ENV

    env = dict(os.environ)
    if standin_home is not None:
        env["TORCH_HOME"] = str(standin_home)
        # the same baseline methods' checkpoints hold numpy scalars that torch >= 2.6 refuses to load
        # by default (nerfstudio #3683); splat-plus's own checkpoints never need this
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    env[PROBE_OUT_ENV] = str(probe_out)
    env["PYTHONUNBUFFERED"] = "1"
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


# --- reading what a run left behind ----------------------------------------------------------------


def _median(values: Sequence[float]) -> Optional[float]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def summarize_steps(probe: Dict[str, Any], skip: int) -> Dict[str, Any]:
    """Step-time statistics from a train probe, leaving out iterations with step < ``skip``."""
    steps: List[int] = probe.get("steps") or []
    begin: List[float] = probe.get("host_begin_s") or []
    end: List[float] = probe.get("host_end_s") or []
    n = min(len(steps), len(begin), len(end))
    if n == 0:
        return {"timed_steps": 0, "step_time_ms_median": None, "step_time_ms_mean": None, "iteration_ms_median": None}
    keep = [i for i in range(n) if steps[i] >= skip] or list(range(n))
    # interval between this iteration's start and the next one's: the cadence of training
    host_interval = [(begin[i + 1] - begin[i]) * 1000.0 for i in keep if i + 1 < n]
    host_span = [(end[i] - begin[i]) * 1000.0 for i in keep]
    gpu_interval = probe.get("gpu_interval_ms")
    gpu_span = probe.get("gpu_span_ms")
    if gpu_interval:
        interval = [gpu_interval[i] for i in keep if i < len(gpu_interval)]
        span = [gpu_span[i] for i in keep if i < len(gpu_span)] if gpu_span else host_span
        clock = "cuda-events"
    else:
        interval, span, clock = host_interval, host_span, "host"
    first, last = keep[0], keep[-1]
    mean = (end[last] - begin[first]) * 1000.0 / len(keep) if len(keep) else None
    return {
        "timed_steps": n,
        "skipped_steps": n - len(keep),
        "step_clock": clock,
        "step_time_ms_median": _median(interval) if interval else _median(span),
        "step_time_ms_mean": mean,
        "iteration_ms_median": _median(span),
        "host_step_time_ms_median": _median(host_interval) if host_interval else _median(host_span),
    }


def read_densification(path: Path) -> Optional[Dict[str, Any]]:
    """Totals of the refine events in a ``densification.jsonl`` (None when the run wrote none)."""
    if not path.is_file():
        return None
    totals: Dict[str, Any] = {"refine_events": 0}
    last_count = None
    for line in path.read_text(encoding="utf8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or event.get("event") != "refine":
            continue
        totals["refine_events"] += 1
        for key in REFINE_COUNT_KEYS:
            value = event.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + int(value)
        for key in ("num_gaussians", "gaussians_after", "count_after", "num_after", "gaussians"):
            if isinstance(event.get(key), (int, float)):
                last_count = int(event[key])
                break
    totals["gaussians_after_last_refine"] = last_count
    return totals


def _finite_or_none(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_eval_metrics(path: Path) -> Dict[str, Any]:
    """psnr / ssim / lpips (+ std) from ns-eval's JSON; a missing or null LPIPS stays None, never 0."""
    results = json.loads(path.read_text(encoding="utf8")).get("results", {})
    out: Dict[str, Any] = {}
    for key in ("psnr", "ssim", "lpips", "psnr_std", "ssim_std", "lpips_std", "fps", "num_rays_per_sec"):
        out[key] = _finite_or_none(results.get(key))
    if isinstance(results.get("num_gaussians"), int):
        out["eval_num_gaussians"] = results["num_gaussians"]
    if isinstance(results.get("num_images"), int):
        out["eval_num_images"] = results["num_images"]
    return out


def _bytes_to_gib(value: Any) -> Optional[float]:
    return value / GIB if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _load_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, json.JSONDecodeError):
        return None


def rank_probes(probe_path: Path) -> List[Dict[str, Any]]:
    """Rank 0's probe and any other ranks' (``probe.rankK.json``)."""
    probes = []
    main = _load_json(probe_path)
    if main is not None:
        probes.append(main)
    for other in sorted(probe_path.parent.glob(f"{probe_path.stem}.rank*{probe_path.suffix}")):
        data = _load_json(other)
        if data is not None:
            probes.append(data)
    return probes


def empty_record(method: str, num_gpus: int) -> Dict[str, Any]:
    return {
        "method": method,
        "num_gpus": num_gpus,
        "status": "pending",
        "error": None,
        "steps_requested": None,
        "timed_steps": None,
        "step_time_ms_median": None,
        "step_time_ms_mean": None,
        "iteration_ms_median": None,
        "train_wall_s": None,
        "process_wall_s": None,
        "eval_wall_s": None,
        "train_peak_gib": None,
        "eval_peak_gib": None,
        "in_training_eval_peak_gib": None,
        "psnr": None,
        "ssim": None,
        "lpips": None,
        "num_gaussians": None,
        "densification": None,
        "speedup": None,
    }


def collect_train(record: Dict[str, Any], probe_path: Path, skip: int) -> None:
    probes = rank_probes(probe_path)
    if not probes:
        return
    probe = probes[0]
    record.update(summarize_steps(probe, skip))
    record["train_wall_s"] = probe.get("train_s")
    record["world_size"] = probe.get("world_size")
    peaks = [p.get("process_peak_bytes") for p in probes]
    train_peaks = [max([b for b in (p.get("peak_bytes") or []) if b is not None], default=None) for p in probes]
    train_peaks = [b for b in train_peaks if b is not None]
    record["train_peak_gib"] = _bytes_to_gib(max(train_peaks)) if train_peaks else None  # max over ranks
    record["process_peak_gib"] = _bytes_to_gib(max([b for b in peaks if b is not None], default=None) or None)
    record["in_training_eval_peak_gib"] = _bytes_to_gib(probe.get("in_training_eval_peak_bytes"))
    record["host_peak_rss_gib"] = _bytes_to_gib(probe.get("host_peak_rss_bytes"))
    record["num_gaussians"] = probe.get("final_gaussians")
    gaussians = probe.get("gaussians") or []
    stride = max(1, len(gaussians) // 50)
    record["gaussian_trace"] = [[probe["steps"][i], gaussians[i]] for i in range(0, len(gaussians), stride)]
    record["environment"] = probe.get("environment")
    record["run_dir"] = probe.get("base_dir")
    if probe.get("error"):
        record["error"] = probe["error"]


# --- the benchmark ---------------------------------------------------------------------------------


def run_one(settings: BenchmarkSettings, method: str, num_gpus: int, out_dir: Path) -> Dict[str, Any]:
    record = empty_record(method, num_gpus)
    record["steps_requested"] = settings.steps
    tag = run_tag(method, num_gpus)
    if num_gpus > 1 and method not in MULTI_GPU_METHODS and not settings.force_multi_gpu:
        record["status"] = "unsupported"
        record["error"] = f"{method} does not train on several GPUs (crashes at start); not run"
        log(f"{tag}: skipped, {record['error']}")
        return record
    if num_gpus > 1 and settings.device_type == "cuda":
        visible = visible_gpu_ids()
        if len(visible) < num_gpus:
            record["status"] = "unsupported"
            record["error"] = f"{num_gpus} GPUs asked for, {len(visible)} available"
            log(f"{tag}: skipped, {record['error']}")
            return record

    run_dir = out_dir / "runs" / tag
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    probe_path = run_dir / "benchmark_probe_train.json"
    command = train_command(settings, method, num_gpus, run_dir)
    record["train_command"] = shlex.join(command)
    unit = "GPU(s)" if settings.device_type == "cuda" else "CPU process(es)"
    standin = lpips_standin_home(out_dir) if uses_lpips_standin(settings, method) else None
    if standin is not None:
        record["lpips_note"] = "AlexNet weights not available offline: trained with stand-in weights, LPIPS not reported"
    log(f"{tag}: training {settings.steps} steps on {num_gpus} {unit} (log: {out_dir / 'logs' / (tag + '.train.log')})")
    child = run_child(
        command, out_dir / "logs" / f"{tag}.train.log", child_env(settings, num_gpus, probe_path, standin),
        settings.timeout_s, tag,
    )  # fmt: skip
    record["process_wall_s"] = child.wall_s
    record["train_log"] = str(child.log_path)
    collect_train(record, probe_path, settings.effective_skip)
    if child.timed_out or child.returncode != 0:
        record["status"] = "timeout" if child.timed_out else "failed"
        reason = failure_reason(child.log_path)
        record["error"] = f"timed out after {settings.timeout_s:.0f} s" if child.timed_out else reason
        log(f"{tag}: {record['status']} after {child.wall_s:.0f} s: {record['error']}")
        return record
    configs = sorted(run_dir.rglob("config.yml"))
    if not configs:
        record["status"] = "failed"
        record["error"] = "training ended without a config.yml"
        return record
    base_dir = configs[0].parent
    record["run_dir"] = str(base_dir)
    record["densification"] = read_densification(base_dir / "densification.jsonl")
    log(
        f"{tag}: trained in {child.wall_s:.0f} s, median step "
        f"{_fmt(record.get('step_time_ms_median'), '.2f')} ms, {record.get('num_gaussians')} Gaussians"
    )
    if not settings.run_eval:
        record["status"] = "ok"
        return record

    log(f"{tag}: evaluating with ns-eval")
    eval_json = base_dir / "ns_eval.json"
    eval_probe = base_dir / "benchmark_probe_eval.json"
    child = run_child(
        eval_command(configs[0], eval_json), out_dir / "logs" / f"{tag}.eval.log",
        child_env(settings, 1, eval_probe, standin), settings.timeout_s, tag,
    )  # fmt: skip
    record["eval_log"] = str(child.log_path)
    if child.timed_out or child.returncode != 0 or not eval_json.is_file():
        record["status"] = "eval-failed"
        record["error"] = "ns-eval: " + failure_reason(child.log_path)
        log(f"{tag}: ns-eval failed: {record['error']}")
        return record
    record.update(read_eval_metrics(eval_json))
    if standin is not None:
        record["lpips"] = record["lpips_std"] = None  # computed with stand-in weights: meaningless
    probe = _load_json(eval_probe) or {}
    record["eval_wall_s"] = probe.get("eval_s", child.wall_s)
    record["eval_peak_gib"] = _bytes_to_gib(probe.get("eval_peak_bytes"))
    if record.get("num_gaussians") is None:
        record["num_gaussians"] = record.get("eval_num_gaussians")
    record["status"] = "ok"
    log(
        f"{tag}: PSNR {_fmt(record['psnr'], '.3f')} SSIM {_fmt(record['ssim'], '.4f')} "
        f"LPIPS {_fmt(record['lpips'], '.4f')}"
    )
    return record


def add_speedups(runs: List[Dict[str, Any]]) -> None:
    """speedup = train wall time of the method's 1-GPU run / this run's (None without both)."""
    single = {
        r["method"]: r["train_wall_s"] for r in runs if r["num_gpus"] == 1 and r["status"] == "ok" and r["train_wall_s"]
    }
    for r in runs:
        base = single.get(r["method"])
        r["speedup"] = base / r["train_wall_s"] if (base and r["status"] == "ok" and r["train_wall_s"]) else None


def environment_summary(runs: List[Dict[str, Any]], device_type: str) -> Dict[str, Any]:
    """Versions and GPU name: from a run's probe when one succeeded, else from this process."""
    for r in runs:
        if r.get("environment"):
            env = dict(r["environment"])
            break
    else:
        from ns_splat_plus.bench_probe import environment_info

        env = environment_info(None)
        env["device_type"] = device_type
    env["gpus_visible"] = len(visible_gpu_ids()) if device_type == "cuda" else 0
    env["hostname"] = os.uname().nodename
    return env


GSPLAT_BUILD = "from gsplat.cuda import _backend; assert _backend._C is not None, 'gsplat CUDA extension unavailable'"


def prebuild_gsplat(out_dir: Path, timeout_s: Optional[float]) -> bool:
    """Build (or load from cache) gsplat's JIT-compiled CUDA extension once, before any timed run,
    so that no method's wall time includes the compilation (~100 s on a fresh machine)."""
    log("building / loading gsplat's CUDA extension once (no run pays its JIT compilation)")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    child = run_child([sys.executable, "-c", GSPLAT_BUILD], out_dir / "logs" / "gsplat-build.log", env, timeout_s, "gsplat")
    ok = child.returncode == 0 and not child.timed_out
    log(f"gsplat extension {'ready' if ok else 'NOT available: ' + failure_reason(child.log_path)} ({child.wall_s:.0f} s)")
    return ok


def run_benchmark(
    settings: BenchmarkSettings, out_dir: Path, command: Optional[str] = None, readme_plot_base: Optional[Path] = None
) -> Dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now().astimezone()
    plan = [(m, w) for w in sorted(set(settings.gpus)) for m in settings.methods]
    log(f"{len(plan)} runs: " + ", ".join(run_tag(m, w) for m, w in plan) + f"; output in {out_dir}")
    if settings.device_type == "cuda" and settings.prebuild_gsplat:
        prebuild_gsplat(out_dir, settings.timeout_s)
    runs = []
    for index, (method, num_gpus) in enumerate(plan, 1):
        log(f"run {index}/{len(plan)}: {run_tag(method, num_gpus)}")
        runs.append(run_one(settings, method, num_gpus, out_dir))
        write_results(build_results(settings, runs, started, command), out_dir)  # partial results survive
    results = build_results(settings, runs, started, command)
    write_outputs(results, out_dir, readme_plot_base=readme_plot_base)
    return results


def build_results(
    settings: BenchmarkSettings, runs: List[Dict[str, Any]], started: _dt.datetime, command: Optional[str]
) -> Dict[str, Any]:
    add_speedups(runs)
    return {
        "schema": SCHEMA_VERSION,
        "created": started.isoformat(timespec="seconds"),
        "finished": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command,
        "scene": settings.describe_scene(),
        "settings": asdict(settings) | {"effective_skip_steps": settings.effective_skip},
        "reference_method": settings.reference_method(),
        "environment": environment_summary(runs, settings.device_type),
        "runs": runs,
    }


def write_results(results: Dict[str, Any], out_dir: Path) -> Path:
    path = out_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2), encoding="utf8")
    tmp.replace(path)
    return path


def write_outputs(results: Dict[str, Any], out_dir: Path, readme_plot_base: Optional[Path] = None) -> Dict[str, Path]:
    """results.json, results.md, readme_section.md and the plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": write_results(results, out_dir)}
    paths.update(make_plots(results, out_dir / "plots"))
    markdown = out_dir / "results.md"
    markdown.write_text(markdown_report(results), encoding="utf8")
    paths["markdown"] = markdown
    readme = out_dir / "readme_section.md"
    plot = paths.get("summary")
    plot_ref = None
    if plot is not None:
        base = readme_plot_base or Path.cwd()
        try:
            plot_ref = os.path.relpath(plot.resolve(), base.resolve())
        except ValueError:
            plot_ref = str(plot)
    readme.write_text(readme_section(results, plot_ref), encoding="utf8")
    paths["readme"] = readme
    log("wrote " + ", ".join(str(p) for p in paths.values()))
    return paths


# --- reports ---------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ".3f", none: str = "–") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return none
    return format(value, spec)


def _refine_cell(densification: Optional[Dict[str, Any]]) -> str:
    if not densification:
        return "–"
    parts = [f"{densification.get('refine_events', 0)} events"]
    for key in REFINE_COUNT_KEYS:
        if densification.get(key):
            parts.append(f"{key} {densification[key]:,}")
    return ", ".join(parts)


def markdown_table(results: Dict[str, Any]) -> str:
    # in-training evaluation (--eval-every) gets its own column only when a run did one
    in_training_eval = any(r.get("in_training_eval_peak_gib") is not None for r in results["runs"])
    header = (
        "| method | GPUs | status | steps | median step (ms) | train wall (s) | speedup | train peak (GiB) "
        + ("| in-training eval peak (GiB) " if in_training_eval else "")
        + "| eval peak (GiB) | PSNR | SSIM | LPIPS | Gaussians | densification |"
    )
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for r in results["runs"]:
        in_training_cell = [_fmt(r.get("in_training_eval_peak_gib"), ".2f")] if in_training_eval else []
        status = r["status"] if r["status"] == "ok" or not r.get("error") else f"{r['status']} (see notes)"
        lpips_none = "n/a" if r["status"] == "ok" else "–"  # n/a: evaluated, but LPIPS weights not available
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{r['method']}`",
                    str(r["num_gpus"]),
                    status,
                    str(r["timed_steps"]) if r.get("timed_steps") else "–",
                    _fmt(r.get("step_time_ms_median"), ".2f"),
                    _fmt(r.get("train_wall_s"), ".1f"),
                    _fmt(r.get("speedup"), ".2f") + ("×" if r.get("speedup") else ""),
                    _fmt(r.get("train_peak_gib"), ".2f"),
                    *in_training_cell,
                    _fmt(r.get("eval_peak_gib"), ".2f"),
                    _fmt(r.get("psnr"), ".2f"),
                    _fmt(r.get("ssim"), ".4f"),
                    _fmt(r.get("lpips"), ".4f", none=lpips_none),
                    f"{r['num_gaussians']:,}" if isinstance(r.get("num_gaussians"), int) else "–",
                    _refine_cell(r.get("densification")),
                ]
            )
            + " |"
        )
    notes = [
        f"- `{run_tag(r['method'], r['num_gpus'])}` {r['status']}: {r['error']}"
        for r in results["runs"]
        if r["status"] != "ok" and r.get("error")
    ]
    return "\n".join(lines) + "\n" + ("\nNotes:\n\n" + "\n".join(notes) + "\n" if notes else "")


def comparison_lines(results: Dict[str, Any]) -> List[str]:
    """Each method's 1-GPU run against the reference method's (step-time ratio, PSNR/SSIM deltas), and
    each W-GPU run against the same method on 1 GPU (speedup, its fraction of W, PSNR delta)."""
    reference = results.get("reference_method")
    by_key = {(r["method"], r["num_gpus"]): r for r in results["runs"] if r["status"] == "ok"}
    scaling = []
    for r in results["runs"]:
        single = by_key.get((r["method"], 1))
        if r["num_gpus"] == 1 or r["status"] != "ok" or single is None or not r.get("speedup"):
            continue
        text = f"- `{r['method']}` on {r['num_gpus']} GPUs vs 1: speedup {r['speedup']:.2f}× "
        text += f"({r['speedup'] / r['num_gpus']:.2f} of ideal)"
        if r.get("psnr") is not None and single.get("psnr") is not None:
            text += f", PSNR {r['psnr'] - single['psnr']:+.2f} dB"
        scaling.append(text)
    lines = []
    ref = by_key.get((reference, 1))
    for r in results["runs"]:
        if ref is None or r["num_gpus"] != 1 or r["method"] == reference or r["status"] != "ok":
            continue
        parts = []
        if r.get("step_time_ms_median") and ref.get("step_time_ms_median"):
            parts.append(f"step time {r['step_time_ms_median'] / ref['step_time_ms_median']:.3f}×")
        if r.get("train_peak_gib") and ref.get("train_peak_gib"):
            parts.append(f"train memory {r['train_peak_gib'] / ref['train_peak_gib']:.2f}×")
        if r.get("psnr") is not None and ref.get("psnr") is not None:
            parts.append(f"PSNR {r['psnr'] - ref['psnr']:+.2f} dB")
        if r.get("ssim") is not None and ref.get("ssim") is not None:
            parts.append(f"SSIM {r['ssim'] - ref['ssim']:+.4f}")
        lines.append(f"- `{r['method']}` vs `{reference}` (1 GPU): " + ", ".join(parts))
    return lines + scaling


def _versions_line(env: Dict[str, Any]) -> str:
    keys = ("torch", "cuda", "nerfstudio", "gsplat", "ns-splat-plus", "python")
    return ", ".join(f"{k} {env[k]}" for k in keys if env.get(k))


def _device_line(results: Dict[str, Any]) -> str:
    env = results.get("environment") or {}
    name = env.get("device_name") or env.get("device_type") or "unknown device"
    gpus = sorted({r["num_gpus"] for r in results["runs"]})
    return f"{name} (GPU counts: {', '.join(map(str, gpus))})" if env.get("device_type") == "cuda" else str(name)


def measurement_notes(results: Dict[str, Any]) -> str:
    settings = results.get("settings", {})
    clocks = {r.get("step_clock") for r in results["runs"] if r.get("step_clock")}
    clock = "the GPU timeline (CUDA events)" if clocks == {"cuda-events"} else "the host clock"
    if len(clocks) > 1:
        clock = "CUDA events on GPU, the host clock on CPU"
    lpips_missing = any(r["status"] == "ok" and r.get("lpips") is None for r in results["runs"])
    return (
        f"Median step time over steps ≥ {settings.get('effective_skip_steps')}: one whole training iteration "
        f"incl. densification, start to start, on {clock}. Train wall: nerfstudio's `Trainer.train`. "
        "Train peak: max of `torch.cuda.max_memory_allocated` over iterations; eval peak: the whole `ns-eval` "
        "process. PSNR/SSIM/LPIPS: `ns-eval` on the held-out split"
        + (" (LPIPS n/a: its AlexNet weights are not available offline)" if lpips_missing else "")
        + ". Speedup: 1-GPU train wall / W-GPU train wall of the same method."
    )


def markdown_report(results: Dict[str, Any]) -> str:
    settings = results.get("settings", {})
    env = results.get("environment") or {}
    out = [
        f"# Benchmark: {results.get('scene')}, {settings.get('steps')} steps",
        "",
        f"- date: {results.get('created')}",
        f"- device: {_device_line(results)}",
        f"- versions: {_versions_line(env)}",
        f"- scene arguments: `{settings.get('scene_args')}`",
    ]
    if results.get("command"):
        out.append(f"- command: `{results['command']}`")
    out += ["", markdown_table(results)]
    comparisons = comparison_lines(results)
    if comparisons:
        out += comparisons + [""]
    out += [measurement_notes(results), ""]
    return "\n".join(out)


def readme_section(results: Dict[str, Any], plot_ref: Optional[str]) -> str:
    """The README "Results" section: table, one plot, date, GPU, versions and the command."""
    settings = results.get("settings", {})
    env = results.get("environment") or {}
    date = (results.get("created") or "")[:10]
    out = [
        "## Results",
        "",
        f"{results.get('scene')}, {settings.get('steps')} training steps, measured {date} on "
        f"{_device_line(results)}; {_versions_line(env)}.",
        "",
        markdown_table(results),
    ]
    comparisons = comparison_lines(results)
    if comparisons:
        out += comparisons + [""]
    if plot_ref:
        out += [f"![benchmark plots]({plot_ref})", ""]
    out += [measurement_notes(results), "", "Regenerate (results, plots and this section):", "", "```bash"]
    out.append(results.get("command") or "python scripts/benchmark.py")
    out += ["```", ""]
    return "\n".join(out)


def make_plots(results: Dict[str, Any], plot_dir: Path) -> Dict[str, Path]:
    """PSNR vs wall time, step time, memory, speedup vs GPU count (separate PNGs + one 2x2 summary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    runs = [r for r in results["runs"] if r["status"] in ("ok", "eval-failed")]
    methods = list(dict.fromkeys(r["method"] for r in results["runs"]))
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    label = lambda r: f"{r['method']} ×{r['num_gpus']}"  # noqa: E731

    def psnr_vs_time(ax):
        for r in runs:
            if r.get("psnr") is not None and r.get("train_wall_s"):
                ax.scatter(r["train_wall_s"], r["psnr"], color=colors[r["method"]], s=40)
                ax.annotate(label(r), (r["train_wall_s"], r["psnr"]), fontsize=8, xytext=(4, 4),
                            textcoords="offset points")  # fmt: skip
        ax.margins(x=0.3, y=0.15)  # room for the labels
        ax.set_xlabel("training wall time (s)")
        ax.set_ylabel("held-out PSNR (dB)")
        ax.set_title("quality vs time")

    def step_time(ax):
        bars = [r for r in runs if r.get("step_time_ms_median")]
        ax.bar([label(r) for r in bars], [r["step_time_ms_median"] for r in bars],
               color=[colors[r["method"]] for r in bars])  # fmt: skip
        ax.set_ylabel("median step time (ms)")
        ax.set_title("step time")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)

    def memory(ax):
        bars = [r for r in runs if r.get("train_peak_gib") is not None or r.get("eval_peak_gib") is not None]
        xs = list(range(len(bars)))
        ax.bar([x - 0.2 for x in xs], [r.get("train_peak_gib") or 0 for r in bars], width=0.4, label="train")
        ax.bar([x + 0.2 for x in xs], [r.get("eval_peak_gib") or 0 for r in bars], width=0.4, label="eval")
        ax.set_xticks(xs, [label(r) for r in bars], rotation=20, fontsize=8)
        ax.set_ylabel("peak device memory (GiB)")
        ax.set_title("memory")
        if bars:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no device memory (CPU run)", ha="center", va="center", transform=ax.transAxes)

    def speedup(ax):
        max_w = 1
        for m in methods:
            pts = sorted((r["num_gpus"], r["speedup"]) for r in runs if r["method"] == m and r.get("speedup"))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colors[m], label=m)
                max_w = max(max_w, pts[-1][0])
        ax.plot([1, max_w], [1, max_w], linestyle="--", color="gray", label="ideal")
        ax.set_xticks(sorted({1, max_w} | {r["num_gpus"] for r in runs}))
        ax.set_xlabel("GPUs")
        ax.set_ylabel("speedup (train wall time)")
        ax.set_title("scaling")
        ax.legend(fontsize=8)

    panels = {"psnr_vs_time": psnr_vs_time, "step_time": step_time, "memory": memory, "speedup": speedup}
    paths: Dict[str, Path] = {}
    for name, draw in panels.items():
        fig, ax = plt.subplots(figsize=(5, 4))
        draw(ax)
        fig.tight_layout()
        paths[name] = plot_dir / f"{name}.png"
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    for ax, draw in zip(axes.flat, panels.values()):
        draw(ax)
    fig.suptitle(f"{results.get('scene')}, {results.get('settings', {}).get('steps')} steps, {_device_line(results)}")
    fig.tight_layout()
    paths["summary"] = plot_dir / "summary.png"
    fig.savefig(paths["summary"], dpi=110)
    plt.close(fig)
    return paths


# --- quality gate ----------------------------------------------------------------------------------

# metric -> True when higher is better
METRIC_DIRECTIONS: Dict[str, bool] = {
    "psnr": True,
    "ssim": True,
    "lpips": False,
    "step_time_ms_median": False,
    "step_time_ms_mean": False,
    "train_wall_s": False,
    "train_peak_gib": False,
    "eval_peak_gib": False,
    "num_gaussians": False,
    "speedup": True,
}
DEFAULT_TOLERANCES = {"psnr": "0.5%", "ssim": "0.5%"}


@dataclass
class Tolerance:
    value: float
    relative: bool

    @classmethod
    def parse(cls, text: str) -> "Tolerance":
        text = text.strip()
        if text.endswith("%"):
            return cls(float(text[:-1]) / 100.0, True)
        return cls(float(text), False)

    def allowed(self, baseline: float) -> float:
        return abs(baseline) * self.value if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass
class GateFinding:
    run: str
    metric: str
    baseline: Optional[float]
    result: Optional[float]
    tolerance: str
    verdict: str  # ok, improved, regressed, missing, skipped

    @property
    def failed(self) -> bool:
        return self.verdict in ("regressed", "missing", "changed")


def parse_tolerances(items: Iterable[str], defaults: Optional[Dict[str, str]] = None) -> Dict[str, Tolerance]:
    """``["psnr=0.5%", "step_time_ms_median=10%", "lpips=0.002"]`` -> tolerances (defaults kept)."""
    merged = dict(DEFAULT_TOLERANCES if defaults is None else defaults)
    for item in items:
        if "=" not in item:
            raise ValueError(f"tolerance {item!r}: expected METRIC=VALUE (e.g. psnr=0.5% or lpips=0.002)")
        metric, value = item.split("=", 1)
        merged[metric.strip()] = value.strip()
    out = {}
    for metric, value in merged.items():
        if metric not in METRIC_DIRECTIONS:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRIC_DIRECTIONS)}")
        if value.lower() in ("off", "none", ""):
            continue
        out[metric] = Tolerance.parse(value)
    return out


def _runs_by_key(results: Dict[str, Any]) -> Dict[Tuple[str, int], Dict[str, Any]]:
    return {(r["method"], int(r["num_gpus"])): r for r in results.get("runs", [])}


def quality_gate(
    result: Dict[str, Any], baseline: Dict[str, Any], tolerances: Dict[str, Tolerance], two_sided: bool = False
) -> List[GateFinding]:
    """Compare every baseline run that succeeded with the same (method, GPUs) run of ``result``.

    A metric regresses when it is worse than the baseline by more than its tolerance (relative to the
    baseline value for ``x%``, absolute otherwise); ``two_sided`` also fails changes for the better.
    A run missing from ``result`` or not ``ok`` there fails; a metric the baseline lacks (LPIPS null)
    is skipped, one the result lacks fails.
    """
    findings: List[GateFinding] = []
    results_by_key = _runs_by_key(result)
    for key, base_run in _runs_by_key(baseline).items():
        if base_run.get("status") != "ok":
            continue
        name = run_tag(*key)
        run = results_by_key.get(key)
        if run is None or run.get("status") != "ok":
            status = "absent" if run is None else f"{run.get('status')}: {run.get('error')}"
            findings.append(GateFinding(name, "run", None, None, "-", "missing"))
            findings[-1].tolerance = status
            continue
        for metric, tol in tolerances.items():
            base_value = _finite_or_none(base_run.get(metric))
            value = _finite_or_none(run.get(metric))
            if base_value is None:
                findings.append(GateFinding(name, metric, None, value, str(tol), "skipped"))
                continue
            if value is None:
                findings.append(GateFinding(name, metric, base_value, None, str(tol), "missing"))
                continue
            higher_better = METRIC_DIRECTIONS[metric]
            worse_by = (base_value - value) if higher_better else (value - base_value)
            allowed = tol.allowed(base_value)
            if worse_by > allowed:
                verdict = "regressed"
            elif -worse_by > allowed:
                verdict = "changed" if two_sided else "improved"
            else:
                verdict = "ok"
            findings.append(GateFinding(name, metric, base_value, value, str(tol), verdict))
    return findings


def format_findings(findings: List[GateFinding]) -> str:
    rows = [("run", "metric", "baseline", "result", "change", "tolerance", "verdict")]
    for f in findings:
        change = "–"
        if f.baseline is not None and f.result is not None:
            rel = (f.result - f.baseline) / abs(f.baseline) * 100.0 if f.baseline else float("inf")
            change = f"{f.result - f.baseline:+.4g} ({rel:+.2f}%)"
        verdict = f.verdict.upper() if f.failed else f.verdict
        rows.append((f.run, f.metric, _fmt(f.baseline, ".4f"), _fmt(f.result, ".4f"), change, f.tolerance, verdict))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failed = [f for f in findings if f.failed]
    if not findings:
        lines.append("no comparable runs: the baseline has no successful run")
    lines.append(
        f"quality gate: {'FAILED' if failed or not findings else 'passed'} "
        f"({len(failed)} of {len(findings)} checks failed)"
    )
    return "\n".join(lines)


def gate_main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="quality_gate.py",
        description="Compare a benchmark results.json with a stored baseline; exit 1 on a regression.",
        epilog="Exit status: 0 within tolerance, 1 regression or missing run/metric, 2 bad input.",
    )
    parser.add_argument("result", type=Path, help="results.json of the run to check")
    parser.add_argument("baseline", type=Path, help="stored baseline results.json")
    parser.add_argument(
        "--tolerance", "-t", action="append", default=[], metavar="METRIC=VALUE",
        help="per-metric tolerance, relative ('0.5%%') or absolute ('0.002'); 'off' disables one. "
        f"Defaults: {', '.join(f'{k}={v}' for k, v in DEFAULT_TOLERANCES.items())}. "
        f"Metrics: {', '.join(METRIC_DIRECTIONS)}.",
    )  # fmt: skip
    parser.add_argument("--two-sided", action="store_true", help="also fail on improvements beyond the tolerance")
    args = parser.parse_args(argv)
    try:
        tolerances = parse_tolerances(args.tolerance)
        result = json.loads(args.result.read_text(encoding="utf8"))
        baseline = json.loads(args.baseline.read_text(encoding="utf8"))
    except (ValueError, OSError) as exc:
        print(f"quality gate: {exc}", file=sys.stderr)
        return 2
    findings = quality_gate(result, baseline, tolerances, two_sided=args.two_sided)
    print(format_findings(findings))
    return 1 if (not findings or any(f.failed for f in findings)) else 0


# --- command line ----------------------------------------------------------------------------------


def _parse_method_args(items: Iterable[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--method-args {item!r}: expected METHOD=ARGS")
        method, args = item.split("=", 1)
        out[method.strip()] = (out.get(method.strip(), "") + " " + args).strip()
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmark.py",
        description="Train and evaluate nerfstudio methods side by side; write JSON, Markdown and plots.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), help="nerfstudio method names")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1], help="GPU counts to run (W>1: multi-GPU mode)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps of every run")
    parser.add_argument("--skip-steps", type=int, default=100, help="first steps left out of the step-time median")
    parser.add_argument("--scene-args", default=FOX_SCENE_ARGS,
                        help="--data and dataparser arguments, passed through to ns-train (last)")  # fmt: skip
    parser.add_argument("--scene-name", default=None, help="name in the report (default: the --data folder)")
    parser.add_argument("--train-args", default="", help="extra ns-train method arguments for every method")
    parser.add_argument("--method-args", action="append", default=[], metavar="METHOD=ARGS",
                        help="extra ns-train arguments for one method (repeatable)")  # fmt: skip
    parser.add_argument("--multi-gpu-args", default="", help="extra ns-train arguments for W>1 runs ({W} = GPUs)")
    parser.add_argument("--device-type", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--launcher", choices=["torchrun", "spawn"], default="torchrun",
                        help="W>1: torchrun --nproc-per-node W, or ns-train's --machine.num-devices W")  # fmt: skip
    parser.add_argument("--eval-every", type=int, default=0,
                        help="also evaluate all images every N steps inside training (0: only ns-eval after)")  # fmt: skip
    parser.add_argument("--no-eval", action="store_true", help="skip ns-eval")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a child process is stopped")
    parser.add_argument("--no-prebuild", action="store_true",
                        help="do not build gsplat's CUDA extension before the runs (CUDA only)")  # fmt: skip
    parser.add_argument("--no-lpips-standin", action="store_true",
                        help="do not give methods that download AlexNet at construction (splatfacto) stand-in weights offline")
    parser.add_argument("--force-multi-gpu", action="store_true", help="also try methods not known to run on W>1")
    parser.add_argument("--reference", default=None, help="method the others are compared with")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/latest"), help="output folder")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="only re-render Markdown, plots and the README section from this results.json")  # fmt: skip
    parser.add_argument("--readme-relative-to", type=Path, default=Path("."),
                        help="folder the README section's plot link is relative to (the README's)")  # fmt: skip
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.from_json is not None:
        results = json.loads(args.from_json.read_text(encoding="utf8"))
        write_outputs(results, args.out, readme_plot_base=args.readme_relative_to)
        return 0
    if args.steps < 1:
        raise SystemExit("--steps must be at least 1")
    settings = BenchmarkSettings(
        methods=args.methods,
        gpus=args.gpus,
        steps=args.steps,
        skip_steps=args.skip_steps,
        scene_args=args.scene_args,
        scene_name=args.scene_name,
        train_args=args.train_args,
        method_args=_parse_method_args(args.method_args),
        multi_gpu_args=args.multi_gpu_args,
        device_type=args.device_type,
        launcher=args.launcher,
        eval_every=args.eval_every,
        run_eval=not args.no_eval,
        timeout_s=args.timeout,
        force_multi_gpu=args.force_multi_gpu,
        prebuild_gsplat=not args.no_prebuild,
        reference=args.reference,
        lpips_standin=not args.no_lpips_standin,
    )
    command = "python scripts/benchmark.py " + shlex.join(argv)
    results = run_benchmark(settings, args.out, command=command, readme_plot_base=args.readme_relative_to)
    ok = [r for r in results["runs"] if r["status"] == "ok"]
    log(f"done: {len(ok)} of {len(results['runs'])} runs ok")
    print(markdown_table(results), flush=True)
    return 0 if ok else 3  # failed runs are reported in the table; exit non-zero only when none worked
