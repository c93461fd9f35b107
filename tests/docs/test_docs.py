"""Every code example of README.md and docs/*.md runs, and the README stays a short user README.

Fenced blocks are ``bash``, ``python``, ``text`` (output samples, layouts: not run) or ``bibtex``.

- ``python`` blocks run as written, as scripts (``python block.py``) in a working folder that holds the
  quickstart's synthetic scene (``scene/``); a block whose first line is ``# NAME.py`` is a file that a
  shell block of the same page uses: it is written there as NAME.py instead.
- ``bash`` blocks run with ``bash -euo pipefail`` through the real CLI (``ns-train``, ``ns-eval``,
  ``ns-export``, ``torchrun``, ``scripts/*.py``) in a fresh working folder with ``scene/`` (made by
  ``python -m ns_splat_plus.demo``) and ``scripts/`` and ``configs/`` linked from the repository.
  Every ``ns-train`` command gets :data:`CPU_FLAGS` (and, where :data:`RUNS` gives one, a shorter
  ``--max-num-iterations``) inserted before its dataparser subcommand: tyro keeps the last value of
  an option, so commands written for a GPU run on the CPU in a few steps. :data:`RUNS` says what each
  block must leave behind, besides exit status 0 and no traceback.
- The blocks that cannot run on a CPU machine are listed in :data:`NOT_RUN`, each with its reason;
  the README's set-up block must be exactly the two commands ``.ci/run`` runs.

Each block is matched by a piece of its text; a block matched by no entry, or an entry that matches
no block (or several), fails the classification test, so no example goes unchecked.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import pytest
from clirun import ns_train_help
from doc_examples import (
    LANGUAGES,
    QUICKSTART,
    README,
    README_MAX_LINES,
    REPO,
    Block,
    _env,
    _workdir,
    all_blocks,
    code_blocks,
    pages,
    with_test_flags,
)  # fmt: skip

NOT_RUN: Dict[Tuple[str, str], str] = {
    ("README.md", "git clone <repository URL>"): "installs from the network into the current environment",
    ("docs/multi-gpu.md", "--machine.num-devices 2"): "needs several CUDA GPUs (and a second node)",
    (
        "docs/multi-gpu.md",
        "sbatch configs/slurm/single_node.sbatch",
    ): "GPU templates need GPUs; their CPU form runs under a local SLURM in tests/parallel/test_slurm.py",
    ("docs/speed-and-memory.md", "--large --views 1000"): "needs a CUDA GPU (gsplat renders 2M Gaussians)",
    ("docs/benchmarks.md", 'FOX="--data fox/'): "needs a CUDA GPU and real scenes (hours of training)",
    ("docs/development.md", "pytest -m gpu -q"): "needs a CUDA GPU",
    ("docs/development.md", "pytest -m slow -n 2"): "the test suite itself (.ci/run runs both tiers)",
}
"""(page, a piece of the block) -> why the block is not run here. Keep it short."""


# --- what each run must leave behind ---------------------------------------------------------------


def _runs(work: Path, method: str = "splat-plus") -> List[Path]:
    return sorted((work / "outputs" / "scene" / method).glob("*/"), key=lambda p: p.stat().st_mtime)


def _records(run: Path) -> List[dict]:
    return [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]


def _checkpoint_steps(run: Path) -> List[int]:
    return sorted(int(p.stem.split("-")[1]) for p in (run / "nerfstudio_models").glob("step-*.ckpt"))


def _ply_vertices(path: Path) -> int:
    header = path.read_bytes().split(b"end_header", 1)[0].decode("ascii", "replace")
    return int(re.search(r"element vertex (\d+)", header).group(1))


CALLBACK_LINE = re.compile(r"^step \d+: \d+ Gaussians, \d+ of \d+ over [0-9.e-]+$", re.MULTILINE)


def check_quickstart(work: Path, output: str) -> None:
    assert (work / "scene" / "images").is_dir() and any((work / "scene" / "images").iterdir())
    (run,) = _runs(work)
    assert (run / "config.yml").is_file() and _checkpoint_steps(run)
    assert _records(run)[0]["event"] == "start"
    assert (run / "training.png").read_bytes()[:4] == b"\x89PNG"  # the picture of the run the README names
    metrics = json.loads((run / "metrics.json").read_text())
    assert math.isfinite(metrics["results"]["psnr"]) and metrics["results"]["psnr"] > 5
    (ply,) = (run / "export").glob("*.ply")
    assert _ply_vertices(ply) > 0


def check_three_methods(work: Path, output: str) -> None:
    for method in ("splat-plus", "splat-plus-fast", "splat-plus-mcmc"):
        (run,) = _runs(work, method)
        assert f"method_name: {method}" in (run / "config.yml").read_text()
        assert _checkpoint_steps(run), method
        assert _records(run)[0]["strategy"] == ("mcmc" if method.endswith("mcmc") else "default")


def check_lite(work: Path, output: str) -> None:
    (run,) = _runs(work, "splat-plus-lite")
    assert _records(run)[0]["strategy"] == "efficient"
    (ply,) = (run / "export").glob("*.ply")
    assert _ply_vertices(ply) > 0


def check_torchrun_cpu(work: Path, output: str) -> None:
    assert "using 2" in output and "torchrun" in output, output[-3000:]
    # the documented default, --vis viewer: rank 0 started the viewer (its set-up reads every property
    # of the pipeline, which crashed rank 0 of every multi-rank run while it indexed every eval image)
    assert output.count("Viewer running locally at") == 1, output[-3000:]
    (run,) = _runs(work)
    ranks = [json.loads((run / "ranks" / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert ranks[0] == {**ranks[1], "rank": ranks[0]["rank"]} or _same_replicas(ranks), ranks


def _same_replicas(ranks: List[dict]) -> bool:
    keys = [k for k in ranks[0] if "checksum" in k or "gaussians" in k]
    return bool(keys) and all(ranks[0][k] == ranks[1][k] for k in keys)


def check_cli_callback(work: Path, output: str) -> None:
    (run,) = _runs(work)
    refines = [r for r in _records(run) if r["event"] == "refine"]
    assert refines, "no refine in the documented run: the callback had nothing to fire on"
    printed = CALLBACK_LINE.findall(output)
    assert len(printed) == len(refines), (printed, output[-3000:])


def check_eval(work: Path, output: str) -> None:
    run = _runs(work)[-1]
    results = json.loads((run / "metrics.json").read_text())
    scores = results["results"]  # nerfstudio's keys and splat-plus's per_image, split, memory
    assert math.isfinite(scores["psnr"]) and scores["per_image"] and scores["split"]["held_out"]


def check_resume(work: Path, output: str) -> None:
    first, resumed = _runs(work)
    assert max(_checkpoint_steps(resumed)) > max(_checkpoint_steps(first))
    assert (resumed / "config.yml").is_file()


def check_benchmark(work: Path, output: str) -> None:
    results = json.loads((work / "bench-cpu" / "results.json").read_text())
    (run,) = results["runs"]
    assert run["method"] == "splat-plus" and run["status"] == "ok" and math.isfinite(run["psnr"])
    assert (work / "bench-cpu" / "results.md").is_file()


def check_in_process_callback(work: Path, output: str) -> None:
    (run,) = _runs(work)
    refines = [r for r in _records(run) if r["event"] == "refine"]
    assert refines and len(CALLBACK_LINE.findall(output)) == len(refines), output[-3000:]


@dataclass
class Run:
    check: Callable[[Path, str], None]
    steps: Optional[int] = None  # --max-num-iterations given to every ns-train command of the block
    after_quickstart: bool = False  # starts from the working folder the README quickstart left
    files: Tuple[str, ...] = ()  # file blocks of the same page (``# NAME.py``) written first
    extra_env: Dict[str, str] = field(default_factory=dict)


RUNS: Dict[Tuple[str, str], Run] = {
    ("README.md", QUICKSTART): Run(check_quickstart, steps=20),
    ("README.md", "ns-train splat-plus-mcmc --data scene/ colmap"): Run(check_three_methods, steps=8),
    ("docs/multi-gpu.md", "torchrun --nproc-per-node 2"): Run(check_torchrun_cpu, steps=8),
    ("docs/training-health.md", "densify-callbacks my_hooks:on_densify"): Run(
        check_cli_callback, files=("my_hooks.py",)
    ),
    ("docs/training-health.md", "register_callback(events="): Run(check_in_process_callback),
    ("docs/evaluation-and-resume.md", "ns-eval --load-config"): Run(check_eval, after_quickstart=True),
    ("docs/evaluation-and-resume.md", "--load-dir $RUN/nerfstudio_models"): Run(
        check_resume, steps=30, after_quickstart=True
    ),
    ("docs/benchmarks.md", "--device-type cpu --methods splat-plus"): Run(check_benchmark),
    ("docs/strategies.md", "ns-train splat-plus-lite"): Run(check_lite, steps=96),
}
"""(page, a piece of the block) -> what running it must leave behind."""


def _matching(table: dict, block: Block) -> List[tuple]:
    return [key for key in table if key[0] == block.page and key[1] in block.text]


def runnable_blocks() -> List[Block]:
    return [b for b in all_blocks() if b.language in ("bash", "python") and not b.file_name and not _matching(NOT_RUN, b)
            and not (b.page == "README.md" and b.text.strip() == SETUP_BLOCK)]  # fmt: skip


SETUP_BLOCK = "bash scripts/setup.sh\n.venv/bin/python -m pytest"


# --- the rules ---------------------------------------------------------------------------------------


def test_readme_is_a_short_user_readme_without_dated_sections():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    headings = [line for line in lines if line.startswith("#") and not line.startswith("#!")]
    dated = [h for h in headings if "Results (" in h or re.search(r"\d{4}-\d{2}-\d{2}", h)]
    assert not dated, f"dated sections belong in benchmarks/: {dated}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = README.read_text(encoding="utf-8")
    docs = sorted((REPO / "docs").glob("*.md"))
    assert docs, "docs/ has no pages"
    missing = [p.name for p in docs if f"](docs/{p.name})" not in readme]
    assert not missing, f"README.md links no docs/{missing}"


def test_relative_links_point_at_files_that_exist():
    broken = []
    for page in [*pages(), REPO / "benchmarks" / "README.md"]:
        if not page.is_file():
            continue
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_readme_setup_commands_are_the_ones_ci_runs():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    readme = [b.text.strip() for b in code_blocks(README) if b.language == "bash"]
    assert SETUP_BLOCK in readme, "README.md lost its set-up block"
    for command in SETUP_BLOCK.splitlines():
        # as written, or with options that keep its tier (.ci/run adds workers, --durations, a time limit)
        ran = [line for line in ci if line == command or line.startswith(command + " -")]
        assert any(" -m " not in line[len(command) :] for line in ran), f".ci/run does not run {command!r}"


def test_every_block_is_fenced_with_a_known_language_and_classified():
    problems = []
    blocks = all_blocks()
    for block in blocks:
        if block.language not in LANGUAGES:
            problems.append(f"{block}: fence it as one of {sorted(LANGUAGES)}")
    for block in runnable_blocks():
        if len(_matching(RUNS, block)) != 1:
            problems.append(f"{block}: matches {len(_matching(RUNS, block))} entries of RUNS (one needed)")
    for table in (RUNS, NOT_RUN):
        for key in table:
            hits = [b for b in blocks if b.page == key[0] and key[1] in b.text]
            if len(hits) != 1:
                problems.append(f"{key} matches {len(hits)} blocks (one needed)")
    for key, run in RUNS.items():
        names = {b.file_name for b in blocks if b.page == key[0] and b.file_name}
        problems += [f"{key}: no '# {name}' block on {key[0]}" for name in run.files if name not in names]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_options_in_the_readme_table_exist(tmp_path_factory):
    """Every option of the README's options table is one `ns-train splat-plus --help` knows."""
    readme = README.read_text(encoding="utf-8")
    table = readme.split("| option | default | what it does |", 1)[1].split("\n\n", 1)[0]
    options = re.findall(r"^\| `(--[\w.-]+)", table, re.MULTILINE)
    assert len(options) >= 10, options
    help_text = ns_train_help(tmp_path_factory).stdout  # run once, also read by tests/cli/test_help.py, test_options.py
    unknown = [o for o in options if not re.search(re.escape(o.rstrip(".")) + r"[\s.{]", help_text)]
    assert not unknown, f"not in `ns-train splat-plus --help`: {unknown}"


# --- running the examples ----------------------------------------------------------------------------


def run_block(block: Block, work: Path, run: Run) -> str:
    if block.language == "python":
        script = work / "doc_example.py"
        script.write_text(block.text)
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", with_test_flags(block.text, run.steps)]
    proc = subprocess.run(command, cwd=work, env=_env(**run.extra_env), capture_output=True, text=True, timeout=1200)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block} failed ({proc.returncode}):\n{command[-1]}\n{output[-6000:]}"
    assert "Traceback" not in output, f"{block}:\n{output[-6000:]}"
    run.check(work, output)
    return output


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    """The README quickstart, run once: its working folder (scene/, one trained, evaluated, exported run)."""
    (block,) = [b for b in code_blocks(README) if QUICKSTART in b.text]
    work = _workdir(tmp_path_factory.mktemp("quickstart"), scene=None)
    run_block(block, work, RUNS[("README.md", QUICKSTART)])
    return work


def _params():
    return [pytest.param(b, id=f"{b.page}:{b.line}") for b in runnable_blocks()]


@pytest.mark.slow
@pytest.mark.parametrize("block", _params())
def test_example_runs(block: Block, quickstart: Path, tmp_path: Path):
    (key,) = _matching(RUNS, block)
    run = RUNS[key]
    if key == ("README.md", QUICKSTART):
        run.check(quickstart, "")  # ran in the fixture; checked again here, by its own name
        return
    if run.after_quickstart:
        work = tmp_path / "work"
        shutil.copytree(quickstart, work, symlinks=True)
    else:
        work = _workdir(tmp_path / "work", scene=quickstart / "scene")
    for name in run.files:
        (file_block,) = [b for b in code_blocks(REPO / block.page) if b.file_name == name]
        (work / name).write_text(file_block.text)
    run_block(block, work, run)
