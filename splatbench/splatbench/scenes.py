"""Synthetic COLMAP scenes rendered from known Gaussians: test fixtures, demos and benchmark scenes.

Two generators, both writing what nerfstudio's ``colmap`` dataparser reads (``images/`` and
``colmap/sparse/0/*.txt``; ``ns-train splat-plus --data DIR colmap``, whose default interval split
holds every 8th view out for evaluation):

* :func:`make_scene`: the runtime's demo scene (``ns_splat_plus.demo``, shipped with ``pip install .``
  as ``python -m ns_splat_plus.demo``), taken from there so that there is one generator: a tiny "room"
  rendered on the CPU with the reference rasterizer, with noisy SfM points.
* :func:`make_large_scene`: hundreds to thousands of views (e.g. 3840x2160) of up to several million
  Gaussians for GPU benchmarks, rendered with gsplat on CUDA (in chunks of views; the reference
  rasterizer on the CPU, tiny sizes only), written as JPEG by a small thread pool, with a subsample
  of the Gaussian centres as SfM points.

Entry points: those two functions and :func:`main` (``scripts/make_synthetic_scene.py``).
Cameras sit on a ring inside the room looking at the centre.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Union

import numpy as np
import torch
from PIL import Image

# the demo scene and the torch reference rasterizer only: imported directly (not through
# splatbench.runtime, which loads the whole training stack) because every test imports this module
from ns_splat_plus.demo import SceneSpec, camera_poses, clear_target, make_scene, scene_arguments, write_from_arguments
from ns_splat_plus.demo import look_at_w2c as _look_at_w2c
from ns_splat_plus.demo import rotmat_to_qvec as _rotmat_to_qvec
from ns_splat_plus.raster.reference import reference_rasterization

__all__ = ["SceneSpec", "camera_poses", "large_ground_truth", "make_large_scene", "make_scene", "ring_cameras"]


# --- large scenes for GPU benchmarks ------------------------------------------------------------

ROOM_HALF = 5.0
MAX_SFM_POINTS = 100_000
CHUNK_PIXELS = 16_000_000
"""Pixels rendered per gsplat call (about two 4K views): bounds the renderer's memory."""


def large_ground_truth(n_gaussians: int, seed: int = 0) -> Dict[str, torch.Tensor]:
    """Half the Gaussians tile the six walls (flat, sized to cover them), half fill a central cluster."""
    g = torch.Generator().manual_seed(seed)
    n_wall = max(6, n_gaussians // 2)
    n_blob = max(1, n_gaussians - n_wall)
    face = torch.randint(0, 6, (n_wall,), generator=g)
    axis, sign = face // 2, (face % 2).float() * 2 - 1
    uv = (torch.rand(n_wall, 2, generator=g) * 2 - 1) * ROOM_HALF
    wall_means = torch.zeros(n_wall, 3)
    rows = torch.arange(n_wall)
    wall_means[rows, axis] = sign * ROOM_HALF
    wall_means[rows, (axis + 1) % 3] = uv[:, 0]
    wall_means[rows, (axis + 2) % 3] = uv[:, 1]
    side = 2 * ROOM_HALF / math.sqrt(n_wall / 6)  # spacing of the wall Gaussians
    wall_scales = side * (0.6 + 0.4 * torch.rand(n_wall, 3, generator=g))
    wall_scales[rows, axis] = 0.02
    # texture: stripes and a checker over the walls, so that every view has edges to fit
    p = wall_means
    wall_colors = torch.stack(
        [
            0.5 + 0.4 * torch.sin(2.0 * p[:, 0] + 1.3 * axis),
            0.5 + 0.4 * torch.sin(2.3 * p[:, 1] - 0.7 * axis),
            0.5 + 0.4 * torch.sign(torch.sin(1.7 * p[:, 2]) * torch.sin(1.7 * (p[:, 0] + p[:, 1]))),
        ],
        dim=-1,
    )
    blob_means = torch.randn(n_blob, 3, generator=g) * 0.8
    blob_scales = 0.12 * (160.0 / n_blob) ** (1 / 3) * (0.5 + torch.rand(n_blob, 3, generator=g))
    blob_colors = torch.rand(n_blob, 3, generator=g)
    n = n_wall + n_blob
    quats = torch.randn(n, 4, generator=g)
    quats[:n_wall] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # walls stay axis-aligned
    return {
        "means": torch.cat([wall_means, blob_means]),
        "scales": torch.cat([wall_scales, blob_scales]),
        "colors": torch.cat([wall_colors, blob_colors]).clamp(0, 1),
        "quats": quats / quats.norm(dim=-1, keepdim=True),
        "opacities": torch.full((n,), 0.95),
    }


def ring_cameras(n_views: int, width: int, height: int):
    """(world-to-camera [V, 4, 4], intrinsics [3, 3]): a ring at radius 3, about 65 degrees wide."""
    focal = 0.8 * width
    w2cs = []
    for i in range(n_views):
        a = 2 * math.pi * i / n_views
        pos = np.array([3.0 * math.cos(a), 3.0 * math.sin(a), 0.6 * math.sin(3 * a)])
        target = np.array([0.0, 0.0, 0.3 * math.cos(5 * a)])
        w2cs.append(_look_at_w2c(pos, target))
    K = np.array([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]])
    return np.stack(w2cs), K


def _render(
    gt: Dict[str, torch.Tensor], viewmats: torch.Tensor, Ks: torch.Tensor, width: int, height: int
) -> torch.Tensor:
    if viewmats.device.type == "cuda":
        from gsplat import rasterization

        render, _, _ = rasterization(
            gt["means"], gt["quats"], gt["scales"], gt["opacities"], gt["colors"], viewmats, Ks, width, height
        )
    else:
        render, _, _ = reference_rasterization(
            gt["means"], gt["quats"], gt["scales"], gt["opacities"], gt["colors"], viewmats, Ks, width, height
        )
    return render


def make_large_scene(
    out_dir: Union[str, Path],
    n_views: int,
    width: int,
    height: int,
    n_gaussians: int,
    device: Union[str, torch.device] = "cuda",
    seed: int = 0,
    quality: int = 90,
    writers: int = 4,
) -> Path:
    """Render ``n_views`` JPEGs of ``n_gaussians`` known Gaussians and write a COLMAP text model."""
    out_dir = Path(out_dir)
    images_dir = out_dir / "images"
    sparse = out_dir / "colmap" / "sparse" / "0"
    images_dir.mkdir(parents=True, exist_ok=True)
    sparse.mkdir(parents=True, exist_ok=True)
    device = torch.device(device)
    gt = {k: v.to(device) for k, v in large_ground_truth(n_gaussians, seed).items()}
    w2cs, K = ring_cameras(n_views, width, height)
    viewmats = torch.from_numpy(w2cs).float().to(device)
    Ks = torch.from_numpy(K).float().to(device)[None]
    chunk = max(1, CHUNK_PIXELS // (width * height))
    names = [f"frame_{i:05d}.jpg" for i in range(n_views)]
    started = time.perf_counter()

    def save(image: np.ndarray, name: str) -> None:
        Image.fromarray(image).save(images_dir / name, quality=quality)

    with ThreadPoolExecutor(max_workers=writers) as pool, torch.no_grad():
        pending = []
        for first in range(0, n_views, chunk):
            views = slice(first, min(n_views, first + chunk))
            render = _render(gt, viewmats[views], Ks.expand(views.stop - first, 3, 3), width, height)
            images = (render.clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()
            pending += [pool.submit(save, images[j], names[first + j]) for j in range(images.shape[0])]
            if views.stop == n_views or (first // chunk) % max(1, 50 // chunk) == 0:
                print(f"rendered {views.stop}/{n_views} views ({time.perf_counter() - started:.0f} s)", flush=True)
            while len(pending) > 4 * writers:  # bound the images waiting for the JPEG encoder
                pending.pop(0).result()
        for future in pending:
            future.result()
    lines = []
    for i, name in enumerate(names):
        q, t = _rotmat_to_qvec(w2cs[i][:3, :3]), w2cs[i][:3, 3]
        lines.append(f"{i + 1} {' '.join(f'{v:.10f}' for v in q)} {' '.join(f'{v:.10f}' for v in t)} 1 {name}\n\n")
    (sparse / "images.txt").write_text("# large synthetic scene (splatbench.scenes)\n" + "".join(lines))
    (sparse / "cameras.txt").write_text(f"1 PINHOLE {width} {height} {K[0, 0]} {K[1, 1]} {K[0, 2]} {K[1, 2]}\n")
    rng = np.random.default_rng(seed)
    means = gt["means"].cpu().numpy()
    colors = (gt["colors"].cpu().numpy() * 255).round().astype(int)
    idx = np.sort(rng.choice(len(means), size=min(MAX_SFM_POINTS, len(means)), replace=False))
    pts = means[idx] + rng.normal(0, 0.02, (len(idx), 3))
    (sparse / "points3D.txt").write_text(
        "".join(
            f"{k + 1} {p[0]:.6f} {p[1]:.6f} {p[2]:.6f} {c[0]} {c[1]} {c[2]} 0.5\n"
            for k, (p, c) in enumerate(zip(pts, colors[idx]))
        )
    )
    print(
        f"wrote {n_views} views ({width}x{height}, {n_gaussians} Gaussians) to {out_dir} in {time.perf_counter() - started:.0f} s"
    )
    return out_dir


def main() -> None:
    """``scripts/make_synthetic_scene.py``: a small scene for tests and demos, or ``--large`` for benchmarks.

        python scripts/make_synthetic_scene.py /tmp/scene [--views 24] [--width 64 --height 48] [--no-points]
        ns-train splat-plus --data /tmp/scene --machine.device-type cpu colmap
        python scripts/make_synthetic_scene.py /data/synth1000 --large --views 1000 --width 3840 --height 2160 \\
            --gaussians 2000000 --device cuda
    """
    parser = argparse.ArgumentParser(description=main.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scene_arguments(parser)
    parser.add_argument("--large", action="store_true", help="a benchmark scene (make_large_scene: JPEG, gsplat)")
    parser.add_argument("--gaussians", type=int, default=1_000_000, help="--large: ground-truth Gaussians")
    parser.add_argument("--device", default="cuda", help="--large: cuda (gsplat) or cpu (reference, tiny sizes)")
    parser.add_argument("--writers", type=int, default=4, help="--large: JPEG encoder threads")
    args = parser.parse_args()
    if args.large:
        make_large_scene(
            args.out_dir, args.views, args.width, args.height, args.gaussians, args.device, seed=args.seed,
            writers=args.writers,
        )  # fmt: skip
        return
    problem = clear_target(args.out_dir)  # the demo's rule: no stale photos of an earlier scene left beside the model
    if problem is not None:
        parser.error(problem)
    write_from_arguments(args)
