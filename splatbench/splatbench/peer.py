"""Another project's trainer side by side with nerfstudio's methods (``--peer LABEL=COMMAND``).

Entry points: :func:`check_template` (the CLI's check of each template), :func:`peer_command` (the command of
one run), :func:`read_peer_results` (what the run reported).

A peer is a command template, split like a shell line, whose tokens may hold ``{data}`` (the ``--data``
folder of ``--scene-args``), ``{run_dir}`` (the run's own empty directory), ``{steps}`` (``--steps``) and
``{seed}`` (the repeat number with ``--seed-per-repeat``, else empty: the peer's own default). The command
trains, scores the held-out views itself, and writes ``{run_dir}/peer_results.json``::

    {"psnr": 24.1, "ssim": 0.95, "num_gaussians": 180000, "train_wall_s": 95.2}

``psnr`` and ``ssim`` are required; ``lpips``, ``num_gaussians``, ``train_wall_s`` (the peer's own
training time, as it reports it) and ``process_wall_s`` are optional. The run's process wall is the
command's own ``process_wall_s`` where it gives one (the wall of its training process alone, when the
command also renders and scores the held-out views, which ``ns-eval`` does outside ``ns-train``'s wall),
else the whole command's wall as the benchmark timed it. A peer has no step times, GPU-busy window or
memory probe.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from splatbench.settings import scene_data_dir

PEER_RESULTS = "peer_results.json"
PLACEHOLDERS = ("data", "run_dir", "steps", "seed")
REQUIRED_KEYS = ("psnr", "ssim")
OPTIONAL_KEYS = ("lpips", "num_gaussians", "train_wall_s", "process_wall_s")


def _fill(template: str, values: Dict[str, str]) -> List[str]:
    return [token.format_map(values) for token in shlex.split(template)]


def check_template(template: str, scene_args: str) -> Optional[str]:
    """None when ``template`` uses only :data:`PLACEHOLDERS`, and ``{data}`` only where ``scene_args`` has
    ``--data``; else what is wrong (the CLI checks before any run, :func:`peer_command` again)."""
    try:
        _fill(template, {name: "" for name in PLACEHOLDERS})
    except (KeyError, IndexError, ValueError) as error:
        return f"{error} is not a placeholder here; use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
    if "{data}" in template and scene_data_dir(scene_args) is None:
        return "it uses {data}: give the scene's folder as --data in --scene-args"
    return None


def peer_command(template: str, scene_args: str, run_dir: Path, steps: int, seed: Optional[int]) -> List[str]:
    """The command of one peer run (its tokens with the placeholders filled)."""
    problem = check_template(template, scene_args)
    if problem is not None:
        raise ValueError(f"--peer {template!r}: {problem}")
    values = {
        "data": scene_data_dir(scene_args) or "",
        "run_dir": str(run_dir),
        "steps": str(steps),
        "seed": "" if seed is None else str(seed),
    }
    return _fill(template, values)


def read_peer_results(run_dir: Path) -> Tuple[Dict[str, Any], Optional[str]]:
    """The metrics a peer run wrote, and None; or {} and why they are missing or unusable."""
    path = run_dir / PEER_RESULTS
    try:
        reported = json.loads(path.read_text(encoding="utf8"))
    except FileNotFoundError:
        return {}, f"the peer wrote no {PEER_RESULTS} in its run directory"
    except (OSError, json.JSONDecodeError) as error:
        return {}, f"{path}: {error}"
    if not isinstance(reported, dict):
        return {}, f"{path}: expected a JSON object, got {type(reported).__name__}"
    values: Dict[str, Any] = {}
    for key in REQUIRED_KEYS + OPTIONAL_KEYS:
        value = reported.get(key)
        if value is None and key in OPTIONAL_KEYS:
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return {}, f"{path}: {key} is {value!r}, expected a finite number"
        values[key] = int(value) if key == "num_gaussians" else float(value)
    return values, None
