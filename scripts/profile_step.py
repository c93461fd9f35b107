#!/usr/bin/env python3
"""Where the time of one training step goes: splatbench.profile_step (``--help`` for usage).

python scripts/profile_step.py --out /tmp/prof -- splat-plus --data path/to/scene colmap
"""

from splatbench.profile_step import main

if __name__ == "__main__":
    main()
