"""The benchmark itself: plan the runs, train and evaluate each in fresh processes, collect results.

Entry point: :func:`run_benchmark` (what ``scripts/benchmark.py`` runs through :mod:`.cli`); the
pieces: :func:`plan_batches` (which runs, in which order, which of them at the same time),
:func:`train_command` / :func:`eval_command` (the child commands), :func:`run_one` (one run).

Order: for every GPU count, repeat k of every method before repeat k + 1 (A1 B1 A2 B2 ...), each
repeat in its own run directory, one run at a time. ``concurrent_quality``: repeat 1 of every method
is the timing run (alone, as above); repeats 2..N of the 1-GPU runs of all methods then train at the
same time on the one GPU, each is evaluated as soon as its training ends (while the others still
train), and their timing figures are discarded.
``first_repeat`` numbers a command's repeats from K, so that repeats made by separate commands (on
separate machines: the timing runs in one, the quality repeats in another) combine with
:func:`splatbench.merge.merge_results` into one report. ``warm_caches``: before all of it, each method's
training once, ended after its first step (:func:`splatbench.cache_warming.warm_caches`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import shlex
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from splatbench import cache_warming, children
from splatbench.document import results_document
from splatbench.outputs import write_outputs, write_results
from splatbench.peer import peer_command, read_peer_results
from splatbench.ply_export import export_run
from splatbench.results import (
    bytes_to_gib,
    collect_train,
    discard_timing,
    empty_record,
    load_json,
    read_densification,
    read_eval_metrics,
)
from splatbench.settings import (
    MULTI_GPU_METHODS,
    PROBE_MODULE,
    SCENE_ARGS_MISSING,
    BenchmarkSettings,
    log,
    run_tag,
)


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def train_command(settings: BenchmarkSettings, method: str, num_gpus: int, run_dir: Path, repeat: int = 1) -> List[str]:
    """The command that trains ``method`` (a name in ``settings.methods``: a method or a variant's
    label) on ``num_gpus`` GPUs through the probe; ``repeat``: its number (the seeds, with
    ``settings.seed_per_repeat``)."""
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
    extra = (
        shlex.split(settings.train_args)
        + settings.variant_args(method)
        + shlex.split(settings.method_args.get(method, ""))
    )
    if settings.seed_per_repeat:
        extra += ["--machine.seed", str(repeat), "--pipeline.datamanager.train-cameras-sampling-seed", str(repeat)]
    if num_gpus > 1:
        extra += shlex.split(settings.multi_gpu_args.replace("{W}", str(num_gpus)))
    probe_args = ["train", settings.nerfstudio_method(method), *common, *extra, *shlex.split(settings.scene_args)]
    if num_gpus > 1 and settings.launcher == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(num_gpus),
            "-m", PROBE_MODULE, *probe_args,
        ]  # fmt: skip
    return [sys.executable, "-m", PROBE_MODULE, *probe_args]


def eval_command(config_path: Path, output_path: Path) -> List[str]:
    return [
        sys.executable,
        "-m",
        PROBE_MODULE,
        "eval",
        "--load-config",
        str(config_path),
        "--output-path",
        str(output_path),
    ]


@dataclass
class PlannedRun:
    method: str
    num_gpus: int
    repeat: int
    tag: str
    concurrent: bool = False  # trains at the same time as the other runs of its batch (timing discarded)


def plan_batches(settings: BenchmarkSettings) -> List[List[PlannedRun]]:
    """The runs in order; each inner list starts together (one run, or a concurrent quality batch)."""
    repeats, first = max(1, settings.repeats), max(1, settings.first_repeat)
    numbered = repeats > 1 or first > 1  # tags carry the repeat (-r2) unless there is only repeat 1
    batches: List[List[PlannedRun]] = []
    for num_gpus in sorted(set(settings.gpus)):
        together: List[PlannedRun] = []
        for k in range(first, first + repeats):
            for method in settings.methods:
                run = PlannedRun(method, num_gpus, k, run_tag(method, num_gpus, k if numbered else None))
                if settings.concurrent_quality and num_gpus == 1 and k > 1:
                    run.concurrent = True
                    together.append(run)
                else:
                    batches.append([run])
        if together:
            batches.append(together)
    return batches


def run_dir_for(out_dir: Path, plan: PlannedRun) -> Path:
    """Each run (each repeat) in its own nerfstudio output directory."""
    return out_dir / "runs" / plan.tag


class RunJob:
    """One run: its record, its directories, and the train and eval phases (in that order)."""

    def __init__(self, settings: BenchmarkSettings, plan: PlannedRun, out_dir: Path) -> None:
        self.settings, self.plan, self.out_dir = settings, plan, out_dir
        self.record = empty_record(plan.method, plan.num_gpus, plan.repeat)
        self.record["steps_requested"] = settings.steps
        self.tag = plan.tag
        self.base_dir: Optional[Path] = None
        self.standin: Optional[Path] = None

    def prepare(self) -> bool:
        """False when the run is not made (recorded as unsupported)."""
        settings, method, num_gpus, record = self.settings, self.plan.method, self.plan.num_gpus, self.record
        if num_gpus > 1 and method in settings.peers:
            record["status"] = "unsupported"
            record["error"] = f"{method} is a peer (--peer): the benchmark runs peers on one GPU only; not run"
            log(f"{self.tag}: skipped, {record['error']}")
            return False
        if (
            num_gpus > 1
            and settings.nerfstudio_method(method) not in MULTI_GPU_METHODS
            and not settings.force_multi_gpu
        ):
            record["status"] = "unsupported"
            record["error"] = f"{method} does not train on several GPUs (crashes at start); not run"
            log(f"{self.tag}: skipped, {record['error']}")
            return False
        if num_gpus > 1 and settings.device_type == "cuda":
            visible = children.visible_gpu_ids()
            if len(visible) < num_gpus:
                record["status"] = "unsupported"
                record["error"] = f"{num_gpus} GPUs asked for, {len(visible)} available"
                log(f"{self.tag}: skipped, {record['error']}")
                return False
        self.run_dir = run_dir_for(self.out_dir, self.plan)
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir(parents=True)
        self.standin = (
            children.lpips_standin_home(self.out_dir)
            if children.uses_lpips_standin(settings, method) and method not in settings.peers
            else None
        )
        if self.standin is not None:
            record["lpips_note"] = (
                "AlexNet weights not available offline: stand-in weights, so evaluation computes LPIPS "
                "(its memory counts) but the value is not reported"
            )
        return True

    def train(self, sharing: int = 0) -> bool:
        """Train; False when training failed (the record says why). ``sharing``: runs alongside."""
        if self.plan.method in self.settings.peers:
            self.train_peer(sharing)
            return False  # a peer scores itself: nothing runs after it
        settings, record, tag = self.settings, self.record, self.tag
        probe_path = self.run_dir / "benchmark_probe_train.json"
        command = train_command(settings, self.plan.method, self.plan.num_gpus, self.run_dir, self.plan.repeat)
        record["train_command"] = shlex.join(command)
        unit = "GPU(s)" if settings.device_type == "cuda" else "CPU process(es)"
        log_path = self.out_dir / "logs" / f"{tag}.train.log"
        log(f"{tag}: training {settings.steps} steps on {self.plan.num_gpus} {unit} (log: {log_path})")
        env = children.child_env(
            settings, self.plan.num_gpus, probe_path, self.standin, method=settings.nerfstudio_method(self.plan.method)
        )
        child = self._run_training_child(
            command, log_path, env, sharing, collect=lambda: collect_train(record, probe_path, settings.effective_skip)
        )
        if child is None:
            return False
        configs = sorted(self.run_dir.rglob("config.yml"))
        if not configs:
            record["status"] = "failed"
            record["error"] = "training ended without a config.yml"
            return False
        self.config_path = configs[0]
        self.base_dir = configs[0].parent
        record["run_dir"] = str(self.base_dir)
        record["densification"] = read_densification(self.base_dir / "densification.jsonl")
        log(
            f"{tag}: trained in {child.wall_s:.0f} s, median step "
            f"{_fmt(record.get('step_time_ms_median'), '.2f')} ms, {record.get('num_gaussians')} Gaussians"
        )
        if not settings.run_eval:
            record["status"] = "ok"
        return True

    def _run_training_child(
        self,
        command: List[str],
        log_path: Path,
        env: Dict[str, str],
        sharing: int,
        collect: Optional[Callable[[], None]] = None,
    ) -> Optional[children.ChildResult]:
        """Run a training command; its wall and log (and ``collect``'s figures) go into the record, timing
        discarded where the run shared its device. None when it failed or timed out (the record says why)."""
        settings, record, tag = self.settings, self.record, self.tag
        child = children.run_child(command, log_path, env, settings.timeout_s, tag)
        record["process_wall_s"] = child.wall_s
        record["train_log"] = str(child.log_path)
        if collect is not None:
            collect()
        if sharing:
            discard_timing(record, f"trained at the same time as {sharing} other run(s) on the same device")
        elif self.plan.concurrent:  # alone in its batch, but a quality repeat: other commands may share the GPU
            discard_timing(record, "a quality repeat (--concurrent-quality): not timed alone")
        if child.timed_out or child.returncode != 0:
            record["status"] = "timeout" if child.timed_out else "failed"
            reason = children.failure_reason(child.log_path)
            record["error"] = f"timed out after {settings.timeout_s:.0f} s" if child.timed_out else reason
            log(f"{tag}: {record['status']} after {child.wall_s:.0f} s: {record['error']}")
            return None
        return child

    def train_peer(self, sharing: int) -> None:
        """Run a peer's command (:mod:`splatbench.peer`) and read what it reported; its process wall is the
        one it reports, else the whole command's."""
        settings, record, tag = self.settings, self.record, self.tag
        seed = self.plan.repeat if settings.seed_per_repeat else None
        command = peer_command(
            settings.peers[self.plan.method], settings.scene_args, self.run_dir, settings.steps, seed
        )
        record["train_command"] = shlex.join(command)
        log_path = self.out_dir / "logs" / f"{tag}.train.log"
        log(f"{tag}: running the peer's command (log: {log_path})")
        env = children.child_env(settings, 1, self.run_dir / "unused_probe.json", None, method=self.plan.method)
        record["run_dir"] = str(self.run_dir)
        child = self._run_training_child(command, log_path, env, sharing)
        if child is None:
            return
        values, problem = read_peer_results(self.run_dir)
        if problem is not None:
            record["status"], record["error"] = "failed", problem
            log(f"{tag}: failed: {problem}")
            return
        if record.get("timing_valid") is False:  # shared the device: no timing figure at all
            for key in ("train_wall_s", "process_wall_s"):
                values.pop(key, None)
        else:
            record["command_wall_s"] = child.wall_s  # the whole command (a process_wall_s it reports replaces it)
        record.update(values)
        record["status"] = "ok"
        log(
            f"{tag}: ran in {child.wall_s:.0f} s, PSNR {_fmt(record['psnr'], '.3f')} SSIM {_fmt(record['ssim'], '.4f')}"
        )

    def after_training(self) -> None:
        """ns-eval (unless --no-eval), then the PLY export (--export-ply: :mod:`splatbench.ply_export`)."""
        if self.settings.run_eval:
            self.evaluate()
        if self.settings.export_ply:
            env = children.child_env(self.settings, 1, self.base_dir / "benchmark_probe_export.json", self.standin,
                                     method=self.settings.nerfstudio_method(self.plan.method))  # fmt: skip
            export_run(self.record, self.tag, self.config_path, self.out_dir, env, self.settings.timeout_s)

    def evaluate(self) -> None:
        settings, record, tag = self.settings, self.record, self.tag
        log(f"{tag}: evaluating with ns-eval")
        eval_json = self.base_dir / "ns_eval.json"
        eval_probe = self.base_dir / "benchmark_probe_eval.json"
        child = children.run_child(
            eval_command(self.config_path, eval_json), self.out_dir / "logs" / f"{tag}.eval.log",
            children.child_env(settings, 1, eval_probe, self.standin, method=settings.nerfstudio_method(self.plan.method)), settings.timeout_s, tag,
        )  # fmt: skip
        record["eval_log"] = str(child.log_path)
        if child.timed_out or child.returncode != 0 or not eval_json.is_file():
            record["status"] = "eval-failed"
            record["error"] = "ns-eval: " + children.failure_reason(child.log_path)
            log(f"{tag}: ns-eval failed: {record['error']}")
            return
        record.update(read_eval_metrics(eval_json))
        if self.standin is not None:
            record["lpips"] = record["lpips_std"] = None  # computed with stand-in weights: meaningless
        probe = load_json(eval_probe) or {}
        if record.get("timing_valid") is not False:
            record["eval_wall_s"] = probe.get("eval_s", child.wall_s)
        record["eval_peak_gib"] = bytes_to_gib(probe.get("eval_peak_bytes"))
        if isinstance(probe.get("per_image"), list):  # each held-out image's metrics (bench.per_image)
            record["per_image"] = probe["per_image"]
        if record.get("num_gaussians") is None:
            record["num_gaussians"] = record.get("eval_num_gaussians")
        record["status"] = "ok"
        log(
            f"{tag}: PSNR {_fmt(record['psnr'], '.3f')} SSIM {_fmt(record['ssim'], '.4f')} "
            f"LPIPS {_fmt(record['lpips'], '.4f')}"
        )


def run_batch(
    settings: BenchmarkSettings,
    batch: List[PlannedRun],
    out_dir: Path,
    on_run_end: Optional[Callable[[List[Dict[str, Any]]], None]] = None,
) -> List[Dict[str, Any]]:
    """One run alone, or a concurrent batch: all start training at the same time, and each runs its
    ns-eval as soon as its own training ends (not one by one after the slowest training).

    Args:
        on_run_end: called with the records of this batch's runs that have ended so far (trained,
            evaluated, exported, or failed), each time one ends; one call at a time.
    """
    jobs = [RunJob(settings, plan, out_dir) for plan in batch]
    ready = [job for job in jobs if job.prepare()]
    if len(batch) == 1 and not batch[0].concurrent:  # a timed run: in this thread, nothing beside it
        if ready and ready[0].train():
            ready[0].after_training()
        return [job.record for job in jobs]
    log(f"{len(ready)} quality runs at the same time: " + ", ".join(job.tag for job in ready))
    ended: List[Dict[str, Any]] = []
    ending = threading.Lock()

    def train_and_score(job: RunJob) -> None:
        if job.train(sharing=len(ready) - 1):
            job.after_training()
        with ending:
            ended.append(job.record)
            if on_run_end is not None:
                on_run_end(list(ended))

    with ThreadPoolExecutor(max_workers=max(1, len(ready))) as pool:
        list(pool.map(train_and_score, ready))
    return [job.record for job in jobs]


def run_one(
    settings: BenchmarkSettings, method: str, num_gpus: int, out_dir: Path, repeat: Optional[int] = None
) -> Dict[str, Any]:
    """Train and evaluate one run alone (``repeat``: its number, in the tag and the run directory)."""
    return run_batch(settings, [PlannedRun(method, num_gpus, repeat or 1, run_tag(method, num_gpus, repeat))], out_dir)[
        0
    ]


def environment_summary(runs: List[Dict[str, Any]], device_type: str) -> Dict[str, Any]:
    """Versions and GPU name: from a run's probe when one succeeded, else from this process."""
    for r in runs:
        if r.get("environment"):
            env = dict(r["environment"])
            break
    else:
        from splatbench.recorder import environment_info

        env = environment_info(None)
        env["device_type"] = device_type
    env["gpus_visible"] = len(children.visible_gpu_ids()) if device_type == "cuda" else 0
    env["hostname"] = os.uname().nodename
    return env


def run_benchmark(
    settings: BenchmarkSettings, out_dir: Path, command: Optional[str] = None, readme_plot_base: Optional[Path] = None
) -> Dict[str, Any]:
    if not settings.scene_args.strip():
        raise ValueError(SCENE_ARGS_MISSING)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now().astimezone()
    batches = plan_batches(settings)
    tags = [", ".join(run.tag for run in batch) + (" (together)" if len(batch) > 1 else "") for batch in batches]
    log(f"{sum(len(b) for b in batches)} runs: " + "; ".join(tags) + f"; output in {out_dir}")
    from splatbench.recorder import bytecode_cached

    if bytecode_cached() is False:
        _compile_bytecode_once(settings)
    if settings.device_type == "cuda" and settings.prebuild_gsplat:
        children.prebuild_gsplat(out_dir, settings.timeout_s)
    warm = cache_warming.warm_caches(settings, out_dir, train_command) if settings.warms_caches else None
    runs: List[Dict[str, Any]] = []
    for index, batch in enumerate(batches, 1):
        log(f"batch {index}/{len(batches)}: {tags[index - 1]}")
        keep = functools.partial(_keep_partial, settings, list(runs), started, command, out_dir, warm)
        runs.extend(run_batch(settings, batch, out_dir, on_run_end=keep))
        # partial results survive: after every batch, and within a concurrent batch after every run
        write_results(build_results(settings, runs, started, command, warm), out_dir)
    results = build_results(settings, runs, started, command, warm)
    write_outputs(results, out_dir, readme_plot_base=readme_plot_base)
    return results


def _compile_bytecode_once(settings: BenchmarkSettings) -> None:
    """Where nerfstudio has no bytecode on disk, every process would compile its imports at start-up (about
    10 s each on the GPU machines), which a user's installation does not pay: compile it once first
    (:mod:`splatbench.bytecode`), unless --no-compile-bytecode."""
    if not settings.compile_bytecode:
        log(
            "warning: nerfstudio has no compiled bytecode where this Python reads it, so every process start-up "
            "includes compiling it (about 10 s on the GPU machines); without --no-compile-bytecode the "
            "benchmark compiles it first"
        )
        return
    from splatbench import bytecode

    roots = bytecode.bytecode_roots()
    log(
        "nerfstudio has no compiled bytecode where this Python reads it: compiling "
        + ", ".join(str(r) for r in roots)
        + " once, so that no process start-up pays it"
    )
    ok, seconds = bytecode.compile_bytecode(roots)
    log(
        f"bytecode compiled in {seconds:.0f} s"
        + ("" if ok else " (some files did not compile: compileall listed them above)")
    )


def _keep_partial(
    settings: BenchmarkSettings,
    earlier: List[Dict[str, Any]],
    started: _dt.datetime,
    command: Optional[str],
    out_dir: Path,
    warm: Optional[List[Dict[str, Any]]],
    ended: List[Dict[str, Any]],
) -> None:
    """results.json with the earlier batches' runs and the runs of this batch that have ended."""
    write_results(build_results(settings, earlier + ended, started, command, warm), out_dir)


def build_results(
    settings: BenchmarkSettings,
    runs: List[Dict[str, Any]],
    started: _dt.datetime,
    command: Optional[str],
    warm: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    results = results_document(
        asdict(settings) | {"effective_skip_steps": settings.effective_skip}, runs, settings.reference_method(),
        environment_summary(runs, settings.device_type), created=started.isoformat(timespec="seconds"),
        finished=_dt.datetime.now().astimezone().isoformat(timespec="seconds"), command=command,
        scene=settings.describe_scene(),
    )  # fmt: skip
    if warm is not None:
        results["cache_warm_runs"] = warm
    return results
