"""The PLY a run exports (``--export-ply``): :func:`export_run` runs nerfstudio's ``ns-export
gaussian-splat`` on a finished run and records the file's size and vertex count in its record.

The export is a measurement beside the run's own: a failed export (nerfstudio's exporter imports
open3d, pymeshlab, mediapy and xatlas at the top, which a minimal install lacks) leaves the run's
status and quality as they are, with the reason in ``ply_error``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from splatbench import children
from splatbench.settings import log


def export_command(config_path: Path, output_dir: Path) -> List[str]:
    """nerfstudio's ``ns-export gaussian-splat`` (its console script's entry point, with this Python)."""
    return [
        sys.executable, "-m", "nerfstudio.scripts.exporter", "gaussian-splat",
        "--load-config", str(config_path), "--output-dir", str(output_dir),
    ]  # fmt: skip


def read_ply_header(path: Path) -> Optional[int]:
    """The vertex count in a PLY file's header (``element vertex N``), None without one."""
    with open(path, "rb") as f:
        header = f.read(4096).split(b"end_header")[0].decode("latin-1")
    match = re.search(r"^element vertex (\d+)$", header, re.MULTILINE)
    return int(match.group(1)) if match else None


def export_run(
    record: Dict[str, Any], tag: str, config_path: Path, out_dir: Path, env: Dict[str, str], timeout_s: Optional[float]
) -> None:
    """Export the run of ``config_path`` into ``<its run directory>/export``; set ``record``'s
    ``ply_bytes`` and ``ply_vertices``, or ``ply_error``. The log goes to ``out_dir/logs/<tag>.export.log``."""
    out = config_path.parent / "export"
    child = children.run_child(
        export_command(config_path, out), out_dir / "logs" / f"{tag}.export.log", env, timeout_s, tag
    )
    ply = out / "splat.ply"
    if child.timed_out or child.returncode != 0 or not ply.is_file():
        record["ply_error"] = "ns-export: " + children.failure_reason(child.log_path)
        log(f"{tag}: ns-export failed: {record['ply_error']}")
        return
    record["ply_bytes"], record["ply_vertices"] = ply.stat().st_size, read_ply_header(ply)
    log(f"{tag}: PLY {record['ply_bytes']:,} bytes, {record['ply_vertices']} vertices")
