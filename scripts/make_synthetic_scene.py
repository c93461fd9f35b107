#!/usr/bin/env python3
"""Write a small synthetic COLMAP scene (rendered from known Gaussians) for tests and demos.

    python scripts/make_synthetic_scene.py /tmp/scene [--views 24] [--width 64 --height 48] [--no-points]
    ns-train splat-plus --data /tmp/scene --machine.device-type cpu colmap

A large scene for GPU benchmarks (gsplat renders on CUDA; JPEG images):

    python scripts/make_synthetic_scene.py /data/synth1000 --large --views 1000 --width 3840 --height 2160 \
        --gaussians 2000000 --device cuda
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
    parser.add_argument("--large", action="store_true", help="a benchmark scene (ns_splat_plus.synthetic_large)")
    parser.add_argument("--gaussians", type=int, default=1_000_000, help="--large: ground-truth Gaussians")
    parser.add_argument("--device", default="cuda", help="--large: cuda (gsplat) or cpu (reference, tiny sizes)")
    parser.add_argument("--writers", type=int, default=4, help="--large: JPEG encoder threads")
    args = parser.parse_args()
    if args.large:
        from ns_splat_plus.synthetic_large import make_large_scene

        make_large_scene(
            args.out_dir, args.views, args.width, args.height, args.gaussians, args.device, seed=args.seed, writers=args.writers
        )
        return
    spec = SceneSpec(n_views=args.views, width=args.width, height=args.height, seed=args.seed)
    out = make_scene(args.out_dir, spec, with_points=not args.no_points)
    print(f"wrote {spec.n_views} views ({spec.width}x{spec.height}) to {out}")


if __name__ == "__main__":
    main()
