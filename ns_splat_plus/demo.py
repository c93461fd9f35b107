"""The demo scene: a small synthetic COLMAP scene rendered from known Gaussians, for a first run without data.

Entry point: ``python -m ns_splat_plus.demo scene/`` (:func:`main`), or :func:`make_scene` from Python.

It writes what nerfstudio's ``colmap`` dataparser reads (``images/`` and ``colmap/sparse/0/*.txt``;
``ns-train splat-plus --data scene/ colmap``, whose default interval split holds every 8th view out):
a tiny "room" (coloured, textured walls around a cluster of coloured blobs, so every pixel of every view
sees content) seen from a ring of cameras looking at its centre, PNGs rendered on the CPU with the
reference rasterizer, and SfM points that are noisy samples of the ground-truth Gaussian centres.

It ships with the runtime (``pip install .``): the benchmark tool's scene module (``splatbench.scenes``,
also the tests' fixtures) takes this generator from here and adds its large GPU scenes.
"""

from __future__ import annotations

import argparse
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from PIL import Image

from ns_splat_plus.raster.reference import reference_rasterization

DEMO_MARK = "# demo scene (ns_splat_plus.demo)"
"""The first line of a demo scene's images.txt."""


@dataclass(frozen=True)
class SceneSpec:
    n_views: int = 24
    width: int = 64
    height: int = 48
    focal: float = 56.0
    n_blobs: int = 160
    wall_cells: int = 8
    n_points: int = 800
    point_noise: float = 0.05
    seed: int = 0


def _ground_truth(spec: SceneSpec, g: torch.Generator) -> Dict[str, torch.Tensor]:
    blobs = (torch.rand(spec.n_blobs, 3, generator=g) - 0.5) * 2.0
    blob_colors = torch.rand(spec.n_blobs, 3, generator=g)
    blob_scales = torch.full((spec.n_blobs, 3), 0.12) * (0.5 + torch.rand(spec.n_blobs, 3, generator=g))
    # walls of the cube [-5, 5]^3, a checker pattern of flat Gaussians on each face
    s, half = spec.wall_cells, 5.0
    u = (torch.arange(s) + 0.5) / s * 2 * half - half
    uu, vv = torch.meshgrid(u, u, indexing="ij")
    walls, wall_colors, wall_scales = [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            p = torch.zeros(s * s, 3)
            others = [a for a in range(3) if a != axis]
            p[:, axis] = sign * half
            p[:, others[0]] = uu.reshape(-1)
            p[:, others[1]] = vv.reshape(-1)
            checker = ((torch.arange(s)[:, None] + torch.arange(s)[None, :]) % 2).reshape(-1).float()
            base = torch.tensor([0.2 + 0.3 * axis, 0.8 - 0.3 * axis, 0.5 + 0.2 * sign])
            col = base[None, :] * (0.55 + 0.45 * checker[:, None])
            sc = torch.full((s * s, 3), half / s * 1.1)
            sc[:, axis] = 0.05
            walls.append(p)
            wall_colors.append(col.clamp(0, 1))
            wall_scales.append(sc)
    means = torch.cat([blobs] + walls)
    colors = torch.cat([blob_colors] + wall_colors)
    scales = torch.cat([blob_scales] + wall_scales)
    n = means.shape[0]
    return {
        "means": means,
        "colors": colors,
        "scales": scales,
        "quats": torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1),
        "opacities": torch.full((n,), 0.95),
    }


def look_at_w2c(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera matrix [4, 4] in the OpenCV/COLMAP convention (x right, y down, z forward)."""
    forward = target - position
    forward /= np.linalg.norm(forward)
    up = np.array([0.0, 0.0, 1.0])
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    R = np.stack([right, down, forward])  # rows: camera axes in world coordinates
    w2c = np.eye(4)
    w2c[:3, :3] = R
    w2c[:3, 3] = -R @ position
    return w2c


def rotmat_to_qvec(R: np.ndarray) -> np.ndarray:
    """COLMAP's quaternion (w, x, y, z) of a rotation matrix [3, 3]."""
    w = math.sqrt(max(0.0, 1.0 + R[0, 0] + R[1, 1] + R[2, 2])) / 2.0
    x = math.copysign(math.sqrt(max(0.0, 1.0 + R[0, 0] - R[1, 1] - R[2, 2])) / 2.0, R[2, 1] - R[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1.0 - R[0, 0] + R[1, 1] - R[2, 2])) / 2.0, R[0, 2] - R[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1.0 - R[0, 0] - R[1, 1] + R[2, 2])) / 2.0, R[1, 0] - R[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def camera_poses(spec: SceneSpec) -> Tuple[np.ndarray, np.ndarray]:
    """(world-to-camera [V, 4, 4], intrinsics [3, 3]) of the ring of views."""
    w2cs = []
    for i in range(spec.n_views):
        a = 2 * math.pi * i / spec.n_views
        pos = np.array([3.0 * math.cos(a), 3.0 * math.sin(a), 0.6 * math.sin(3 * a)])
        w2cs.append(look_at_w2c(pos, np.zeros(3)))
    K = np.array([[spec.focal, 0, spec.width / 2], [0, spec.focal, spec.height / 2], [0, 0, 1.0]])
    return np.stack(w2cs), K


def make_scene(out_dir: Path, spec: SceneSpec = SceneSpec(), with_points: bool = True) -> Path:
    """Write a COLMAP scene (images/, colmap/sparse/0/*.txt) to ``out_dir`` and return it."""
    out_dir = Path(out_dir)
    images_dir = out_dir / "images"
    sparse = out_dir / "colmap" / "sparse" / "0"
    images_dir.mkdir(parents=True, exist_ok=True)
    sparse.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(spec.seed)
    gt = _ground_truth(spec, g)
    w2cs, K = camera_poses(spec)
    with torch.no_grad():
        render, _, _ = reference_rasterization(
            gt["means"],
            gt["quats"],
            gt["scales"],
            gt["opacities"],
            gt["colors"],
            torch.from_numpy(w2cs).float(),
            torch.from_numpy(K).float()[None].repeat(spec.n_views, 1, 1),
            spec.width,
            spec.height,
        )
    lines = []
    for i in range(spec.n_views):
        name = f"frame_{i:04d}.png"
        img = (render[i].clamp(0, 1).numpy() * 255).round().astype(np.uint8)
        Image.fromarray(img).save(images_dir / name)
        q = rotmat_to_qvec(w2cs[i][:3, :3])
        t = w2cs[i][:3, 3]
        lines.append(f"{i + 1} {' '.join(f'{v:.10f}' for v in q)} {' '.join(f'{v:.10f}' for v in t)} 1 {name}\n\n")
    (sparse / "images.txt").write_text(DEMO_MARK + "\n" + "".join(lines))
    (sparse / "cameras.txt").write_text(
        f"1 PINHOLE {spec.width} {spec.height} {K[0, 0]} {K[1, 1]} {K[0, 2]} {K[1, 2]}\n"
    )
    if with_points:
        # like SfM: a point near every Gaussian, then more where the content is (surface samples)
        rng = np.random.default_rng(spec.seed)
        n_gt = gt["means"].shape[0]
        idx = np.concatenate([np.arange(n_gt), rng.integers(0, n_gt, max(spec.n_points - n_gt, 0))])[: spec.n_points]
        spread = np.minimum(gt["scales"].numpy()[idx], 0.5) * 0.5
        pts = gt["means"].numpy()[idx] + rng.normal(0, 1, (len(idx), 3)) * (spread + spec.point_noise)
        rgb = (gt["colors"].numpy()[idx] * 255).round().astype(int)
        (sparse / "points3D.txt").write_text(
            "".join(
                f"{i + 1} {p[0]:.6f} {p[1]:.6f} {p[2]:.6f} {c[0]} {c[1]} {c[2]} 0.5\n"
                for i, (p, c) in enumerate(zip(pts, rgb))
            )
        )
    return out_dir


def scene_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The demo scene's options (``splatbench.scenes`` adds its large scenes' options to the same parser)."""
    parser.add_argument("out_dir", type=Path, help="the folder to write (images/, colmap/sparse/0/)")
    parser.add_argument("--views", type=int, default=SceneSpec.n_views)
    parser.add_argument("--width", type=int, default=SceneSpec.width)
    parser.add_argument("--height", type=int, default=SceneSpec.height)
    parser.add_argument("--seed", type=int, default=SceneSpec.seed)
    parser.add_argument("--no-points", action="store_true", help="omit points3D.txt (no SfM points)")
    return parser


QUICKSTART_OPTIONS = (
    "--max-num-iterations 300 --pipeline.model.num-downscales 0 --pipeline.model.warmup-length 100 "
    "--pipeline.model.refine-every 50 --viewer.quit-on-train-completion True"
)
"""The README quick start's options: a few minutes on the CPU (the default schedule, 30,000 steps, runs for hours
there), refines within them, and an end after the last step. The printed command is pasted (shell-quoted)."""


def write_from_arguments(args: argparse.Namespace) -> Path:
    """Write the scene that parsed :func:`scene_arguments` describe, and say where it went."""
    spec = SceneSpec(n_views=args.views, width=args.width, height=args.height, seed=args.seed)
    out = make_scene(args.out_dir, spec, with_points=not args.no_points)
    print(f"wrote {spec.n_views} views ({spec.width}x{spec.height}) to {out}; train it with:")
    print(f"  ns-train splat-plus --data {shlex.quote(str(out))} --machine.device-type cpu {QUICKSTART_OPTIONS} colmap")
    return out


def main(argv: Optional[List[str]] = None) -> None:
    """``python -m ns_splat_plus.demo scene/``: a small synthetic scene to train on the CPU.

    python -m ns_splat_plus.demo scene/ [--views 24] [--width 64 --height 48] [--no-points]
    ns-train splat-plus --data scene/ --machine.device-type cpu --max-num-iterations 300 ... colmap   # as printed
    """
    parser = argparse.ArgumentParser(
        prog="python -m ns_splat_plus.demo",
        description=main.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    args = scene_arguments(parser).parse_args(argv)
    problem = clear_target(args.out_dir)
    if problem is not None:
        parser.error(problem)
    write_from_arguments(args)


def clear_target(out: Path) -> Optional[str]:
    """Ready ``out`` for a scene: a new or empty folder, or a demo scene whose photos are removed (another --views
    would leave stale photos beside the new model). Else why not (nothing touched): a file, or another scene."""
    if out.exists() and not out.is_dir():
        return f"{out} is a file: pass the folder to write the scene to"
    if out.is_dir() and any(out.iterdir()):
        if not is_demo_scene(out):  # a real scene's colmap/ and images/ would be overwritten
            return f"{out} is not empty and holds no demo scene: pass a new or empty folder"
        for old in (out / "images").glob("frame_*.png"):
            old.unlink()
    return None


def is_demo_scene(folder: Path) -> bool:
    """Whether ``folder`` holds a scene this module wrote (its images.txt's first line says so)."""
    images = folder / "colmap" / "sparse" / "0" / "images.txt"
    try:
        return images.read_text().startswith(DEMO_MARK)
    except OSError:
        return False


if __name__ == "__main__":
    main()
