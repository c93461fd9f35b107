"""Camera sharding: :func:`camera_for_step` / :func:`cameras_for_step`, the training camera(s) of a rank at a step (disjoint shards)."""

from __future__ import annotations

import functools
from typing import List

import numpy as np


@functools.lru_cache(maxsize=4)
def _epoch_permutation(seed: int, epoch: int, num_cameras: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(num_cameras)


def camera_for_step(step: int, rank: int, world_size: int, num_cameras: int, seed: int) -> int:
    """The training camera of ``rank`` at ``step``: a stateless function, identical on every rank.

    The sequence of draws ``step * world_size + rank`` walks through one permutation per epoch
    (seeded by ``seed`` and the epoch), so within a step the ranks take consecutive, distinct entries:
    disjoint shards, every camera once per epoch, and a resumed run picks up the same order.
    """
    if num_cameras <= 0:
        raise ValueError("no training cameras")
    draw = step * world_size + rank
    epoch, position = divmod(draw, num_cameras)
    return int(_epoch_permutation(int(seed), int(epoch), int(num_cameras))[position])


def cameras_for_step(step: int, rank: int, world_size: int, num_cameras: int, seed: int, per_step: int) -> List[int]:
    """The ``per_step`` (B) training cameras of ``rank`` at ``step``: draws ``(step * W + rank) * B``
    to ``+ B - 1`` of the same sequence as :func:`camera_for_step` (which is this with B = 1), so the
    W x B cameras of a step are distinct consecutive draws: disjoint shards, every camera once per epoch."""
    first = (step * world_size + rank) * per_step
    return [camera_for_step(first + k, 0, 1, num_cameras, seed) for k in range(per_step)]
