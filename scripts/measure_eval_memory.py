#!/usr/bin/env python3
"""Peak device memory of training and in-training evaluation: splatbench.eval_memory (``--help``).

python scripts/measure_eval_memory.py --output eval_memory.json -- --data path/to/scene colmap
"""

from splatbench.eval_memory import main

if __name__ == "__main__":
    main()
