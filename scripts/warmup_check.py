#!/usr/bin/env python3
"""Fresh-process consistency with warmup, and the cost of instrumentation: splatbench.warmup_check.

python scripts/warmup_check.py fresh --scene-args '--data path/to/scene colmap' --out /tmp/warmup_check
"""

from splatbench.warmup_check import main

if __name__ == "__main__":
    main()
