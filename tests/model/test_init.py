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
