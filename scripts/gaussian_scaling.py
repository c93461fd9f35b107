#!/usr/bin/env python3
"""Step time, GPU busy time and peak device memory against the Gaussian count: splatbench.gaussian_scaling.

python scripts/gaussian_scaling.py --help
"""

import sys

from splatbench.gaussian_scaling import main

if __name__ == "__main__":
    sys.exit(main())
