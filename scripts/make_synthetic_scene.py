#!/usr/bin/env python3
"""Write a small synthetic COLMAP scene (rendered from known Gaussians) for tests and demos.

    python scripts/make_synthetic_scene.py /tmp/scene [--views 24] [--width 64 --height 48] [--no-points]
    ns-train splat-plus --data /tmp/scene --machine.device-type cpu colmap
"""

import argparse
from pathlib import Path

from ns_splat_plus.synthetic import SceneSpec, make_scene


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--views", type=int, default=SceneSpec.n_views)
    parser.add_argument("--width", type=int, default=SceneSpec.width)
    parser.add_argument("--height", type=int, default=SceneSpec.height)
    parser.add_argument("--seed", type=int, default=SceneSpec.seed)
    parser.add_argument("--no-points", action="store_true", help="omit points3D.txt (no SfM points)")
    args = parser.parse_args()
    spec = SceneSpec(n_views=args.views, width=args.width, height=args.height, seed=args.seed)
    out = make_scene(args.out_dir, spec, with_points=not args.no_points)
    print(f"wrote {spec.n_views} views ({spec.width}x{spec.height}) to {out}")


if __name__ == "__main__":
    main()
