#!/usr/bin/env python3
"""Write a synthetic COLMAP scene rendered from known Gaussians: splatbench.scenes (``--help`` for usage).

The small scene is the runtime's demo (``python -m ns_splat_plus.demo``, no splatbench needed); this
script adds ``--large`` benchmark scenes.

python scripts/make_synthetic_scene.py /tmp/scene [--views 24] [--width 64 --height 48] [--no-points]
ns-train splat-plus --data /tmp/scene --machine.device-type cpu colmap
"""

from splatbench.scenes import main

if __name__ == "__main__":
    main()
