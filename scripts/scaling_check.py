#!/usr/bin/env python3
"""1 GPU against W GPUs with the scaled schedule: splatbench.scaling_check (``--help`` for usage).

python scripts/scaling_check.py OUT_DIR --scene-args '--data path/to/scene colmap'
"""

import sys

from splatbench.scaling_check import main

if __name__ == "__main__":
    sys.exit(main())
