"""Two nodes simulated with two torchrun processes on this machine (``--nnodes 2 --node-rank 0/1``,
rendezvous on 127.0.0.1), against one node with the same number of ranks.

CPU ranks (gloo) train the synthetic scene through refines, once on 1 node and once on 2 nodes: every
run ends with bitwise-identical replicas, and the two placements end with the same parameters (where a
rank runs changes nothing). Two cases, not the four of strategy x cameras per step: each strategy runs
once and each B once. The default strategy with B = 1 runs 4 ranks (1 node x 4 processes against
2 nodes x 2 processes: node-local groups of two ranks on each node). MCMC with B = 2 runs 2 ranks (1 x 2
against 2 x 1; 4 cameras per step in both cases, so the same schedule): what it adds is MCMC's refines and
B's camera shards gathered across nodes, which the number of ranks per node does not change. What the
placement could change is the same in each: which ranks share a node (the gloo groups, the start-up
agreement, the gathers of the refine statistics and of the camera shards); a strategy's refines and B's
camera shards are each reduced across ranks by the same code whatever the other is, and the pairs left
out (MCMC with B = 1, the default with B = 2) run on 2 ranks in tests/parallel/test_parallel.py and
tests/training/test_batch_cameras.py. The cases start 8 and 4 ns-train ranks (about 50 and 25 s on 2 cores). The SLURM multi-node template itself runs in tests/parallel/test_slurm.py
(two slurmd). The default strategy's case also checks that one viewer starts, on global rank 0 (once
tests/parallel/test_parallel.py's test_two_nodes_start_one_viewer_on_global_rank_0, 2 nodes x 1 process).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import List

import pytest
from clirun import console_script, free_port

from splatbench.scenes import SceneSpec, make_scene


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("multinode-scene") / "scene", SceneSpec(n_views=24, width=64, height=48))


def _train(
    scene: Path, out: Path, method: str, cameras_per_step: int, ranks: int, nodes: int, viewer: bool
) -> List[str]:
    """``ranks`` ranks as ``nodes`` torchrun processes (one per simulated node); the output of each. ``viewer``:
    ``--vis viewer+tensorboard`` (a viewer that no browser opens: it renders nothing), else tensorboard."""
    port = free_port()
    vis = ["--vis", "viewer+tensorboard", "--viewer.websocket-port", str(free_port())] if viewer else []
    vis += ["--logging.local-writer.enable", "True"] if viewer else []  # the default: it prints the viewer's address
    train = [
        console_script("ns-train"), method, "--data", str(scene), "--output-dir", str(out),
        "--experiment-name", "mn", "--timestamp", "run", "--machine.device-type", "cpu",
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True",
        "--logging.local-writer.enable", "False", "--warmup-steps", "0",
        "--pipeline.datamanager.cameras-per-step", str(cameras_per_step),
        # scaled for 4 cameras per step (4 ranks x 1, 2 x 2): 20 steps, a refine every 2
        "--max-num-iterations", "80", "--pipeline.model.num-downscales", "0",
        "--pipeline.model.warmup-length", "8", "--pipeline.model.refine-every", "8",
        "--data-parallel.replica-check-every", "2", *vis, "colmap",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    procs = []
    for node in range(nodes):
        torchrun = [
            console_script("torchrun"), "--nnodes", str(nodes), "--node-rank", str(node),
            "--nproc-per-node", str(ranks // nodes), "--master-addr", "127.0.0.1", "--master-port", str(port),
        ]  # fmt: skip
        procs.append(
            subprocess.Popen([*torchrun, *train], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        )
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=600)[0])
        finally:
            if proc.poll() is None:
                proc.kill()
    for proc, output in zip(procs, outputs):
        assert proc.returncode == 0, output[-5000:]
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize("method, cameras_per_step, ranks", [("splat-plus", 1, 4), ("splat-plus-mcmc", 2, 2)])
def test_two_simulated_nodes_match_one_node(tmp_path, scene, method, cameras_per_step, ranks):
    """The default strategy's case also runs the viewer (both placements, so that they train alike): one,
    on global rank 0. nerfstudio would start one on local rank 0 of each node, here also on global rank 2."""
    finals = {}
    viewer = method == "splat-plus"
    for nodes in (1, 2):
        out = tmp_path / f"nodes{nodes}"
        outputs = _train(scene, out, method, cameras_per_step, ranks, nodes, viewer)
        per_node = ranks // nodes
        placement = f"{nodes} node{'s' if nodes > 1 else ''} x {per_node} process{'es' if per_node > 1 else ''}"
        assert f"splat-plus: using {ranks} CPU processes (0 GPUs) via torchrun ({placement}, gloo)" in outputs[0]
        if viewer:
            banners = [output.count("Viewer running locally at") for output in outputs]
            assert banners == [1] + [0] * (nodes - 1), f"viewer banners per node: {banners}\n{outputs[-1][-3000:]}"
            assert nodes == 1 or "viser" not in outputs[1].lower(), outputs[1][-3000:]  # no server on node 1
        run = out / "mn" / method / "run"
        records_of_ranks = [json.loads((run / "ranks" / f"rank{r}.json").read_text()) for r in range(ranks)]
        records = [json.loads(line) for line in (run / "densification.jsonl").read_text().splitlines()]
        refines = [r for r in records if r["event"] == "refine"]
        assert len(refines) >= 2, records
        every = records_of_ranks
        assert all(r["initial_match"] for r in every)
        assert len({r["final_checksum"] for r in every}) == 1 and every[0]["final_checksum"] is not None
        assert len({r["final_num_gaussians"] for r in every}) == 1
        assert every[0]["final_num_gaussians"] == refines[-1]["num_gaussians"]
        assert [r["final_step"] for r in every] == [80 // (ranks * cameras_per_step) - 1] * ranks
        finals[nodes] = (every[0]["final_checksum"], every[0]["final_num_gaussians"])
    assert finals[1] == finals[2]
