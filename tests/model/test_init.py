"""The initial scales' nearest-neighbour distances (model/init.py): scipy's k-d tree gives scikit-learn's
exact distances bitwise (the initial Gaussians of earlier versions stay the same)."""

from __future__ import annotations

import numpy as np
import pytest

from ns_splat_plus.model import init


def _sklearn_mean_distance(points: np.ndarray, k: int = 3) -> np.ndarray:
    from sklearn.neighbors import NearestNeighbors

    k = min(k, max(points.shape[0] - 1, 1))
    distances, _ = NearestNeighbors(n_neighbors=k + 1, algorithm="kd_tree").fit(points).kneighbors(points)
    dist = distances[:, 1:].astype(np.float64).mean(axis=1)
    positive = dist[dist > 0]
    floor = positive.min() if positive.size else 1e-3
    return np.maximum(dist, floor * 1e-2).astype(np.float32)


@pytest.mark.parametrize("n", [2, 3, 4, 57, 3000])
def test_knn_mean_distance_is_scikit_learns_bitwise(n):
    rng = np.random.default_rng(n)
    points = (rng.standard_normal((n, 3)) * rng.uniform(0.01, 10.0, size=3)).astype(np.float32)
    points[n // 2] = points[0]  # a duplicate point: distance 0, floored
    got = init._knn_mean_distance(points)
    assert got.dtype == np.float32 and got.shape == (n,)
    assert np.array_equal(got, _sklearn_mean_distance(points))


def test_one_point_gets_a_small_finite_scale():
    got = init._knn_mean_distance(np.zeros((1, 3), np.float32))
    assert got.shape == (1,) and np.isfinite(got).all() and 0 < got[0] < 1e-3


def test_colour_only_gaussians_start_finite_from_black_and_white_points():
    """--pipeline.model.sh-degree 0 starts each colour at splatfacto's logit (eps 1e-10). In float32, 1 - 1e-10 is 1,
    so a white point (255) would start at +inf, and the finiteness check would stop the run at step 0."""
    import torch

    xyz = torch.arange(12, dtype=torch.float32).reshape(4, 3)  # x increasing: the canonical order is this one
    rgb = torch.tensor([[0, 0, 0], [255, 255, 255], [128, 64, 1], [254, 255, 0]], dtype=torch.uint8)
    features_dc = init.initial_gaussians(init.InitSettings(seed=0, sh_degree=0), (xyz, rgb))["features_dc"]
    assert features_dc.dtype == torch.float32 and torch.isfinite(features_dc).all()
    # the model's colour is the sigmoid of it: the points' colours back, to float32 rounding
    assert torch.allclose(torch.sigmoid(features_dc), rgb.float() / 255.0, rtol=0, atol=1e-6)
    # splatfacto's extremes: logit(1e-10) and logit(1 - 1e-10), about -23.03 and +23.03
    assert features_dc[1].tolist() == pytest.approx([23.0259] * 3, abs=1e-3)
    assert features_dc[0].tolist() == pytest.approx([-23.0259] * 3, abs=1e-3)
