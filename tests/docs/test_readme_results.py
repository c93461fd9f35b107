"""The README's Results section is the newest pre-registered tables (issue 30's, 5 runs per method), with
one ± convention (difference of means ± 90 % Welch half-width) and the time-against-PSNR picture."""

from __future__ import annotations

import json
import re
import statistics
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


ONE_COMMIT = {  # the README's scene -> the benchmark of its four methods at one commit
    "fox": REPO / "benchmarks" / "2026-11-29-h200-fox-four-methods-warmup-at-every-size" / "results.json",
    "plush-dog": REPO / "benchmarks" / "2026-11-29-h200-plush-dog-four-methods-and-fused-lite" / "results.json",
}
ONE_COMMIT_METHODS = {  # (scene, the README's row) -> the benchmark's method (plush-dog's lite: the fused-loss variant)
    **{
        (scene, m): m
        for scene in ONE_COMMIT
        for m in ("splatfacto", "splat-plus", "splat-plus-fast", "splat-plus-lite")
    },
    ("plush-dog", "splat-plus-lite"): "lite-fused",
}
ONE_COMMIT_HEADING = "At one commit: process wall"


def _one_commit_text() -> str:
    """The one-commit subsection's text on one line (its sentences wrap)."""
    return " ".join(_subsection(ONE_COMMIT_HEADING).split())


def _one_commit_rows() -> dict:
    """{(scene, method): the row's cells after the scene} of the "At one commit" table."""
    rows = {}
    for line in _subsection(ONE_COMMIT_HEADING).splitlines():
        cells = _cells(line)
        if len(cells) == 6 and tuple(cells[:2]) in ONE_COMMIT_METHODS:
            rows[tuple(cells[:2])] = cells[1:]
    return rows


def test_the_one_commit_table_is_the_benchmarks_timed_runs():
    results = {scene: json.loads(path.read_text()) for scene, path in ONE_COMMIT.items()}
    timed = {(scene, r["method"]): r for scene, report in results.items() for r in report["runs"] if r["timing_valid"]}
    rows = _one_commit_rows()
    assert sorted(rows) == sorted(ONE_COMMIT_METHODS), rows
    for (scene, shown), method in ONE_COMMIT_METHODS.items():
        cells, run = rows[(scene, shown)], timed[(scene, method)]
        reference_wall = timed[(scene, "splatfacto")]["process_wall_s"]
        assert cells[1].startswith(f"{run['process_wall_s']:.1f} s"), (cells[1], run["process_wall_s"])
        if method != "splatfacto":
            assert f"({run['process_wall_s'] / reference_wall:.3f}x)" in cells[1], cells[1]
        assert cells[2] == f"{run['step_time_ms_median']:.2f} ms", (cells[2], run["step_time_ms_median"])
        assert cells[3] == f"{run['num_gaussians'] / 1000:.0f}k", (cells[3], run["num_gaussians"])
        assert cells[4] == f"{run['train_peak_gib']:.2f} GiB", (cells[4], run["train_peak_gib"])
    # lite's preset is the benchmark's lite-fused: the fused loss on (method.py's LITE_FUSED_LOSS)
    from ns_splat_plus.method import splat_plus_lite

    assert splat_plus_lite.config.pipeline.model.fused_loss
    runs = results["plush-dog"]["runs"]
    line = _one_commit_text()
    for metric, unit, digits in (("psnr", " dB", 2), ("ssim", "", 4)):
        values = {m: [r[metric] for r in runs if r["method"] == m] for m in ("splat-plus-lite", "lite-fused")}
        assert len(values["splat-plus-lite"]) == len(values["lite-fused"]) == 5, values
        interval = welch_interval(values["splat-plus-lite"], values["lite-fused"], confidence=0.90)
        shown = f"{interval['diff']:+.{digits}f} ± {interval['half_width']:.{digits}f}{unit}".replace("-", "−")
        assert shown in line, (metric, shown)
    # fox: lite's PSNR over its 5 runs (mean ± sample SD) and splatfacto's one run
    fox = {
        m: [r["psnr"] for r in results["fox"]["runs"] if r["method"] == m] for m in ("splat-plus-lite", "splatfacto")
    }
    assert len(fox["splat-plus-lite"]) == 5 and len(fox["splatfacto"]) == 1, fox
    lite = f"{statistics.mean(fox['splat-plus-lite']):.2f} ± {statistics.stdev(fox['splat-plus-lite']):.2f} over 5 runs"
    assert f"Lite's PSNR on fox: {lite} (splatfacto's one run: {fox['splatfacto'][0]:.2f})" in line, line


AGAIN = REPO / "benchmarks" / "2026-11-29-h200-plush-dog-lite-against-splatfacto" / "results.json"


def test_plush_dog_again_is_the_benchmark():
    """The line under the one-commit table: lite's and splatfacto's timed walls, their ratio, lite's warmup in
    that wall, and each method's PSNR over its runs (mean ± sample SD), from the benchmark's report."""
    runs = json.loads(AGAIN.read_text())["runs"]
    timed = {r["method"]: r for r in runs if r["timing_valid"]}
    psnr = {m: [r["psnr"] for r in runs if r["method"] == m] for m in ("splat-plus-lite", "splatfacto")}
    lite, reference = timed["splat-plus-lite"]["process_wall_s"], timed["splatfacto"]["process_wall_s"]
    warmup = timed["splat-plus-lite"]["train_wall_parts"]["warmup_s"]
    line = _one_commit_text()
    assert f"{lite:.1f} s against {reference:.1f} s ({lite / reference:.3f}x)" in line, line
    assert f"lite's {lite:.1f} s include a {warmup:.1f} s warmup" in line, line
    for shown, method in (("lite", "splat-plus-lite"), ("splatfacto", "splatfacto")):
        values = psnr[method]
        expected = f"{shown} {statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} over {len(values)} runs"
        assert expected in line, (expected, line)
    summary = {s["method"]: s for s in json.loads(AGAIN.read_text())["summary"]}
    welch = summary["splat-plus-lite"]["vs_reference"]["psnr"]["welch"]
    assert (welch["n_a"], welch["n_b"], welch["confidence"]) == (
        len(psnr["splat-plus-lite"]),
        len(psnr["splatfacto"]),
        0.9,
    )
    assert f"lite − splatfacto {welch['diff']:+.2f} ± {welch['half_width']:.2f} dB." in line, line
