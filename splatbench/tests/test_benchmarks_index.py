"""benchmarks/README.md indexes benchmarks/: one row per experiment folder, each folder with its command.

A folder holds its command.sh, results, plots and notes.md as plain files; its per-run logs (``*.log``,
``*.jsonl``, ``logs/``) only inside one deterministic ``raw-logs.tar.xz`` (or ``.tar.gz``); the reports
that a ``--from-json`` merge in command.sh reads stay plain. A row may say "superseded by `<folder>`".

Only pathlib, re, json and tarfile: no project imports, no GPU.
"""

from __future__ import annotations

import json
import re
import shlex
import tarfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
INDEX = BENCHMARKS / "README.md"
COLUMNS = ["date", "GPU", "commit", "scene", "compared", "headline", "folder", "notes"]
FOLDER_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-(h100|h200|cpu)(x\d+)?-[a-z0-9]+(-[a-z0-9]+)*$")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
ARCHIVES = ("raw-logs.tar.xz", "raw-logs.tar.gz")  # the one archive a folder may hold, at its top
ARCHIVE_LIKE = re.compile(r"\.(tar|tgz|txz|gz|xz|bz2|zst|zip|7z)$")
LOG_LIKE = re.compile(r"\.(log|jsonl)$")  # per-run logs: inside the archive only
ARCHIVE_MTIME = datetime(2026, 11, 28, tzinfo=timezone.utc).timestamp()  # tar --mtime=2026-11-28 (TZ=UTC)
SUPERSEDED = re.compile(r"superseded by `([^`/]+)/?`")
SCRIPT_CALL = re.compile(r"\bscripts/\w+\.py\b|\bns-train\b|\bpytest -m gpu\b")  # a tool, ns-train, or the GPU tests


def index_rows() -> list[dict[str, str]]:
    """The experiment table of benchmarks/README.md: the table whose header starts with '| date |'."""
    lines = INDEX.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("| date |")]
    assert len(starts) == 1, "benchmarks/README.md must hold one table whose header starts with '| date |'"
    header = [c.strip() for c in lines[starts[0]].strip().strip("|").split("|")]
    assert header == COLUMNS, header
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS), f"a row with {len(cells)} cells instead of {len(COLUMNS)}: {line}"
        rows.append(dict(zip(COLUMNS, cells)))
    assert rows, "the index table has no rows"
    return rows


def row_folder(row: dict[str, str]) -> str:
    """The folder a row links to: its folder cell is exactly one link, [name/](name/)."""
    links = LINK.findall(row["folder"])
    assert len(links) == 1, f"the folder cell must be one link: {row['folder']}"
    text, target = links[0]
    assert target.endswith("/") and text == target, f"the folder link must read [name/](name/): {row['folder']}"
    name = target.rstrip("/")
    assert "/" not in name, f"an experiment folder lies directly under benchmarks/: {name}"
    return name


def experiment_folders() -> list[Path]:
    return sorted(p for p in BENCHMARKS.iterdir() if p.is_dir())


def test_every_folder_has_exactly_one_row_and_every_row_a_folder():
    listed = Counter(row_folder(row) for row in index_rows())
    twice = sorted(name for name, n in listed.items() if n > 1)
    assert not twice, f"folders with more than one row in benchmarks/README.md: {twice}"
    on_disk = {p.name for p in experiment_folders()}
    assert not sorted(on_disk - set(listed)), (
        f"folders without a row in benchmarks/README.md: {sorted(on_disk - set(listed))}"
    )
    assert not sorted(set(listed) - on_disk), f"rows whose folder does not exist: {sorted(set(listed) - on_disk)}"


def test_folder_names_follow_the_scheme_and_match_the_row_date():
    for row in index_rows():
        name = row_folder(row)
        match = FOLDER_NAME.match(name)
        assert match, f"{name}: not YYYY-MM-DD-<gpu>-<what> (gpu h100, h200, h200x2 ...)"
        assert row["date"].startswith(match.group(1)), f"{name}: the row's date {row['date']!r} is not the folder's"


def test_nothing_but_the_index_lies_loose_in_benchmarks():
    loose = sorted(p.name for p in BENCHMARKS.iterdir() if p.is_file() and p.name != "README.md")
    assert not loose, f"files directly under benchmarks/ (each belongs in an experiment folder): {loose}"


@pytest.mark.parametrize("folder", experiment_folders(), ids=lambda p: p.name)
def test_each_folder_has_its_command(folder: Path):
    command = folder / "command.sh"
    assert command.is_file(), f"{folder.name}: no command.sh (the commands that regenerate it)"
    lines = command.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# "), (
        f"{folder.name}/command.sh: the first line is a comment (GPU, date, commit)"
    )
    date = folder.name[:10]  # YYYY-MM-DD (the name's scheme: test_folder_names_follow_the_scheme...)
    assert date in lines[0], f"{folder.name}/command.sh: the first line does not give the date {date}"
    calls = [line for line in lines if line.strip() and not line.lstrip().startswith("#") and SCRIPT_CALL.search(line)]
    assert calls, f"{folder.name}/command.sh: no command running scripts/*.py, ns-train or pytest -m gpu"
    others = sorted(str(p.relative_to(BENCHMARKS)) for p in folder.rglob("*.sh") if p != command)
    assert not others, f"one-off scripts (their commands belong in command.sh): {others}"


@pytest.mark.parametrize("folder", experiment_folders(), ids=lambda p: p.name)
def test_each_folder_holds_results(folder: Path):
    data = [p for p in folder.rglob("*") if p.is_file() and p.name not in ("command.sh", "notes.md")]
    assert data, f"{folder.name}: no results (only its command and notes)"
    for report in folder.rglob("results.md"):
        results = report.with_name("results.json")
        assert results.is_file(), f"{report.relative_to(BENCHMARKS)} without its results.json"
    for results in folder.rglob("results.json"):
        record = json.loads(results.read_text(encoding="utf-8"))
        assert "runs" in record and "command" in record, f"{results.relative_to(BENCHMARKS)}: not a benchmark report"


def test_every_row_links_notes_that_exist():
    for row in index_rows():
        name = row_folder(row)
        links = LINK.findall(row["notes"])
        assert len(links) == 1, f"{name}: the notes cell must be one link to a notes.md"
        target = (BENCHMARKS / links[0][1]).resolve()
        assert target.name == "notes.md" and target.is_file(), f"{name}: notes {links[0][1]} do not exist"
        assert BENCHMARKS in target.parents, f"{name}: notes outside benchmarks/"
        own = BENCHMARKS / name / "notes.md"
        if own.is_file():
            assert target == own.resolve(), f"{name} has a notes.md; its row must link it"


def test_relative_links_in_the_index_and_notes_resolve():
    pages = [INDEX, *BENCHMARKS.glob("*/notes.md")]
    broken = []
    for page in pages:
        for _, target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+://", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(BENCHMARKS)}: {target}")
    assert not broken, f"broken links: {broken}"


@pytest.mark.parametrize("folder", experiment_folders(), ids=lambda p: p.name)
def test_notes_are_notes_md(folder: Path):
    others = sorted(
        str(p.relative_to(BENCHMARKS)) for p in folder.rglob("*.md") if p.name.lower() in ("readme.md", "notes.txt")
    )
    assert not others, f"a folder's notes are its notes.md: {others}"


@pytest.mark.parametrize("folder", experiment_folders(), ids=lambda p: p.name)
def test_logs_lie_only_in_the_one_archive(folder: Path):
    files = [p for p in folder.rglob("*") if p.is_file()]
    loose = sorted(
        str(p.relative_to(folder)) for p in files if LOG_LIKE.search(p.name) or "logs" in p.relative_to(folder).parts
    )
    assert not loose, f"{folder.name}: per-run logs outside raw-logs.tar.xz: {loose}"
    archives = sorted(str(p.relative_to(folder)) for p in files if ARCHIVE_LIKE.search(p.name))
    assert all(a in ARCHIVES for a in archives) and len(archives) <= 1, (
        f"{folder.name}: at most one archive, {' or '.join(ARCHIVES)} at the folder's top: {archives}"
    )
    if not archives:
        return
    with tarfile.open(folder / archives[0]) as tar:
        members = tar.getmembers()
    names = [m.name for m in members if m.isfile()]
    assert names, f"{folder.name}/{archives[0]}: empty"
    for m in members:
        where = f"{folder.name}/{archives[0]}: {m.name}"
        assert m.isfile() or m.isdir(), f"{where}: not a file or folder"
        assert not m.name.startswith("/") and ".." not in Path(m.name).parts, f"{where}: not under the folder"
        assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), f"{where}: owner not 0/0 (--numeric-owner)"
        assert m.mtime == ARCHIVE_MTIME, f"{where}: mtime not 2026-11-28 (tar --mtime=2026-11-28)"
    assert names == sorted(names), f"{folder.name}/{archives[0]}: members not in name order (tar --sort=name)"
    plain = sorted(n for n in names if (folder / n).exists())
    assert not plain, f"{folder.name}/{archives[0]}: also lying plain in the folder: {plain}"


def merge_inputs(command: Path) -> list[str]:
    """The files each `--from-json` of a command.sh reads, its variables (`B=...`) expanded."""
    text = re.sub(r"\\\n", " ", command.read_text(encoding="utf-8"))
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    variables: dict[str, str] = {}
    inputs = []
    for line in lines:
        assignment = re.match(r"^\s*([A-Z_][A-Z0-9_]*)=(\S+)\s*$", line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2).strip("'\"")
            continue
        if "--from-json" not in line:
            continue
        words = shlex.split(line.split("#")[0])
        after = words[words.index("--from-json") + 1 :]
        for word in after:
            if word.startswith("-") or word in ("&", ">", "|"):
                break
            inputs.append(re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: variables.get(m.group(1), m.group(0)), word))
    return inputs


@pytest.mark.parametrize("folder", experiment_folders(), ids=lambda p: p.name)
def test_merge_inputs_stay_plain_files(folder: Path):
    missing = []
    for path in merge_inputs(folder / "command.sh"):
        # from the repository root (benchmarks/...) or, for a command run in the folder, from the folder
        target = BENCHMARKS.parent / path if path.startswith("benchmarks/") else folder / path
        if not target.is_file():
            missing.append(path)
    assert not missing, f"{folder.name}/command.sh: --from-json reads files that are not plain files here: {missing}"


def test_superseded_rows_name_a_later_current_folder():
    rows = {row_folder(row): row for row in index_rows()}
    for name, row in rows.items():
        for later in SUPERSEDED.findall(" ".join(row.values())):
            assert later in rows, f"{name}: superseded by {later}, which has no row"
            assert later != name and later[:10] >= name[:10], f"{name}: superseded by {later}, not a later folder"
            assert not SUPERSEDED.search(" ".join(rows[later].values())), (
                f"{name}: superseded by {later}, itself superseded (name the current one)"
            )
