"""Each default splat-plus-lite run's parts (seconds) -> raw/parts.json and a Markdown table.

    tar -xJf raw-logs.tar.xz lane1/ && python raw/parts.py raw lane1 > /dev/null

raw/walls.txt: `date +%s.%N` around each process; raw/startup_<k>.json: the run's own start-up record
(ranks/startup_rank0.json, wall-clock marks); lane1/probe_<k>.json: splatbench's probe, each step's host
begin/end (a monotonic clock, aligned to the wall clock at the first step's start) and its CUDA-event span.
"""

import json
import statistics
import sys
from pathlib import Path

raw, lane = Path(sys.argv[1]), Path(sys.argv[2])
walls = {}
for line in (raw / "walls.txt").read_text().splitlines():
    if len(line.split()) < 3:  # the closing DONE
        continue
    stamp, what, run = line.split()[:3]
    walls.setdefault(run, {})[what] = float(stamp)
rows = {}
for k in ["wh", "wo", "h1", "o1", "h2", "o2", "h3"]:
    probe = json.loads((lane / f"probe_{k}.json").read_text())
    startup = json.loads((raw / f"startup_{k}.json").read_text())
    marks, parts = startup["marks"], startup["parts_seconds"]
    offset = marks["first_step_start"] - probe["host_begin_s"][0]  # monotonic -> wall clock
    last_step_end = probe["host_end_s"][-1] + offset
    host_ms = [(e - b) * 1e3 for b, e in zip(probe["host_begin_s"], probe["host_end_s"])][100:]
    gpu_ms = [g for g in probe["gpu_span_ms"][100:] if g]
    rows[k] = {
        "process_wall": walls[k]["end"] - walls[k]["start"],
        "to_first_step_end": startup["seconds_to_first_step_end"],
        **parts,
        "warmup_own_line": probe["warmup_s"],
        "after_warmup_to_first_step": parts["warmup"] - probe["warmup_s"],
        "steps": last_step_end - marks["first_step_start"],
        "host_step_ms_median": statistics.median(host_ms) if host_ms else None,
        "gpu_span_ms_median": statistics.median(gpu_ms) if gpu_ms else None,
        "last_step_to_exit": walls[k]["end"] - last_step_end,
        "gaussians": probe["final_gaussians"],
    }
(raw / "parts.json").write_text(json.dumps(rows, indent=1) + "\n")
print("| part | " + " | ".join(rows) + " |\n|---|" + "---|" * len(rows))
for key in rows["h1"]:
    cells = [rows[k][key] for k in rows]
    print(f"| {key} | " + " | ".join("–" if c is None else f"{c:.2f}" if isinstance(c, float) else str(c) for c in cells) + " |")
