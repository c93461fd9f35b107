"""The documented examples (README.md, docs/*.md) as data: their fenced blocks, and how a test runs one.

Used by tests/docs/test_docs.py (which runs every block) and the CLI tests that run one documented line.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_MAX_LINES = 300
LANGUAGES = {"bash", "python", "text", "bibtex"}

CPU_FLAGS = "--machine.device-type cpu"
"""Inserted into every documented ns-train command, with at most ``--max-num-iterations``: nothing else, so
each command runs with the defaults the docs show (the viewer on, ``--vis viewer``; the run still ends by
itself, as stdin and stdout are not terminals here)."""
DATAPARSERS = ("colmap", "nerfstudio-data", "instant-ngp-data")
QUICKSTART = "python -m ns_splat_plus.demo scene/"


# --- blocks -----------------------------------------------------------------------------------------


@dataclass
class Block:
    page: str  # relative to the repository
    language: str
    text: str
    line: int  # of the opening fence

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language})"

    @property
    def file_name(self) -> Optional[str]:
        """``NAME.py`` when the block's first line is ``# NAME.py`` (a file a shell block uses)."""
        first = self.text.splitlines()[0].strip() if self.text.strip() else ""
        match = re.fullmatch(r"#\s*([\w.-]+\.py)", first)
        return match.group(1) if match else None


def pages() -> List[Path]:
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def code_blocks(path: Path) -> List[Block]:
    """The fenced blocks of one page (fences at the start of a line, as GitHub renders them)."""
    blocks, language, start, lines = [], None, 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            if language is None:
                language, start, lines = line[3:].strip(), number, []
            else:
                blocks.append(Block(str(path.relative_to(REPO)), language, "\n".join(lines) + "\n", start))
                language = None
        elif language is not None:
            lines.append(line)
    assert language is None, f"{path}: unclosed code fence at line {start}"
    return blocks


def all_blocks() -> List[Block]:
    return [block for page in pages() for block in code_blocks(page)]


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def with_test_flags(script: str, steps: Optional[int]) -> str:
    """Each ns-train command of a shell block with CPU_FLAGS (and --max-num-iterations) before its dataparser."""
    flags = CPU_FLAGS + (f" --max-num-iterations {steps}" if steps else "")
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        start = line.find("ns-train")
        if start >= 0:
            end = line.find(" #", start)
            code, comment = (line, "") if end < 0 else (line[:end], line[end:])
            parsers = list(re.finditer(r"\s(?=(%s)(\s|$))" % "|".join(DATAPARSERS), code[start:]))
            at = start + parsers[-1].start() if parsers else len(code.rstrip())
            line = f"{code[:at]} {flags}{code[at:]}{comment}"
        out.append(line)
    return "\n".join(out) + "\n"


def _workdir(path: Path, scene: Optional[Path]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in ("scripts", "configs"):
        (path / name).symlink_to(REPO / name)
    if scene is not None:
        shutil.copytree(scene, path / "scene")
    return path
