#!/usr/bin/env python3
"""Held-out PSNR against training wall time, one panel per scene, from merged results.json files
(splatbench.plots.quality_vs_time_scenes): the README's picture.

python scripts/plot_quality_vs_time.py benchmarks/2026-11-26-h100-fox-lite-table/results.json \\
    benchmarks/2026-11-26-h100-plush-dog-lite-table/results.json \\
    --out benchmarks/2026-11-26-h100-fox-lite-table/plots/quality_vs_time_fox_plush_dog.png
"""

import argparse
import json
from pathlib import Path

from splatbench.plots import quality_vs_time_scenes

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, nargs="+", help="merged results.json files, one per scene")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args()
    print(quality_vs_time_scenes([json.loads(p.read_text()) for p in args.results], args.out))
