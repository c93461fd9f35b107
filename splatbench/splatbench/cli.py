"""The benchmark's command line: argparse and main.

Entry point: :func:`main` (``scripts/benchmark.py``; ``python scripts/benchmark.py --help``). For every
method and GPU count (and repeat) it trains in a fresh process through :mod:`splatbench.probe`
(nerfstudio's real ``ns-train`` main with a recording trainer subclass; ``torchrun`` for several GPUs),
evaluates the result with nerfstudio's ``ns-eval`` main in another fresh process, and writes

    OUT/results.json        every run, the per-method summary over repeats, the settings, the environment, the command
    OUT/results.md          Markdown tables (+ comparison against the reference method)
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
* GPU busy time (``--gpu-busy-steps N``): torch.profiler, CUDA activity only, over N steps: the summed
  device time of kernels, memcpy and memset per step; ``wall_over_busy`` = median step / busy time.
* wall time: ``train`` = nerfstudio's ``Trainer.train`` (the training loop incl. the final
  checkpoint), ``process`` = the whole training process incl. start-up.
* memory: ``torch.cuda.max_memory_allocated`` around every iteration (reset before, read after),
  max over iterations (train peak); over the whole ns-eval process, model loading included (eval peak).
* quality: nerfstudio's ``ns-eval`` on the held-out split; LPIPS is null when its weights are not
  available offline (never 0).
* Gaussians: the model's count at the end; densification: summed refine events of the run's
  ``densification.jsonl`` (splat-plus writes it; methods without one get null).
* repeats (``--repeats N``): interleaved A1 B1 A2 B2 ...; mean and sample sd per method, difference of
  means to the reference method ± the half-width of its 90 % Welch confidence interval (and the standard
  error). ``--concurrent-quality``: repeats 2..N of the 1-GPU runs train at the same time on one GPU
  (their timing is discarded). ``--first-repeat K`` numbers
  a command's repeats from K; ``--from-json A/results.json B/results.json --out C`` merges the commands'
  runs of one experiment into one report (e.g. the timing runs from one machine, quality repeats from another);
  with ``--methods``, only those methods' runs are kept; with ``--renumber-repeats``, runs of several
  timed commands (each its own repeat 1) pool for quality: a later file's taken repeat is renumbered
  and its timing discarded, so that the report's timing stays side by side from one command.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Sequence

from splatbench.merge import merge_results, only_methods, with_reference
from splatbench.outputs import write_outputs
from splatbench.peer import check_template
from splatbench.report import markdown_table
from splatbench.runner import run_benchmark
from splatbench.settings import DEFAULT_METHODS, SCENE_ARGS_MISSING, BenchmarkSettings, log


def _parse_method_args(items: Iterable[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--method-args {item!r}: expected METHOD=ARGS")
        method, args = item.split("=", 1)
        out[method.strip()] = (out.get(method.strip(), "") + " " + args).strip()
    return out


def _parse_labelled(
    items: Iterable[str], methods: Sequence[str], option: str, usage: str, value_ok: Callable[[str], bool] = bool
) -> Dict[str, str]:
    """``LABEL=VALUE`` items of a repeatable option -> {label: value}; each label once, and listed in --methods
    (where it sets the run order); a value for which ``value_ok`` is false is refused with ``usage``."""
    out: Dict[str, str] = {}
    for item in items:
        label, _, value = item.partition("=")
        label, value = label.strip(), value.strip()
        if not label or not value_ok(value):
            raise SystemExit(f"{option} {item!r}: expected {usage}")
        if label in out:
            raise SystemExit(f"{option} {label!r} is given twice")
        if label not in methods:
            raise SystemExit(f"{option} {label!r}: list {label} in --methods too (it sets the run order)")
        out[label] = value
    return out


def _parse_variants(items: Iterable[str], methods: Sequence[str]) -> Dict[str, str]:
    """``LABEL=METHOD ARGS...`` -> {label: "METHOD ARGS..."}."""
    usage = ("LABEL=METHOD [ns-train arguments], e.g. "
             "'splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2'")  # fmt: skip
    return _parse_labelled(items, methods, "--variant", usage, value_ok=lambda spec: bool(spec) and spec[0] != "-")


def _parse_peers(items: Iterable[str], methods: Sequence[str], scene_args: str) -> Dict[str, str]:
    """``LABEL=COMMAND`` -> {label: command template}, each template checked against the scene arguments
    (:func:`splatbench.peer.check_template`)."""
    usage = "LABEL=COMMAND, e.g. 'fastgs=bash scripts/peers/fastgs/train_one.sh {data} {run_dir} {seed}'"
    peers = _parse_labelled(items, methods, "--peer", usage)
    for label, template in peers.items():
        problem = check_template(template, scene_args)
        if problem is not None:
            raise SystemExit(f"--peer {label!r}: {problem}")
    return peers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmark.py",
        description="Train and evaluate nerfstudio methods side by side; write JSON, Markdown and plots.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--methods", nargs="+", default=None,
                        help=f"nerfstudio method names (default: {' '.join(DEFAULT_METHODS)}); with --from-json: "
                        "keep only these methods' runs")  # fmt: skip
    parser.add_argument("--gpus", type=int, nargs="+", default=[1], help="GPU counts to run (W>1: multi-GPU mode)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps of every run")
    parser.add_argument("--skip-steps", type=int, default=100, help="first steps left out of the step-time median")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per method and GPU count, interleaved (A1 B1 A2 B2 ...); mean ± sd in the summary")  # fmt: skip
    parser.add_argument("--first-repeat", type=int, default=1, metavar="K",
                        help="number this command's repeats K, K+1, ... (K > 1: all of them are quality runs with "
                        "--concurrent-quality); combine with the command that made repeats 1..K-1 via --from-json A B")  # fmt: skip
    parser.add_argument("--concurrent-quality", action="store_true",
                        help="repeats 2..N of the 1-GPU runs train at the same time on one GPU (quality only: "
                        "their timing is discarded); repeat 1 of every method is timed alone")  # fmt: skip
    parser.add_argument("--seed-per-repeat", action="store_true",
                        help="repeat k trains with --machine.seed k and --pipeline.datamanager.train-cameras-sampling-seed k "
                        "(the initial Gaussians and the camera order differ between repeats)")  # fmt: skip
    parser.add_argument("--gpu-busy-steps", type=int, default=0,
                        help="profile N training steps with torch.profiler (CUDA only): GPU busy time per step "
                        "and wall/busy (0: off; null on CPU)")  # fmt: skip
    parser.add_argument("--gpu-busy-start", type=int, default=None,
                        help="first profiled step (default: the window centred on the steps after --skip-steps)")  # fmt: skip
    parser.add_argument("--gpu-busy-at", type=float, default=None, metavar="F",
                        help="instead of --gpu-busy-start: the window starts at F x each run's own step count "
                        "(after schedule scaling: the same phase for splat-plus-fast's shorter run)")  # fmt: skip
    parser.add_argument("--scene-args", default=None,
                        help="--data and dataparser arguments, passed through to ns-train (last); required to train, "
                        "e.g. '--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8'")  # fmt: skip
    parser.add_argument("--scene-name", default=None, help="name in the report (default: the --data folder)")
    parser.add_argument("--train-args", default="", help="extra ns-train method arguments for every method")
    parser.add_argument("--method-args", action="append", default=[], metavar="METHOD=ARGS",
                        help="extra ns-train arguments for one method (repeatable)")  # fmt: skip
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=METHOD ARGS",
                        help="a run named LABEL in --methods that trains METHOD with ARGS added, e.g. "
                        "'splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2' (repeatable)")  # fmt: skip
    parser.add_argument("--peer", action="append", default=[], metavar="LABEL=COMMAND",
                        help="a run named LABEL in --methods that runs another project's trainer: COMMAND with "
                        "{data} {run_dir} {steps} {seed} filled in, which writes {run_dir}/peer_results.json "
                        "(splatbench/splatbench/peer.py; 1 GPU only; repeatable)")  # fmt: skip
    parser.add_argument("--multi-gpu-args", default="", help="extra ns-train arguments for W>1 runs ({W} = GPUs)")
    parser.add_argument("--device-type", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--launcher", choices=["torchrun", "spawn"], default="torchrun",
                        help="W>1: torchrun --nproc-per-node W, or ns-train's --machine.num-devices W")  # fmt: skip
    parser.add_argument("--eval-every", type=int, default=0,
                        help="also evaluate all images every N steps inside training (0: only ns-eval after)")  # fmt: skip
    parser.add_argument("--no-eval", action="store_true", help="skip ns-eval")
    parser.add_argument("--export-ply", action="store_true",
                        help="after each run, ns-export gaussian-splat into its run directory; the report gives the "
                             "PLY's bytes and vertex count")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a child process is stopped")
    parser.add_argument("--no-prebuild", action="store_true",
                        help="do not build gsplat's CUDA extension before the runs (CUDA only)")  # fmt: skip
    parser.add_argument("--warm-caches", action=argparse.BooleanOptionalAction, default=None,
                        help="before the runs, start each method's training once on one GPU and end it after its "
                             "first step: what a first process compiles and caches on disk (Triton's kernels for "
                             "every image size the warmup visits, the driver's) is then there for every timed run, "
                             "whichever runs first; their walls are reported as the cold starts (default: on with "
                             "--device-type cuda, off on the CPU)")  # fmt: skip
    parser.add_argument("--no-compile-bytecode", action="store_true",
                        help="where nerfstudio has no Python bytecode on disk, do not compile it before the runs "
                             "(every process then compiles its imports at start-up)")  # fmt: skip
    parser.add_argument(
        "--no-lpips-standin",
        action="store_true",
        help="do not give methods that download AlexNet at construction (splatfacto) stand-in weights offline",
    )
    parser.add_argument("--force-multi-gpu", action="store_true", help="also try methods not known to run on W>1")
    parser.add_argument(
        "--reference",
        default=None,
        help="method the others are compared with (with --from-json: instead of the first file's)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("outputs/bench/latest"),
        help="output folder (to keep an experiment: a folder under benchmarks/ and a row in its README.md)",
    )
    parser.add_argument("--from-json", type=Path, nargs="+", default=None,
                        help="only re-render Markdown, plots and the README section from this results.json; "
                        "several: merge them first (runs of one experiment made by separate commands)")  # fmt: skip
    parser.add_argument("--renumber-repeats", action="store_true",
                        help="with several --from-json files: a later file's run whose method and repeat number are "
                        "taken gets the next free number and loses its timing (pooled for quality) instead of "
                        "stopping the merge")  # fmt: skip
    parser.add_argument("--data-copies", action="store_true",
                        help="with several --from-json files: their scene arguments may differ in the --data path "
                        "alone (one dataset copied to another place); the report lists the paths")  # fmt: skip
    parser.add_argument("--readme-relative-to", type=Path, default=Path("."),
                        help="folder the README section's plot link is relative to (the README's)")  # fmt: skip
    return parser


def settings_from_args(args: argparse.Namespace) -> BenchmarkSettings:
    methods = args.methods or list(DEFAULT_METHODS)
    if not (args.scene_args or "").strip():
        raise SystemExit(SCENE_ARGS_MISSING)
    if args.steps < 1:
        raise SystemExit("--steps must be at least 1")
    if args.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    if args.first_repeat < 1:
        raise SystemExit("--first-repeat must be at least 1")
    if args.gpu_busy_at is not None and not 0.0 <= args.gpu_busy_at < 1.0:
        raise SystemExit(f"--gpu-busy-at {args.gpu_busy_at}: a fraction of the run, 0 <= F < 1")
    if args.gpu_busy_at is not None and args.gpu_busy_start is not None:
        raise SystemExit("--gpu-busy-at and --gpu-busy-start both place the window: give one")
    variants, peers = _parse_variants(args.variant, methods), _parse_peers(args.peer, methods, args.scene_args)
    if set(variants) & set(peers):
        raise SystemExit(f"--peer and --variant both name {', '.join(sorted(set(variants) & set(peers)))}")
    return BenchmarkSettings(
        methods=methods,
        gpus=args.gpus,
        steps=args.steps,
        skip_steps=args.skip_steps,
        scene_args=args.scene_args,
        scene_name=args.scene_name,
        train_args=args.train_args,
        method_args=_parse_method_args(args.method_args),
        variants=variants,
        peers=peers,
        multi_gpu_args=args.multi_gpu_args,
        device_type=args.device_type,
        launcher=args.launcher,
        eval_every=args.eval_every,
        run_eval=not args.no_eval,
        export_ply=args.export_ply,
        timeout_s=args.timeout,
        force_multi_gpu=args.force_multi_gpu,
        prebuild_gsplat=not args.no_prebuild,
        compile_bytecode=not args.no_compile_bytecode,
        warm_caches=args.warm_caches,
        reference=args.reference,
        lpips_standin=not args.no_lpips_standin,
        repeats=args.repeats,
        first_repeat=args.first_repeat,
        concurrent_quality=args.concurrent_quality,
        seed_per_repeat=args.seed_per_repeat,
        gpu_busy_steps=args.gpu_busy_steps,
        gpu_busy_start=args.gpu_busy_start,
        gpu_busy_at=args.gpu_busy_at,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    command = "python scripts/benchmark.py " + shlex.join(argv)  # a merge's too: it regenerates the report
    for flag, given in (("--renumber-repeats", args.renumber_repeats), ("--data-copies", args.data_copies)):
        if given and (args.from_json is None or len(args.from_json) < 2):
            raise SystemExit(f"{flag} applies to a merge: give several results files with --from-json")
    if args.from_json is not None:
        sources = [str(path) for path in args.from_json]
        parts = [json.loads(path.read_text(encoding="utf8")) for path in args.from_json]
        if args.methods:  # a selection: e.g. the plain methods' runs of a file whose other runs are not this experiment
            unknown = [m for m in args.methods if not any(m in p.get("settings", {}).get("methods", []) for p in parts)]
            if unknown:
                raise SystemExit(f"--methods with --from-json: no results file runs {', '.join(unknown)}")
            kept = [(source, only_methods(part, args.methods)) for source, part in zip(sources, parts)]
            sources, parts = (
                [s for s, p in kept if p["runs"]],
                [p for _, p in kept if p["runs"]],
            )  # a file left empty is dropped
        try:
            results = (
                parts[0]
                if len(parts) == 1
                else merge_results(parts, sources, command, args.renumber_repeats, args.data_copies)
            )
            if args.reference:  # else the first file's reference
                results = with_reference(results, args.reference)
        except ValueError as error:
            raise SystemExit(f"--from-json: {error}") from None
        write_outputs(results, args.out, readme_plot_base=args.readme_relative_to)
        return 0
    settings = settings_from_args(args)
    results = run_benchmark(settings, args.out, command=command, readme_plot_base=args.readme_relative_to)
    ok = [r for r in results["runs"] if r["status"] == "ok"]
    log(f"done: {len(ok)} of {len(results['runs'])} runs ok")
    print(markdown_table(results), flush=True)
    return 0 if ok else 3  # failed runs are reported in the table; exit non-zero only when none worked


if __name__ == "__main__":  # python -m splatbench.cli (scaling_check's children)
    sys.exit(main())
