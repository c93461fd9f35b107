"""The README's Results section is the newest pre-registered tables (issue 30's, 5 runs per method), with
one ± convention (difference of means ± 90 % Welch half-width) and the time-against-PSNR picture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from splatbench.stats import welch_interval

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TABLES = {
    "fox": REPO / "benchmarks" / "2026-11-26-h100-fox-lite-table" / "results.json",
    "plush-dog": REPO / "benchmarks" / "2026-11-26-h100-plush-dog-lite-table" / "results.json",
}
METHODS = ("splatfacto", "splat-plus", "splat-plus-fast", "splat-plus-lite")
PICTURE = "benchmarks/2026-11-26-h100-fox-lite-table/plots/quality_vs_time_fox_plush_dog.png"


def _results_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]


def _cells(line: str) -> list:
    """A Markdown table row's cells, stripped, bold marks removed."""
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


def _rows() -> dict:
    """{(scene, method): the row's cells} of the Results table."""
    rows = {}
    for line in _results_section().splitlines():
        cells = _cells(line)
        if len(cells) >= 8 and cells[0] in TABLES:
            rows[(cells[0], cells[1])] = cells
    return rows


def _summary(scene: str) -> dict:
    results = json.loads(TABLES[scene].read_text())
    return {entry["method"]: entry["metrics"] for entry in results["summary"] if entry["num_gpus"] == 1}


@pytest.mark.parametrize("scene", sorted(TABLES))
@pytest.mark.parametrize("method", METHODS)
def test_each_row_is_the_pre_registered_table(scene: str, method: str):
    rows = _rows()
    assert (scene, method) in rows, f"the README's Results table has no {scene} / {method} row: {sorted(rows)}"
    cells, metrics = rows[(scene, method)], _summary(scene)
    reference = metrics["splatfacto"]
    assert metrics[method]["psnr"]["n"] == 5 and reference["psnr"]["n"] == 5
    wall = metrics[method]["train_wall_s"]["mean"]
    assert cells[3].startswith(f"{wall:.1f} s"), (cells[3], wall)
    if method != "splatfacto":
        ratio = wall / reference["train_wall_s"]["mean"]
        assert f"({ratio:.3f}x)" in cells[3], (cells[3], ratio)
    assert cells[6] == f"{metrics[method]['psnr']['mean']:.2f}", (cells[6], metrics[method]["psnr"])
    if method == "splatfacto":
        return
    interval = welch_interval(reference["psnr"], metrics[method]["psnr"], confidence=0.90)
    expected = f"{interval['diff']:+.2f} ± {interval['half_width']:.2f} dB".replace("-", "−")
    assert cells[7] == expected, (cells[7], expected)


def test_one_plus_minus_convention_stated_once():
    section = _results_section()
    assert section.count("90 % Welch") == 1, "state the ± convention once"
    assert not re.search(r"standard error|\bse\b|± sd|mean ± se", section), "a second ± convention"


def test_the_time_against_psnr_picture_is_linked_and_is_a_png():
    assert f"]({PICTURE})" in _results_section(), "the Results section does not show the picture"
    assert (REPO / PICTURE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


PEER = REPO / "benchmarks" / "2026-11-28-h200x2-fastgs-peer" / "results.json"
PEER_METHODS = {"splatfacto": "splatfacto", "splat-plus-lite": "splat-plus-lite", "FastGS": "fastgs"}


def _subsection(heading: str) -> str:
    """The text under the Results section's ``### <heading>``, to the next ``###``."""
    return _results_section().split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]


def _subsection_rows(heading: str, methods) -> dict:
    """{method: the row's cells} of the five-column table under the Results section's ``### <heading>``."""
    rows = {}
    for line in _subsection(heading).splitlines():
        cells = _cells(line)
        if len(cells) == 5 and cells[0] in methods:
            rows[cells[0]] = cells
    return rows


def _peer_rows() -> dict:
    """{method: the row's cells} of the "Beside FastGS" table."""
    return _subsection_rows("Beside FastGS", PEER_METHODS)


def test_the_fastgs_table_is_the_benchmark():
    results = json.loads(PEER.read_text())
    runs = results["runs"]
    summary = {e["method"]: e["metrics"] for e in results["summary"] if e["num_gpus"] == 1}
    timed = {r["method"]: r for r in runs if r["timing_valid"]}
    rows = _peer_rows()
    assert sorted(rows) == sorted(PEER_METHODS), rows
    reference_wall = timed["splatfacto"]["process_wall_s"]
    for shown, method in PEER_METHODS.items():
        cells, metrics = rows[shown], summary[method]
        assert metrics["psnr"]["n"] == 3, (method, metrics["psnr"])
        wall = timed[method]["process_wall_s"]
        assert cells[1].startswith(f"{wall:.1f} s"), (cells[1], wall)
        if method != "splatfacto":
            assert f"({wall / reference_wall:.3f}x)" in cells[1], (cells[1], wall / reference_wall)
        assert cells[2] == f"{metrics['num_gaussians']['mean'] / 1000:.0f}k", (cells[2], metrics["num_gaussians"])
        assert cells[3] == f"{metrics['psnr']['mean']:.2f}", (cells[3], metrics["psnr"])
        assert cells[4] == f"{metrics['ssim']['mean']:.4f}", (cells[4], metrics["ssim"])
    line = next(ln for ln in _results_section().splitlines() if ln.startswith("splat-plus-lite − FastGS:"))
    for metric, unit, digits in (("psnr", " dB", 2), ("ssim", "", 4)):
        interval = welch_interval(summary["fastgs"][metric], summary["splat-plus-lite"][metric], confidence=0.90)
        shown = f"{interval['diff']:+.{digits}f} ± {interval['half_width']:.{digits}f}{unit}".replace("-", "−")
        assert f"{metric.upper()} {shown}" in line, (line, shown)


ONE_COMMIT = {  # the README's scene -> (the report of its four methods at one commit, that benchmark's folder)
    "fox": (
        REPO / "benchmarks" / "2026-11-30-h200x2-four-methods-and-start-up-parts" / "fox" / "results.json",
        REPO / "benchmarks" / "2026-11-30-h200x2-four-methods-and-start-up-parts",
    ),
    "plush-dog": (
        REPO / "benchmarks" / "2026-12-02-h200-plush-dog-four-methods-at-ee87e3b" / "results.json",
        REPO / "benchmarks" / "2026-12-02-h200-plush-dog-four-methods-at-ee87e3b",
    ),
}
ONE_COMMIT_METHODS = {(scene, m): m for scene in ONE_COMMIT for m in METHODS}  # (scene, README row) -> report's
ONE_COMMIT_HEADING = "At one commit: process wall and GPU busy"


def _one_commit_rows() -> dict:
    """{(scene, method): the row's cells after the scene} of the "At one commit" table."""
    rows = {}
    for line in _subsection(ONE_COMMIT_HEADING).splitlines():
        cells = _cells(line)
        if len(cells) == 7 and tuple(cells[:2]) in ONE_COMMIT_METHODS:
            rows[tuple(cells[:2])] = cells[1:]
    return rows


def test_the_one_commit_table_is_the_benchmarks_timed_runs():
    results = {scene: json.loads(path.read_text()) for scene, (path, _) in ONE_COMMIT.items()}
    timed = {(scene, r["method"]): r for scene, report in results.items() for r in report["runs"] if r["timing_valid"]}
    for scene in ONE_COMMIT:
        sources = {run["environment"]["ns-splat-plus-source"] for (s, _), run in timed.items() if s == scene}
        assert len(sources) == 1, f"{scene}: every run of its rows from one source tree: {sources}"
    rows = _one_commit_rows()
    assert sorted(rows) == sorted(ONE_COMMIT_METHODS), rows
    for (scene, shown), method in ONE_COMMIT_METHODS.items():
        cells, run = rows[(scene, shown)], timed[(scene, method)]
        reference_wall = timed[(scene, "splatfacto")]["process_wall_s"]
        assert cells[1].startswith(f"{run['process_wall_s']:.1f} s"), (cells[1], run["process_wall_s"])
        if method != "splatfacto":
            assert f"({run['process_wall_s'] / reference_wall:.3f}x)" in cells[1], cells[1]
        assert cells[2] == f"{run['step_time_ms_median']:.2f} ms", (cells[2], run["step_time_ms_median"])
        assert cells[3] == f"{run['gpu_busy_ms']:.2f} ms", (cells[3], run["gpu_busy_ms"])
        assert cells[4] == f"{run['num_gaussians'] / 1000:.0f}k", (cells[4], run["num_gaussians"])
        assert cells[5] == f"{run['train_peak_gib']:.2f} GiB", (cells[5], run["train_peak_gib"])
    for scene, (_, folder) in ONE_COMMIT.items():
        commit = (folder / "raw" / "commit.txt").read_text().strip()
        named = f"{scene} at `{commit[:7]}`" in _subsection(ONE_COMMIT_HEADING)
        assert named, f"{scene}: the subsection names another commit"


FIVE_RUNS_BENCHMARK = REPO / "benchmarks" / "2026-11-30-h200x2-quality-five-runs"
FIVE_RUNS = {
    "fox": FIVE_RUNS_BENCHMARK / "fox" / "results.json",
    "plush-dog": FIVE_RUNS_BENCHMARK / "plush-dog" / "results.json",
}


def test_the_five_run_lite_against_splatfacto_table_is_the_benchmark():
    """The table of splat-plus-lite against splatfacto, 5 runs against 5 at one commit: each cell from the reports."""
    rows = {}
    for line in _subsection(ONE_COMMIT_HEADING).splitlines():
        cells = _cells(line)
        if len(cells) == 5 and cells[0] in FIVE_RUNS:
            rows[cells[0]] = cells
    assert sorted(rows) == sorted(FIVE_RUNS), rows
    for scene, path in FIVE_RUNS.items():
        report = json.loads(path.read_text())
        summary = {e["method"]: e["metrics"] for e in report["summary"] if e["num_gpus"] == 1}
        lite, reference = summary["splat-plus-lite"], summary["splatfacto"]
        assert lite["psnr"]["n"] == reference["psnr"]["n"] == 5, scene
        sources = {r["environment"]["ns-splat-plus-source"] for r in report["runs"]}
        assert len(sources) == 1, f"{scene}: runs of different source trees pooled: {sources}"
        cells = rows[scene]
        for column, metric, unit, digits in ((1, "psnr", " dB", 2), (2, "ssim", "", 4)):
            interval = welch_interval(reference[metric], lite[metric], confidence=0.90)
            shown = f"{interval['diff']:+.{digits}f} ± {interval['half_width']:.{digits}f}{unit}".replace("-", "−")
            assert cells[column] == shown, (scene, cells[column], shown)
        gaussians = [m["num_gaussians"]["mean"] for m in (lite, reference)]
        expected = f"{gaussians[0] / 1000:.0f}k against {gaussians[1] / 1000:.0f}k ({gaussians[0] / gaussians[1]:.3f}x)"
        assert cells[3] == expected, (scene, cells[3], expected)
        peaks = [m["train_peak_gib"]["mean"] for m in (lite, reference)]
        expected = f"{peaks[0]:.2f} against {peaks[1]:.2f} GiB ({peaks[0] / peaks[1]:.3f}x)"
        assert cells[4] == expected, (scene, cells[4], expected)


LITE_AT_HEAD = REPO / "benchmarks" / "2026-12-01-h200-lite-against-splatfacto-and-graph-divergence"


def test_the_lite_against_splatfacto_paragraph_is_the_benchmark():
    """The paragraph of lite against splatfacto at a later commit: each figure from its reports and start-up records."""
    paragraph = next(p for p in _subsection(ONE_COMMIT_HEADING).split("\n\n") if LITE_AT_HEAD.name in p)
    paragraph = " ".join(paragraph.split())
    commit = (LITE_AT_HEAD / "raw" / "commit.txt").read_text().strip()
    assert f"at `{commit[:7]}`" in paragraph, paragraph
    for scene, report in (("fox", "fox"), ("plush-dog", "plush-dog")):
        runs = {r["method"]: r for r in json.loads((LITE_AT_HEAD / report / "results.json").read_text())["runs"]}
        lite, reference = runs["splat-plus-lite"], runs["splatfacto"]
        assert lite["timing_valid"] and reference["timing_valid"], scene
        ratio = lite["process_wall_s"] / reference["process_wall_s"]
        shown = f"{scene} {reference['process_wall_s']:.1f} s against **{lite['process_wall_s']:.1f} s ({ratio:.3f}x)**"
        assert shown in paragraph, (shown, paragraph)
        for run in (lite, reference):
            assert f"{run['step_time_ms_median']:.2f}" in paragraph, (scene, run["method"], run["step_time_ms_median"])
            assert f"{run['gpu_busy_ms']:.2f} ms" in paragraph, (scene, run["method"], run["gpu_busy_ms"])
        startup = LITE_AT_HEAD / "raw" / f"startup_{'dog' if scene == 'plush-dog' else scene}_splat-plus-lite.json"
        seconds = json.loads(startup.read_text())["seconds_to_first_step_end"]
        assert f"{seconds:.1f} s" in paragraph, (scene, seconds)
