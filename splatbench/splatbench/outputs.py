"""Writing a benchmark's outputs: results.json, results.md, readme_section.md and the plots.

Entry points: :func:`write_outputs` (everything; the command line and the runner call it) and
:func:`write_results` (results.json alone: the runner keeps partial results after every run). It sits
above :mod:`.report` (text) and :mod:`.plots` (figures), which know nothing of each other's files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from splatbench.plots import make_plots
from splatbench.report import markdown_report, readme_section
from splatbench.settings import log


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
