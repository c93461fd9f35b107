"""Start-up imports nothing a training run does not need before its first step (issue 48).

Each of these took seconds of start-up on the GPU machine (PYTHONDONTWRITEBYTECODE set there, and
transformers installed) and none is needed to train: torchmetrics (5.9 s: it imports transformers where
that is installed; PSNR and LPIPS are imported at the first evaluation), scikit-learn (1.2 s: the initial
scales' nearest neighbours use scipy's k-d tree), matplotlib's pyplot (the run's plot is drawn at the
end) and torchvision's AlexNet weights for LPIPS (built at the first evaluation that scores it).
"""

from __future__ import annotations

import pytest
from shared_runs import short_splat_plus_run

pytestmark = pytest.mark.slow

NOT_AT_START_UP = ("torchmetrics", "sklearn", "matplotlib.pyplot", "transformers")
"""Modules a CPU training run must not have imported when its first step starts."""


def test_a_cpu_run_imports_no_module_it_does_not_need_before_its_first_step(tmp_path_factory):
    # a 2-step run of the README's command (the default schedule and writers) through ns-train's own entry point,
    # its training step wrapped to list the modules at step 0; shared with tests/cli/test_first_hour.py
    short = short_splat_plus_run(tmp_path_factory)
    assert short["returncode"] == 0, short["stdout"][-3000:] + short["stderr"][-3000:]
    modules = set(short["modules"])
    assert "ns_splat_plus.model.model" in modules and "gsplat" in modules  # the listing is of a real run
    loaded = [m for m in NOT_AT_START_UP if m in modules]
    assert not loaded, f"imported before the first training step: {loaded}"
