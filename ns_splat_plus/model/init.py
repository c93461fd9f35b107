"""Deterministic Gaussian initialization.

Same seed, same points -> bitwise-identical initial Gaussians in every process and on every rank:

* every random draw comes from one dedicated ``torch.Generator`` seeded with the run's seed, never
  from the global RNG (which nerfstudio seeds with ``seed + rank``);
* SfM points are put in a canonical order first (dataparsers may hand them over in any order);
* everything is computed on the CPU in float32 and only then moved to the training device;
* under torch.distributed, rank 0's tensors are broadcast and every rank checks the checksum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from ns_splat_plus.errors import SplatPlusError, UserInputError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.replicas import parameter_checksum

GAUSSIAN_PARAM_NAMES = ("means", "scales", "quats", "features_dc", "features_rest", "opacities")
SH_C0 = 0.28209479177387814


class InitializationError(UserInputError):
    """The points given for initialization cannot be used (empty, non-finite, wrong shape)."""


@dataclass(frozen=True)
class InitSettings:
    seed: int
    sh_degree: int = 3
    random_init: bool = False
    num_random: int = 50000
    random_scale: float = 10.0
    initial_opacity: float = 0.1


def canonical_point_order(xyz: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """Permutation sorting points by (x, y, z, r, g, b): independent of the order a dataparser used."""
    keys = [rgb[:, 2], rgb[:, 1], rgb[:, 0], xyz[:, 2], xyz[:, 1], xyz[:, 0]]  # lexsort: last key first
    return np.lexsort(keys)


def _validate_points(xyz: Tensor, rgb: Tensor) -> None:
    if xyz.ndim != 2 or xyz.shape[1] != 3:
        raise InitializationError(f"SfM points must have shape [N, 3], got {tuple(xyz.shape)}")
    if xyz.shape[0] == 0:
        raise InitializationError(
            "the dataset's SfM point cloud is empty. Run COLMAP (or ns-process-data) to get points3D, "
            "or start from random Gaussians with --pipeline.model.random-init True"
        )
    if rgb.shape[0] != xyz.shape[0]:
        raise InitializationError(f"{xyz.shape[0]} SfM points but {rgb.shape[0]} colours")
    bad = (~torch.isfinite(xyz).all(dim=1)).sum().item()
    if bad:
        raise InitializationError(
            f"{bad} of {xyz.shape[0]} SfM points have non-finite coordinates (NaN/inf); "
            "clean the point cloud (e.g. re-run COLMAP) or use --pipeline.model.random-init True"
        )


def _knn_mean_distance(points: np.ndarray, k: int = 3) -> np.ndarray:
    # scipy's k-d tree (scipy is imported with nerfstudio already; scikit-learn's import took 1.2 s of
    # start-up on the GPU machine): the same exact Euclidean distances (tests/model/test_init.py)
    from scipy.spatial import cKDTree

    k = min(k, max(points.shape[0] - 1, 1))
    distances, _ = cKDTree(points).query(points, k=k + 1)
    distances = np.where(np.isfinite(distances), distances, 0.0)  # one point alone: no neighbour (inf)
    dist = distances[:, 1:].astype(np.float64).mean(axis=1)
    # duplicate points have distance 0: give them a tiny but finite scale (log(0) = -inf)
    positive = dist[dist > 0]
    floor = positive.min() if positive.size else 1e-3
    return np.maximum(dist, floor * 1e-2).astype(np.float32)


def _random_unit_quats(n: int, generator: torch.Generator) -> Tensor:
    # Uniform random rotations (Shoemake), as splatfacto's random_quat_tensor but with our generator.
    u, v, w = torch.rand(3, n, generator=generator)
    return torch.stack(
        [
            torch.sqrt(1 - u) * torch.sin(2 * math.pi * v),
            torch.sqrt(1 - u) * torch.cos(2 * math.pi * v),
            torch.sqrt(u) * torch.sin(2 * math.pi * w),
            torch.sqrt(u) * torch.cos(2 * math.pi * w),
        ],
        dim=-1,
    )


def initial_gaussians(settings: InitSettings, seed_points: Optional[Tuple[Tensor, Tensor]] = None) -> Dict[str, Tensor]:
    """The initial Gaussian parameters (CPU, float32), a pure function of ``settings`` and the points.

    ``seed_points`` is nerfstudio's ``(xyz [N, 3], rgb [N, 3] in 0..255)``; without it (or with
    ``random_init``) Gaussians are drawn uniformly in a cube of side ``random_scale``.
    """
    generator = torch.Generator(device="cpu").manual_seed(int(settings.seed))
    dim_sh = (settings.sh_degree + 1) ** 2
    use_points = seed_points is not None and not settings.random_init
    if use_points:
        assert seed_points is not None
        xyz = seed_points[0].detach().to("cpu", torch.float64)
        rgb = seed_points[1].detach().to("cpu", torch.float64)
        _validate_points(xyz, rgb)
        order = canonical_point_order(xyz.numpy(), rgb.numpy())
        means = torch.from_numpy(xyz.numpy()[order]).float()
        colors = torch.from_numpy(rgb.numpy()[order]).float().clamp(0, 255) / 255.0
    else:
        if settings.num_random <= 0:
            raise InitializationError(f"num_random must be positive, got {settings.num_random}")
        means = (torch.rand(settings.num_random, 3, generator=generator) - 0.5) * settings.random_scale
        colors = None
    n = means.shape[0]
    scales = torch.log(torch.from_numpy(_knn_mean_distance(means.numpy()))).unsqueeze(-1).repeat(1, 3)
    quats = _random_unit_quats(n, generator)
    if colors is not None:
        if settings.sh_degree > 0:
            features_dc = (colors - 0.5) / SH_C0
        else:
            # splatfacto's logit (eps 1e-10) in float64: in float32 1 - 1e-10 rounds to 1, so a white point would
            # start at +inf (splatfacto trains it as a frozen white; the finiteness check would stop at step 0)
            features_dc = torch.logit(colors.double(), eps=1e-10).float()
    else:
        features_dc = torch.rand(n, 3, generator=generator)
    features_rest = torch.zeros(n, dim_sh - 1, 3)
    opacities = torch.logit(torch.full((n, 1), settings.initial_opacity))
    params = {
        "means": means,
        "scales": scales,
        "quats": quats,
        "features_dc": features_dc,
        "features_rest": features_rest,
        "opacities": opacities,
    }
    # contiguous, owning tensors: DDP-style broadcasts and optimizers need plain strides
    return {k: v.contiguous().clone() for k, v in params.items()}


DEFAULT_SEED = 42
"""Seed of the initial Gaussians when neither --pipeline.model.init-seed nor the run's --machine.seed set one."""


def resolve_seed(init_seed: Optional[int]) -> int:
    """The seed of the initial Gaussians (and of densification's draws): ``init_seed`` or the default.

    ns-train sets ``init_seed`` to ``--machine.seed`` at launch (SplatPlusTrainerConfig); a model
    built without a trainer (tests, old configs) falls back to :data:`DEFAULT_SEED`.
    """
    return DEFAULT_SEED if init_seed is None else int(init_seed)


def checksum(params: Dict[str, Tensor]) -> str:
    """The checksum of the Gaussian parameters (:func:`~ns_splat_plus.parallel.replicas.parameter_checksum`)."""
    return parameter_checksum({name: params[name] for name in GAUSSIAN_PARAM_NAMES})


def broadcast_from_rank0(params: Dict[str, Tensor], device: torch.device) -> Dict[str, Tensor]:
    """Rank 0's parameters on every rank (no-op without torch.distributed); then checks checksums.

    Raises RuntimeError naming the ranks whose parameters differ after the broadcast.
    """
    import torch.distributed as dist

    if not collectives.is_distributed():
        return params
    out = {}
    for name in GAUSSIAN_PARAM_NAMES:
        t = params[name].to(device).contiguous()
        dist.broadcast(t, src=0)
        out[name] = t.cpu()
    local = checksum(out)
    gathered = collectives.all_gather_object(local)
    mismatched = [r for r, c in enumerate(gathered) if c != gathered[0]]
    if mismatched:
        raise SplatPlusError(f"initial Gaussians differ across ranks after broadcast (ranks {mismatched}): {gathered}")
    return out
