#!/usr/bin/env python3
"""Compare a benchmark results.json with a stored baseline; exit 1 with a readable diff on a regression.

    python scripts/quality_gate.py RESULT.json BASELINE.json [-t psnr=0.5%] [-t lpips=0.002] [--two-sided]

Defaults: PSNR and SSIM may drop by at most 0.5 % (relative to the baseline). Exit status 0 within
tolerance, 1 on a regression or a missing run/metric, 2 on bad input. Results with repeats are
compared by their means (the difference is reported with its standard error). The code is
splatbench.gate (main).
"""

import sys

from splatbench.gate import main

if __name__ == "__main__":
    sys.exit(main())
