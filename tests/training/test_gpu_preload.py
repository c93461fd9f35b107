"""The GPU preload (training/gpu_preload.py): its tasks, its side thread, and the trainer's wait for it before the
warmup. On the CPU a run has nothing to preload; the tasks themselves run here on CPU tensors."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import upstream
from ns_splat_plus.training import gpu_preload


def test_the_tasks_compute_tritons_key_then_an_inverse(monkeypatch):
    keys, inverses = [], []
    monkeypatch.setattr(upstream, "prepare_triton_cache_key", lambda: keys.append("key"))
    real_inverse = torch.inverse
    monkeypatch.setattr(torch, "inverse", lambda m: inverses.append(tuple(m.shape)) or real_inverse(m))
    tasks = gpu_preload.preload_tasks(torch.device("cpu"))
    assert [name for name, _ in tasks] == ["triton_key", "inverse"]
    for _, task in tasks:
        task()
    assert keys == ["key"] and inverses == [(1, 4, 4)]  # a batch of one camera, as view_matrices inverts


def test_the_side_thread_runs_the_tasks_off_the_main_thread_and_keeps_their_errors():
    ran_on = []

    def slow():
        ran_on.append(threading.current_thread().name)
        time.sleep(0.3)

    def broken():
        raise RuntimeError("no such kernel")

    started = time.perf_counter()
    preload = gpu_preload.GpuPreload(tasks=[("slow", slow), ("broken", broken)]).start()
    assert time.perf_counter() - started < 0.2  # start() returns while the tasks run
    record = preload.join()
    assert ran_on == ["splat-plus-gpu-preload"] and ran_on[0] != threading.current_thread().name
    assert record["tasks"] == ["slow", "broken"]
    assert record["seconds"]["slow"] >= 0.3
    assert record["errors"] == {"broken": "RuntimeError: no such kernel"}


def test_a_cpu_run_has_nothing_to_preload():
    preload = gpu_preload.start_gpu_preload("cpu")
    assert preload.thread is None
    record = preload.join()
    assert (record["tasks"], record["seconds"], record["errors"]) == ([], {}, {})


def test_the_trainer_starts_the_preload_before_the_dataset_and_waits_for_it_before_the_warmup(tmp_path, monkeypatch):
    """A stand-in preload of PRELOAD_S: it starts when the trainer's set-up begins, before the dataset is parsed and
    the photos decode, and the trainer waits for what is left of it in its own part of the start-up record."""
    preload_s, calls = 1.5, []

    def slow_preload(device):
        calls.append((str(device), time.time()))
        return gpu_preload.GpuPreload(tasks=[("stand-in", lambda: time.sleep(preload_s))]).start()

    monkeypatch.setattr(gpu_preload, "start_gpu_preload", slow_preload)
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=2)
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    record = json.loads((trainer.base_dir / "ranks" / "startup_rank0.json").read_text())
    ((device, started_at),) = calls
    assert device == "cpu"
    marks = record["marks"]
    assert started_at <= marks["dataset_parse_start"] <= marks["decode_start"]  # beside the set-up, not after it
    assert record["gpu_preload"]["tasks"] == ["stand-in"]
    assert record["gpu_preload"]["seconds"]["stand-in"] >= preload_s
    # what the set-up did not cover was waited for before the warmup, in its own part
    assert marks["warmup_start"] >= started_at + preload_s
    covered = marks["preload_wait_start"] - started_at
    assert record["parts_seconds"]["preload_wait"] == pytest.approx(max(preload_s - covered, 0.0), abs=0.15)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_side_thread_leaves_tritons_key_for_the_main_thread():
    """On a GPU: every task runs without error, and Triton's key is computed once, by the side thread."""
    from triton.runtime.cache import triton_key

    triton_key.cache_clear()
    record = gpu_preload.start_gpu_preload("cuda").join()
    assert record["tasks"] == ["triton_key", "inverse"]
    assert record["errors"] == {}
    assert triton_key.cache_info().misses == 1
    triton_key()
    assert triton_key.cache_info().misses == 1  # the main thread's call found it
