"""Rank-local images: each rank decodes and keeps only its own shard of the training cameras, and
the all-images evaluation is split across the ranks (issue 31, item 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from inprocess import build_trainer, close_writers, small_scene, trainer_config
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig
from shared_runs import two_ranks_with_evaluations

from ns_splat_plus import evaluation
from ns_splat_plus.parallel import agreement, collectives, sharding
from ns_splat_plus.parallel.sharding import camera_shard, cameras_for_step, eval_share
from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig
from ns_splat_plus.training.images.stores import HostImageStore, StreamingImageStore

# --- the rule: a stateless function of (step, rank, W, N, seed, B) -----------------------------------


CASES = [(n, w, b) for n in (10, 23, 241) for w in (1, 2, 3, 4) for b in (1, 2, 3) if w * b <= n]
"""(N, W, B), W x B <= N (more is refused at start-up: inputs.check_cameras_per_step_fits)."""


@pytest.mark.parametrize("n, world, per_step", CASES)
def test_shards_are_disjoint_and_every_step_draws_distinct_cameras(n, world, per_step):
    seed = 11
    shards = [camera_shard(r, world, n, seed) for r in range(world)]
    assert sorted(c for shard in shards for c in shard) == list(range(n))  # disjoint, covering every camera
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    epochs = 3
    steps = epochs * -(-max(map(len, shards)) // per_step)
    drawn = {r: [] for r in range(world)}
    for step in range(steps):
        step_cams = []
        for r in range(world):
            cams = cameras_for_step(step, r, world, n, seed, per_step)
            assert len(cams) == per_step and set(cams) <= set(shards[r])
            drawn[r].append(cams)
            step_cams += cams
        # the W x B cameras of a step are distinct, also when it straddles a rank's epoch end (n not a multiple)
        assert len(set(step_cams)) == world * per_step, (step, step_cams)
    for r, shard in enumerate(shards):
        per_epoch = -(-len(shard) // per_step)
        for epoch in range(epochs):
            seen = {c for cams in drawn[r][epoch * per_epoch : (epoch + 1) * per_epoch] for c in cams}
            assert seen == set(shard), f"rank {r}, epoch {epoch}: its whole shard"


def test_a_resumed_run_continues_the_same_order():
    """A new process (empty caches) asked for steps from the middle gets what the first run got."""
    n, world, seed, per_step = 23, 3, 5, 2
    first = {(s, r): cameras_for_step(s, r, world, n, seed, per_step) for s in range(40) for r in range(world)}
    sharding.camera_shard.cache_clear()
    sharding._epoch_order.cache_clear()
    for s in range(17, 40):
        for r in range(world):
            assert cameras_for_step(s, r, world, n, seed, per_step) == first[(s, r)]
    # the partition is seeded: another seed deals other shards
    assert camera_shard(0, world, n, seed) != camera_shard(0, world, n, seed + 1)


def test_eval_shares_split_the_eval_images():
    shares = [eval_share(r, 3, 8) for r in range(3)]
    assert sorted(i for share in shares for i in share) == list(range(8))
    assert eval_share(0, 1, 8) == list(range(8))


# --- a rank holds only its shard ------------------------------------------------------------------


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return small_scene(tmp_path_factory.mktemp("scene"))  # 16 views of 48x36: 14 train, 2 eval


def _as_rank(monkeypatch, rank: int, world: int) -> None:
    monkeypatch.setattr(collectives, "get_rank", lambda: rank)
    monkeypatch.setattr(collectives, "get_world_size", lambda: world)
    # one process plays rank `rank` of `world`: there are no other ranks to agree on the dataset with
    monkeypatch.setattr(agreement, "agree", lambda values: {})


@pytest.mark.parametrize("image_memory", ["host", "stream"])
def test_a_rank_decodes_and_holds_only_its_shard(scene, monkeypatch, image_memory):
    _as_rank(monkeypatch, 1, 3)
    config = SplatPlusDataManagerConfig(
        data=scene, dataparser=ColmapDataParserConfig(), cache_images_type="uint8", image_memory=image_memory
    )
    datamanager = config.setup(device="cpu")
    n = len(datamanager.train_dataset)
    shard = list(camera_shard(1, 3, n, config.train_cameras_sampling_seed))
    store = datamanager.cached_train
    assert store.indices == shard and len(store) == len(shard) < n
    heights, widths = datamanager.train_dataset.cameras.height, datamanager.train_dataset.cameras.width
    shard_bytes = sum(int(heights[i]) * int(widths[i]) * 3 for i in shard)
    assert datamanager.image_plan.num_images == len(shard) and datamanager.image_plan.total_bytes == shard_bytes
    assert datamanager.image_plan.shard_of == n
    record = datamanager.image_record["train"]
    assert record["count"] == len(shard) and record["of"] == n and record["indices"] == shard
    other = next(i for i in range(n) if i not in shard)
    with pytest.raises(IndexError, match="not among the"):
        store[other]  # another rank's image: a bug, never decoded here
    if image_memory == "host":
        assert isinstance(store, HostImageStore) and store.nbytes == record["bytes"] == shard_bytes
        assert record["decoded"] == len(shard)  # only the shard's photos were decoded
    else:
        assert isinstance(store, StreamingImageStore) and record["decoded"] == 0
    for step in range(3 * n):  # several epochs of this rank's shard
        camera, data = datamanager.next_train(step)
        assert camera.metadata["cam_idx"] in shard
        assert data["image"].shape[:2] == (heights[camera.metadata["cam_idx"]], widths[camera.metadata["cam_idx"]])
    # the eval images: this rank's share only
    eval_store = datamanager.cached_eval
    assert eval_store.indices == eval_share(1, 3, len(datamanager.eval_dataset))
    assert datamanager.image_record["eval"]["count"] == len(eval_store)
    if isinstance(store, StreamingImageStore):
        store.close()


# --- evaluation split across ranks -----------------------------------------------------------------


def test_split_evaluation_gives_the_one_process_numbers(scene, tmp_path, monkeypatch):
    """Each of 2 (simulated) ranks scores its share; gathered, the report equals the one-process one."""
    trainer = build_trainer(trainer_config(scene, tmp_path / "out", steps=1))
    try:
        full = evaluation.evaluate_all_images(trainer.pipeline)
        parts = []
        for rank in range(2):
            _as_rank(monkeypatch, rank, 2)
            monkeypatch.setattr(collectives, "all_gather_object", lambda obj: [obj])  # this rank's part alone
            parts.append(evaluation.evaluate_all_images(trainer.pipeline))
        assert [p.scored_here for p in parts] == [len(eval_share(r, 2, full.split["num_images"])) for r in range(2)]
        monkeypatch.setattr(collectives, "all_gather_object", lambda obj: [p.per_image for p in parts])
        merged = evaluation.evaluate_all_images(trainer.pipeline)
    finally:
        close_writers()
    assert full.scored_here == full.split["num_images"] == 2
    assert [m["index"] for m in merged.per_image] == [m["index"] for m in full.per_image]
    for key in ("psnr", "ssim"):
        assert merged.averages(get_std=True)[key] == pytest.approx(full.averages(get_std=True)[key], abs=1e-6)
        assert merged.averages(get_std=True)[f"{key}_std"] == pytest.approx(full.averages(get_std=True)[f"{key}_std"])


# --- the real CLI: torchrun, 2 CPU ranks -----------------------------------------------------------


@pytest.mark.slow
def test_torchrun_two_ranks_hold_their_shards_and_evaluate_once(tmp_path_factory):
    """torchrun, 2 CPU ranks x 2 cameras per step, 21 training photos (not a multiple of 4): each rank's
    record names its shard (count and bytes), the all-images evaluation scores every eval photo once
    across the ranks, and its numbers equal ns-eval's (one process) on the run's checkpoint.

    The run (shared_runs.two_ranks_with_evaluations, also read by tests/cli/test_console_summary.py) is also
    tests/training/test_batch_cameras.py's 2 ranks x 2 cameras (``--pipeline.datamanager.cameras-per-step auto``,
    which resolves to 2 on 2 ranks): the schedule scaled for W x B, and identical replicas through refines."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    shared = two_ranks_with_evaluations(tmp_path_factory)
    output = shared["train"]["output"]
    assert shared["train"]["returncode"] == 0, output[-5000:]
    assert output.count("cameras-per-step auto: 2 per rank on 2 ranks (4 cameras per step)") == 1  # rank 0's
    assert "schedule for 2 ranks x 2 cameras per step: max_num_iterations 64->16" in output
    run = Path(shared["run_dir"])
    # identical replicas through refines
    ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(2)]
    refines = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
    refines = [r for r in refines if r["event"] == "refine"]
    assert len(refines) >= 2 and refines[-1]["num_gaussians"] != refines[0]["num_gaussians_before"], refines
    assert ranks[0]["final_step"] == ranks[1]["final_step"] == 15
    assert ranks[0]["final_num_gaussians"] == ranks[1]["final_num_gaussians"] == refines[-1]["num_gaussians"]
    assert ranks[0]["final_checksum"] == ranks[1]["final_checksum"]
    assert all(r["replica_checks_passed"] >= 3 for r in ranks)
    # each rank's images: its shard (21 train photos, 3 eval photos)
    records = [json.loads((run / "ranks" / f"startup_rank{r}.json").read_text()) for r in range(2)]
    seed = SplatPlusDataManagerConfig().train_cameras_sampling_seed
    for r, record in enumerate(records):
        train = record["images"]["train"]
        shard = list(camera_shard(r, 2, 21, seed))
        assert train["of"] == 21 and train["indices"] == shard and train["count"] == len(shard)
        assert train["bytes"] == len(shard) * 64 * 48 * 3 and train["decoded"] == len(shard)
        assert record["images"]["eval"]["indices"] == eval_share(r, 2, 3)
        parts = record["parts_seconds"]
        assert record["seconds_to_first_step_end"] > 0 and set(parts) >= {"image_decode", "warmup"}
        # each torchrun rank's time before its dataset, split where it imported the plugin (after torch and
        # nerfstudio: seconds) and created its trainer (after the command line, parsed in that rank: not zero)
        assert parts["imports"] > 0.5 and parts["command_line"] > 0.01, parts
        assert {"device", "trainer_setup"} <= set(parts), parts
    # one all-images evaluation per run: 2 + 1 eval photos scored, each by one rank
    assert [rec["eval_images_scored"] for rec in records] == [[2], [1]]
    assert output.count("Evaluation (all images) on") == 1  # said by rank 0 alone
    events = EventAccumulator(str(run)).Reload()
    in_training = {key: events.Scalars(f"Eval Images Metrics Dict (all images)/{key}")[-1] for key in ("psnr", "ssim")}
    assert all(e.step == 15 for e in in_training.values())
    assert [e.step for e in events.Scalars("Eval Images Metrics/psnr")] == [10]  # rank 0's single image
    # ns-eval (one process; the command the run printed) on the run's checkpoint: the same numbers
    assert shared["eval"] is not None and shared["eval"]["returncode"] == 0, shared["eval"] or output[-3000:]
    report = json.loads((run / "metrics.json").read_text())
    assert report["checkpoint"].endswith("step-000000015.ckpt") and report["results"]["num_images"] == 3
    for key, event in in_training.items():
        assert event.value == pytest.approx(report["results"][key], abs=1e-4), key
    assert math.isfinite(report["results"]["psnr"])


def test_decoding_threads_are_shared_by_the_ranks_of_a_node(monkeypatch):
    """Each rank decodes only its shard: the node's CPUs (this process's affinity, as SLURM or taskset
    set it) are divided among its ranks, up to 8 each; nerfstudio's max_thread_workers wins when set."""
    from ns_splat_plus.training.images import plan

    monkeypatch.setattr(plan.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert plan.default_workers(None) == 8  # one rank: capped at 8
    assert plan.default_workers(None, ranks_on_node=4) == 4
    assert plan.default_workers(None, ranks_on_node=8) == 2
    assert plan.default_workers(None, ranks_on_node=32) == 1
    assert plan.default_workers(3, ranks_on_node=8) == 3
    monkeypatch.setattr(plan.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a 2-CPU allocation
    assert plan.default_workers(None) == 2
