"""The GPU preload (training/gpu_preload.py): its tasks, its side thread, and the trainer's wait for it before the
warmup. On the CPU a run has nothing to preload; the tasks themselves run here on CPU tensors."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from inprocess import build_trainer, close_writers, small_scene, trainer_config

from ns_splat_plus import upstream
from ns_splat_plus.training import gpu_preload


def _cameras(sizes):
    return SimpleNamespace(
        height=torch.tensor([[h] for h, _ in sizes]),
        width=torch.tensor([[w] for _, w in sizes]),
    )


def test_image_sizes_are_the_distinct_ones_in_camera_order_up_to_the_limit():
    cameras = _cameras([(600, 800), (600, 800), (1000, 1500), (600, 800), (9, 7), (30, 40), (50, 60)])
    assert gpu_preload.image_sizes(cameras) == [(600, 800), (1000, 1500), (9, 7), (30, 40)]
    assert gpu_preload.image_sizes(cameras, limit=2) == [(600, 800), (1000, 1500)]


def test_downscale_factors_are_splatfactos_schedule():
    assert gpu_preload.downscale_factors(0) == []
    assert gpu_preload.downscale_factors(1) == [2]
    assert gpu_preload.downscale_factors(3) == [2, 4, 8]


def test_the_tasks_compute_tritons_key_and_each_downscale_the_run_will_take(monkeypatch):
    resized, keys = [], []
    real_resize = gpu_preload.resize_images

    def recording_resize(images, d):
        resized.append((tuple(images.shape), d))
        return real_resize(images, d)

    monkeypatch.setattr(gpu_preload, "resize_images", recording_resize)
    monkeypatch.setattr(upstream, "prepare_triton_cache_key", lambda: keys.append("key"))
    tasks = gpu_preload.preload_tasks(torch.device("cpu"), [(12, 16), (3, 40)], [2, 4])
    assert [name for name, _ in tasks] == ["triton_key", "downscales", "view_matrix"]
    for _, task in tasks:
        task()
    assert keys == ["key"]
    # every size at every factor that fits in it (a 3-row photo is not downscaled by 4)
    assert resized == [((1, 12, 16, 3), 2), ((1, 12, 16, 3), 4), ((1, 3, 40, 3), 2)]


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
    preload = gpu_preload.start_gpu_preload("cpu", _cameras([(12, 16)]), num_downscales=2)
    assert preload.thread is None
    assert preload.join() == {"tasks": [], "seconds": {}, "errors": {}}


def test_the_trainer_starts_the_preload_before_the_decoding_and_waits_for_it_before_the_warmup(tmp_path, monkeypatch):
    """A stand-in preload of PRELOAD_S: it starts before the photos decode, with the training cameras and the
    model's downscales, and the trainer waits for it in its own part of the start-up record."""
    preload_s, calls = 0.8, []

    def slow_preload(device, cameras, num_downscales):
        calls.append((str(device), len(cameras), num_downscales, time.time()))
        return gpu_preload.GpuPreload(tasks=[("stand-in", lambda: time.sleep(preload_s))]).start()

    monkeypatch.setattr(gpu_preload, "start_gpu_preload", slow_preload)
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / "out", steps=2)
    trainer = build_trainer(config)
    try:
        trainer.train()
    finally:
        close_writers()
    record = json.loads((trainer.base_dir / "ranks" / "startup_rank0.json").read_text())
    ((device, cameras, num_downscales, started_at),) = calls
    assert device == "cpu"
    assert cameras == len(trainer.pipeline.datamanager.train_dataset)
    assert num_downscales == trainer.pipeline.model.config.num_downscales
    assert started_at <= record["marks"]["decode_start"]  # beside the decoding, not after it
    assert record["gpu_preload"]["tasks"] == ["stand-in"]
    assert record["gpu_preload"]["seconds"]["stand-in"] >= preload_s
    # what the decoding and the checks did not cover was waited for before the warmup, in its own part
    covered = record["marks"]["preload_wait_start"] - started_at
    assert record["parts_seconds"]["preload_wait"] == pytest.approx(max(preload_s - covered, 0.0), abs=0.15)
    assert record["marks"]["warmup_start"] >= started_at + preload_s


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_side_thread_leaves_tritons_key_for_the_main_thread():
    """On a GPU: every task runs without error, and Triton's key is computed once, by the side thread."""
    from triton.runtime.cache import triton_key

    triton_key.cache_clear()
    record = gpu_preload.start_gpu_preload("cuda", _cameras([(64, 96), (50, 70)]), num_downscales=2).join()
    assert record["tasks"] == ["triton_key", "downscales", "view_matrix"]
    assert record["errors"] == {}
    assert triton_key.cache_info().misses == 1
    triton_key()
    assert triton_key.cache_info().misses == 1  # the main thread's call found it
