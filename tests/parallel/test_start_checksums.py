"""Every rank's checksum of the Gaussians training starts from (RankMonitor.record_initial), on a fake group of two
ranks: the initial Gaussians on a fresh start, the checkpoint's on a resume (a line about the initial ones described
Gaussians the checkpoint had replaced), and ranks that loaded different Gaussians stop with one message."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from ns_splat_plus.parallel import collectives, replicas
from ns_splat_plus.parallel.config import DataParallelConfig


def _monitor(tmp_path, monkeypatch, start_step: int, other_rank_checksum=None):
    model = torch.nn.Module()
    model.means = torch.nn.Parameter(torch.linspace(0, 1, 12).reshape(4, 3))
    model.initial_checksum = "initial-0123"
    trainer = SimpleNamespace(pipeline=SimpleNamespace(model=model), _start_step=start_step, base_dir=tmp_path)
    trainer.device = torch.device("cpu")
    monkeypatch.setattr(collectives, "is_distributed", lambda: True)
    monkeypatch.setattr(collectives, "get_rank", lambda: 0)
    monkeypatch.setattr(collectives, "get_world_size", lambda: 2)

    def all_gather_object(gathered, local):  # rank 1 gathers its own, or what the test gives it
        gathered[:] = [local, local if other_rank_checksum is None else other_rank_checksum]

    monkeypatch.setattr(replicas.dist, "all_gather_object", all_gather_object)
    logged = []
    monkeypatch.setattr(replicas.CONSOLE, "log", lambda text: logged.append(text))
    return replicas.RankMonitor(trainer, DataParallelConfig()), model, logged


def test_a_fresh_start_compares_the_initial_gaussians(tmp_path, monkeypatch):
    monitor, _, logged = _monitor(tmp_path, monkeypatch, start_step=0)
    monitor.record_initial()
    assert logged[-1] == "initial Gaussians identical on all 2 ranks: checksum initial-0123"
    record = json.loads((tmp_path / "ranks" / "rank0.json").read_text())
    assert record["initial_checksums"] == ["initial-0123"] * 2 and record["resumed_at_step"] == 0


def test_a_resume_compares_the_checkpoint_s_gaussians(tmp_path, monkeypatch):
    monitor, model, logged = _monitor(tmp_path, monkeypatch, start_step=41)
    monitor.record_initial()
    loaded = replicas.parameter_checksum(dict(model.named_parameters()))
    assert loaded != "initial-0123"
    assert logged == [
        f"rank 0 of 2: Gaussians of the checkpoint (step 40) checksum {loaded}",
        f"Gaussians of the checkpoint (step 40) identical on all 2 ranks: checksum {loaded}",
    ]
    record = json.loads((tmp_path / "ranks" / "rank0.json").read_text())
    assert record["initial_checksum"] == loaded and record["initial_match"] and record["resumed_at_step"] == 41


def test_ranks_that_loaded_different_gaussians_stop(tmp_path, monkeypatch):
    monitor, model, logged = _monitor(tmp_path, monkeypatch, start_step=41, other_rank_checksum="another-copy")
    with pytest.raises(replicas.ReplicaDivergenceError) as raised:
        monitor.record_initial()
    loaded = replicas.parameter_checksum(dict(model.named_parameters()))
    assert f"rank 0: {loaded}, rank 1: another-copy" in str(raised.value)
    assert "the same run folder" in str(raised.value) and not any("identical" in line for line in logged)
    assert json.loads((tmp_path / "ranks" / "rank0.json").read_text())["initial_match"] is False
