"""``results.json``'s content: the runs, their speedups and the per-method summary over repeats.

Entry point: :func:`results_document` (what a benchmark command and a merge of several both write).
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

from splatbench.settings import SCHEMA_VERSION
from splatbench.stats import summarize_repeats


def add_speedups(runs: List[Dict[str, Any]]) -> None:
    """speedup = the method's mean 1-GPU train wall time (timing runs) / this run's (None without both)."""
    walls: Dict[str, List[float]] = {}
    for r in runs:
        if r["num_gpus"] == 1 and r["status"] == "ok" and r["train_wall_s"] and r.get("timing_valid") is not False:
            walls.setdefault(r["method"], []).append(r["train_wall_s"])
    single = {method: statistics.fmean(values) for method, values in walls.items()}
    for r in runs:
        base = single.get(r["method"])
        r["speedup"] = base / r["train_wall_s"] if (base and r["status"] == "ok" and r["train_wall_s"]) else None


def results_document(
    settings: Dict[str, Any],
    runs: List[Dict[str, Any]],
    reference: Optional[str],
    environment: Optional[Dict[str, Any]],
    created: Optional[str],
    finished: Optional[str],
    command: Optional[str],
    scene: Optional[str],
) -> Dict[str, Any]:
    """``results.json``'s content: the runs with their speedups, and the per-method summary over repeats."""
    add_speedups(runs)
    return {
        "schema": SCHEMA_VERSION,
        "created": created,
        "finished": finished,
        "command": command,
        "scene": scene,
        "settings": settings,
        "reference_method": reference,
        "environment": environment,
        "runs": runs,
        "summary": summarize_repeats(runs, reference),
    }
