"""Replica checks of a data-parallel run: cheap periodic comparisons and a bitwise final check.

Entry points: :func:`check_replicas` (every rank's integer checksums of its parameters' bits against rank 0's),
:func:`parameter_checksum` (the one SHA-256 checksum of named tensors, also of the initial
Gaussians), :class:`RankMonitor` (the trainer's callbacks; ``<run>/ranks/rank<k>.json``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import torch
import torch.distributed as dist
from nerfstudio.utils.rich_utils import CONSOLE
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.config import DataParallelConfig
from ns_splat_plus.upstream import TrainerLike


class ReplicaDivergenceError(SplatPlusError):
    """Ranks that should hold identical parameters do not."""


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""The integer type a tensor's elements are read as, by element size."""
_CHUNK_ELEMENTS = 1 << 22
"""Elements widened to int64 at a time (32 MiB): the checksum never copies a whole parameter."""


def _bits_checksum(t: Tensor) -> Tensor:
    """(element count, sum, row-position-weighted sum) of ``t``'s raw bits, read as integers.

    Args:
        t: [rows, ...] any dtype (a 0-d tensor counts as one row).

    Returns:
        [3] int64. Each element's bits, read as a signed integer of the element's width, are summed
        per row in int64, a chunk of rows at a time; the row sums are then added up, once plain and
        once weighted by row position 1, 2, ... (a reordering of the Gaussians changes that one).
        Integer sums are exact (the weighted one wraps modulo 2^64), whatever the reduction order:
        equal bits give equal checksums on every device, and any change of one element's bits
        changes the plain sum.
    """
    t = t.detach()
    count = torch.full((), t.numel(), dtype=torch.int64, device=t.device)
    if t.numel() == 0:
        return torch.stack([count, torch.zeros_like(count), torch.zeros_like(count)])
    bits = t.reshape(1 if t.dim() == 0 else t.shape[0], -1).view(_BITS[t.element_size()])
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // bits.shape[1])
    row_sums = torch.cat([part.sum(dim=1, dtype=torch.int64) for part in bits.split(rows_per_chunk)])
    position = torch.arange(1, row_sums.shape[0] + 1, dtype=torch.int64, device=t.device)
    return torch.stack([count, row_sums.sum(), (row_sums * position).sum()])


def _param_checksums(named: Mapping[str, Tensor]) -> Tensor:
    rows = [_bits_checksum(named[name]).to(collectives.collective_device()) for name in sorted(named)]
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.int64)


def check_replicas(named: Mapping[str, Tensor], step: int) -> None:
    """Raise ReplicaDivergenceError on every rank if any rank's parameters differ from rank 0's.

    Compares an integer checksum of each parameter's raw bits (:func:`_bits_checksum`, computed where
    the parameter lives, without a float64 copy): replicas apply the same averaged gradients and
    refine decisions, so they stay bitwise identical.
    """
    if not collectives.is_distributed():
        return
    stats = _param_checksums(named)
    gathered = [torch.empty_like(stats) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, stats)
    names = sorted(named)
    reference = gathered[0]
    for r, other in enumerate(gathered[1:], start=1):
        if not torch.equal(other, reference):
            a, b = reference.view(-1, 3).tolist(), other.view(-1, 3).tolist()
            differing = [
                f"{names[i]} (elements {a[i][0]} vs {b[i][0]}, bit checksums {a[i][1]:x}/{a[i][2]:x} vs "
                f"{b[i][1]:x}/{b[i][2]:x})"
                for i in range(len(names))
                if a[i] != b[i]
            ]
            raise ReplicaDivergenceError(
                f"step {step}: rank {r}'s parameters differ from rank 0's: {', '.join(differing)}. "
                "The replicas no longer train the same model (non-identical densification or a missed "
                "gradient all-reduce); stopping instead of producing a silently wrong result."
            )


def parameter_checksum(named: Mapping[str, Tensor]) -> str:
    """SHA-256 (16 hex digits) of names, shapes and bytes of the tensors, in name order."""
    digest = hashlib.sha256()
    for name in sorted(named):
        t = named[name].detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()[:16]


class RankMonitor:
    """Per-rank bookkeeping of a data-parallel run: checksums logged, compared and written.

    ``<run dir>/ranks/rank<r>.json`` holds, per rank: the initial checksum of every rank, the final
    parameter checksum and Gaussian count, and how many replica checks passed.
    """

    def __init__(self, trainer: TrainerLike, config: DataParallelConfig) -> None:
        self.trainer = trainer
        self.config = config
        self.rank = collectives.get_rank()
        self.world_size = collectives.get_world_size()
        self.checks_passed = 0
        self.record: Dict[str, Any] = {"rank": self.rank, "world_size": self.world_size}

    @property
    def enabled(self) -> bool:
        return collectives.is_distributed()

    def _model(self):
        return self.trainer.pipeline.model

    def _named_params(self) -> Dict[str, Tensor]:
        return {name: p for name, p in self._model().named_parameters()}

    def _write(self) -> None:
        path = Path(self.trainer.base_dir) / "ranks" / f"rank{self.rank}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.record, indent=2))

    def record_initial(self) -> None:
        """Every rank's checksum of the Gaussians training starts from, gathered, logged and written: the
        initial ones (rank 0's, broadcast), or, on a resume, the checkpoint's, which each rank loaded itself:
        ranks that read different files (another copy of the run folder on another node) stop here."""
        if not self.enabled:
            return
        resumed_at = upstream.start_step(self.trainer)  # > 0: the checkpoint's Gaussians replaced the initial ones
        local: Optional[str]
        if resumed_at > 0:
            local = parameter_checksum(self._named_params())
            what = f"Gaussians of the checkpoint (step {resumed_at - 1})"
        else:
            local = getattr(self._model(), "initial_checksum", None)
            what = "initial Gaussians"
        gathered: List[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, local)
        match = all(c == gathered[0] for c in gathered)
        CONSOLE.log(f"rank {self.rank} of {self.world_size}: {what} checksum {local}")
        self.record.update(
            {
                "device": str(self.trainer.device),
                "initial_checksum": local,
                "initial_checksums": gathered,
                "initial_match": match,
                "resumed_at_step": resumed_at,
            }
        )
        self._write()
        if not match:
            ranks = ", ".join(f"rank {r}: {c}" for r, c in enumerate(gathered))
            raise ReplicaDivergenceError(
                f"the ranks start from different {what} ({ranks})",
                "give every rank the same run folder (one shared file system, or identical copies of it)",
            )
        if self.rank == 0:
            CONSOLE.log(f"{what} identical on all {self.world_size} ranks: checksum {gathered[0]}")

    def after_iteration(self, step: int) -> None:
        every = self.config.replica_check_every
        if self.enabled and every > 0 and step > 0 and step % every == 0:
            check_replicas(self._named_params(), step)
            self.checks_passed += 1

    def after_train(self, step: int) -> None:
        if not self.enabled:
            return
        params = self._named_params()
        local = parameter_checksum(params)
        gathered: List[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, local)
        gauss = getattr(self._model(), "gauss_params", None)
        num_gaussians = int(gauss["means"].shape[0]) if gauss is not None else None
        self.record.update(
            {
                "final_step": step,
                "final_checksum": local,
                "final_checksums": gathered,
                "final_num_gaussians": num_gaussians,
                "replica_checks_passed": self.checks_passed,
            }
        )
        self._write()
        mismatched = [r for r, c in enumerate(gathered) if c != gathered[0]]
        if mismatched:
            raise ReplicaDivergenceError(
                f"after step {step} the parameters of ranks {mismatched} differ from rank 0's (checksums {gathered})"
            )
        if self.rank == 0:
            CONSOLE.log(
                f"final parameters identical on all {self.world_size} ranks: {num_gaussians} Gaussians, checksum {local}"
            )
        collectives.barrier()
        from ns_splat_plus.parallel.launch import mark_finished_cleanly

        mark_finished_cleanly()

    def callbacks(self) -> list:
        from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

        if not self.enabled:
            return []
        return [
            TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], self.after_iteration),
            TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN], self.after_train),
        ]
