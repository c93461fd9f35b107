"""Camera shards: which training cameras a rank owns, and the B it renders at a step.

Entry points: :func:`cameras_for_step` (the B training cameras of a rank at a step; :func:`camera_for_step`
is B = 1), :func:`camera_shard` (the cameras a rank owns, so the only images it decodes and keeps) and
:func:`eval_share` (the eval images a rank scores).

The rule, a stateless function of (step, rank, W, N, seed, B), so a resumed run continues the same order:

* **Partition.** A seeded permutation of the N cameras is dealt round-robin to the W ranks: rank r owns
  ``sorted(perm[r::W])``, fixed for the run (sizes differ by at most one). Shards are disjoint, so
  the W x B cameras of a step are distinct across ranks whatever the step.
* **Epochs, per rank.** Rank r walks its shard (n_r cameras) in one seeded permutation per epoch of
  ``ceil(n_r / B)`` steps; step j of an epoch takes positions ``j*B ... j*B + B - 1`` of it, modulo n_r.
  Those B positions are distinct (B <= n_r), so the step's cameras are too; when n_r is not a multiple
  of B, the epoch's last step wraps to the epoch's first cameras (as torch's DistributedSampler pads
  with the first indices), never into the next epoch, so no step can draw a camera twice.
* **One rank** (W = 1, B = 1) is exactly the order of earlier releases: the permutation seeded by
  (seed, epoch) of all cameras, so one-process checkpoints resume in the same order.
"""

from __future__ import annotations

import functools
import math
from typing import List, Tuple

import numpy as np

_PARTITION_TAG = 0x53484152  # "SHAR": keeps the partition's random stream apart from the epochs' ones


@functools.lru_cache(maxsize=16)
def camera_shard(rank: int, world_size: int, num_cameras: int, seed: int) -> Tuple[int, ...]:
    """The camera indices rank ``rank`` of ``world_size`` owns, ascending (every camera on one rank)."""
    if num_cameras <= 0:
        raise ValueError("no training cameras")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of {world_size}")
    if world_size == 1:
        return tuple(range(num_cameras))
    dealt = np.random.default_rng([int(seed), _PARTITION_TAG, world_size, num_cameras]).permutation(num_cameras)
    return tuple(sorted(int(i) for i in dealt[rank::world_size]))


@functools.lru_cache(maxsize=16)
def _epoch_order(rank: int, world_size: int, num_cameras: int, seed: int, epoch: int) -> Tuple[int, ...]:
    """Rank ``rank``'s shard in the order of ``epoch``."""
    shard = camera_shard(rank, world_size, num_cameras, seed)
    # one rank: seeded by (seed, epoch) alone, the order of earlier releases
    key = [int(seed), int(epoch)] if world_size == 1 else [int(seed), int(epoch), rank, world_size]
    return tuple(shard[int(i)] for i in np.random.default_rng(key).permutation(len(shard)))


def cameras_for_step(step: int, rank: int, world_size: int, num_cameras: int, seed: int, per_step: int) -> List[int]:
    """The ``per_step`` (B) training cameras of ``rank`` at ``step``: distinct, from its own shard
    (see the module's rule); identical on every rank, for any step (resume)."""
    shard_size = len(camera_shard(rank, world_size, num_cameras, seed))
    if not 1 <= per_step <= shard_size:
        raise ValueError(
            f"{per_step} cameras per step on rank {rank} of {world_size}, whose shard holds {shard_size} "
            f"of {num_cameras} cameras"
        )
    steps_per_epoch = math.ceil(shard_size / per_step)
    epoch, within = divmod(int(step), steps_per_epoch)
    order = _epoch_order(rank, world_size, num_cameras, int(seed), epoch)
    return [order[(within * per_step + k) % shard_size] for k in range(per_step)]


def camera_for_step(step: int, rank: int, world_size: int, num_cameras: int, seed: int) -> int:
    """The training camera of ``rank`` at ``step`` with one camera per step (:func:`cameras_for_step`, B = 1)."""
    return cameras_for_step(step, rank, world_size, num_cameras, seed, 1)[0]


def eval_share(rank: int, world_size: int, num_images: int) -> List[int]:
    """The eval images rank ``rank`` decodes and scores: every W-th from ``rank`` (the ranks' shares are
    disjoint and cover the split; their sizes differ by at most one)."""
    return list(range(rank, num_images, world_size))
