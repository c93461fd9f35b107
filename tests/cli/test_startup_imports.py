"""Start-up imports nothing a training run does not need before its first step (issue 48).

Each of these took seconds of start-up on the GPU machine (PYTHONDONTWRITEBYTECODE set there, and
transformers installed) and none is needed to train: torchmetrics (5.9 s: it imports transformers where
that is installed; PSNR and LPIPS are imported at the first evaluation), scikit-learn (1.2 s: the initial
scales' nearest neighbours use scipy's k-d tree), matplotlib's pyplot (the run's plot is drawn at the
end) and torchvision's AlexNet weights for LPIPS (built at the first evaluation that scores it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clirun import assert_ok, ns_train_cmd, run

from splatbench.scenes import SceneSpec, make_scene

pytestmark = pytest.mark.slow

NOT_AT_START_UP = ("torchmetrics", "sklearn", "matplotlib.pyplot", "transformers")
"""Modules a CPU training run must not have imported when its first step starts."""

# ns-train's own entry point, with the training loop's step wrapped to list the imported modules at step 0
DRIVER = """
import json, os, sys
import ns_splat_plus.training.loop as loop
step_of_loop = loop.run_training_step
def listing_step(trainer, step):
    if step == 0:
        json.dump(sorted(sys.modules), open(os.environ["MODULES_AT_STEP_0"], "w"))
    return step_of_loop(trainer, step)
loop.run_training_step = listing_step
from nerfstudio.scripts.train import entrypoint
entrypoint()
"""


def test_a_cpu_run_imports_no_module_it_does_not_need_before_its_first_step(tmp_path):
    scene = make_scene(tmp_path / "scene", SceneSpec(n_views=8, width=32, height=24, focal=28.0, n_points=200))
    listing = tmp_path / "modules.json"
    cmd = ns_train_cmd(scene, tmp_path / "out", "imports", 2)
    proc = run([sys.executable, "-c", DRIVER, *cmd[1:]], MODULES_AT_STEP_0=str(listing))
    assert_ok(proc)
    modules = set(json.loads(Path(listing).read_text()))
    assert "ns_splat_plus.model.model" in modules and "gsplat" in modules  # the listing is of a real run
    loaded = [m for m in NOT_AT_START_UP if m in modules]
    assert not loaded, f"imported before the first training step: {loaded}"
