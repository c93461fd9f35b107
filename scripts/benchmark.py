#!/usr/bin/env python3
"""Benchmark splat-plus against splatfacto (or any nerfstudio methods): speed, memory, held-out quality.

Every method trains in a fresh process (nerfstudio's ns-train main, measured by splatbench.probe),
then ns-eval scores the held-out split. Writes OUT/results.json, OUT/results.md,
OUT/readme_section.md and OUT/plots/*.png; child output goes to OUT/logs/.

    SCENE="--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8"
    # fox, 3000 steps, splat-plus vs splatfacto on one GPU
    python scripts/benchmark.py --scene-args "$SCENE" --steps 3000 --out outputs/bench/fox-3k
    # multi-GPU mode: splat-plus on 1, 2 and 4 GPUs (splatfacto recorded as unsupported for W > 1)
    python scripts/benchmark.py --scene-args "$SCENE" --gpus 1 2 4 --out outputs/bench/fox-multi
    # re-render Markdown, plots and the README section from a results.json
    python scripts/benchmark.py --from-json outputs/bench/fox-3k/results.json --out outputs/bench/fox-3k
    # quality gate against a stored baseline
    python scripts/quality_gate.py outputs/bench/fox-3k/results.json benchmarks/2026-11-21-h200-fox-3k/results.json
    # 5 repeats per method, interleaved; repeats 2-5 trained side by side on the one GPU (quality only);
    # GPU busy time over 50 profiled steps
    python scripts/benchmark.py --scene-args "$SCENE" --repeats 5 --concurrent-quality --gpu-busy-steps 50 \
        --out outputs/bench/fox-r5

The code is splatbench.cli (``main``); install it with ``pip install -e ./splatbench``.
"""

import sys

from splatbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
