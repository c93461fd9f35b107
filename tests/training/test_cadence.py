"""``--optimizer-cadence``: which optimizer groups step after which step (ns_splat_plus/training/cadence.py).

FastGS's schedule is checked against FastGS's own loop written out (its ``optimizer_step``), and in a training
run: the SH coefficients update only every 16th step in the first half, every group only every 32nd and 64th
step later, and each update applies the gradients summed since the last one, bitwise as nerfstudio's own
gradient accumulation computes them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from inprocess import assert_bitwise_equal, build_trainer, clone_state, close_writers, small_scene, trainer_config

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.training import inputs
from ns_splat_plus.training.cadence import groups_at
from ns_splat_plus.training.step import run_training_step

GROUPS = ["means", "features_dc", "features_rest", "opacities"]


def fastgs_updates(iterations: int) -> list:
    """FastGS's ``optimizer_step`` (fastgs/FastGS, scene/gaussian_model.py) for a 30k run, written out:
    (iteration, which optimizer steps) for iterations 1..``iterations``; ``main`` is every group but
    ``features_rest``, ``sh`` is ``features_rest``. Each step is followed by its ``zero_grad``."""
    updates = []
    for iteration in range(1, iterations + 1):
        if iteration <= 15000:
            updates.append((iteration, "main"))
            if iteration % 16 == 0:
                updates.append((iteration, "sh"))
        elif iteration <= 20000:
            if iteration % 32 == 0:
                updates += [(iteration, "main"), (iteration, "sh")]
        elif iteration % 64 == 0:
            updates += [(iteration, "main"), (iteration, "sh")]
    return updates


def test_fastgs_cadence_is_fastgs_optimizer_step_written_out():
    expected, zeroed = [], []
    for step in range(30000):
        zero, stepped = groups_at(step, GROUPS, "fastgs", 30000, {})
        kinds = {"sh" if g == "features_rest" else "main" for g in stepped}
        expected += [(step + 1, kind) for kind in sorted(kinds)]
        assert all(g in stepped for g in GROUPS if g != "features_rest") == ("main" in kinds)  # they step together
        zeroed.append(zero)
    assert sorted(expected) == sorted(fastgs_updates(30000))
    # zeroed right after each update (here: before the next step), and at the first step
    assert zeroed[0] == GROUPS
    for step in range(1, 30000):
        assert zeroed[step] == groups_at(step - 1, GROUPS, "fastgs", 30000, {})[1], step


def test_every_step_is_nerfstudios_rule_with_its_accumulation():
    accumulation = {"features_rest": 4}
    for step in range(12):
        zero, stepped = groups_at(step, GROUPS, "every-step", 100, accumulation)
        assert ("features_rest" in zero) == (step % 4 == 0) and ("features_rest" in stepped) == (step % 4 == 3)
        assert all(g in zero and g in stepped for g in GROUPS if g != "features_rest")


def test_fastgs_cadence_and_gradient_accumulation_are_refused_together():
    from ns_splat_plus.method import splat_plus_trainer_config

    config = splat_plus_trainer_config()
    config.machine.device_type = "cpu"
    config.optimizer_cadence = "fastgs"
    inputs.check_options(config)
    config.gradient_accumulation_steps = {"features_rest": 16}
    with pytest.raises(UserInputError, match="--optimizer-cadence fastgs .* --gradient-accumulation-steps"):
        inputs.check_options(config)


def _trainer(tmp_path: Path, name: str, steps: int, **options):
    config = trainer_config(small_scene(tmp_path / "scene"), tmp_path / name, steps=steps)
    config.pipeline.model.warmup_length = 10 * steps  # no refine: they replace parameters (and summed gradients)
    config.pipeline.model.sh_degree_interval = 4  # every SH degree trains (has gradients) from step 12
    for key, value in options.items():
        setattr(config, key, value)
    return build_trainer(config)


def _params(trainer) -> dict:
    return {k: v.detach().clone() for k, v in trainer.pipeline.model.gauss_params.items()}


def test_a_fastgs_run_updates_each_group_at_its_steps(tmp_path):
    """200 steps: up to step 100 the SH coefficients change at every 16th step and the rest at every step; later
    every group changes only at steps 128 (every 32nd up to 133) and 192 (every 64th), counted from 1."""
    try:
        trainer = _trainer(tmp_path, "fastgs", 200, optimizer_cadence="fastgs")
        changed = {g: [] for g in GROUPS}
        for step in range(200):
            before = _params(trainer)
            run_training_step(trainer, step)
            after = _params(trainer)
            for group in GROUPS:
                if not torch.equal(before[group], after[group]):
                    changed[group].append(step + 1)
    finally:
        close_writers()
    assert changed["features_rest"] == [16, 32, 48, 64, 80, 96, 128, 192]
    for group in ("means", "features_dc", "opacities"):
        assert changed[group] == list(range(1, 101)) + [128, 192], group


def test_fastgs_sums_the_gradients_between_updates_as_nerfstudios_accumulation_does(tmp_path):
    """In FastGS's first phase, the SH coefficients step every 16th step with the gradients summed since the
    last update: bitwise nerfstudio's --gradient-accumulation-steps of 16 for that group (its own code path)."""
    states = {}
    try:
        for name, options in {
            "fastgs": {"optimizer_cadence": "fastgs"},
            "accumulated": {"gradient_accumulation_steps": {"features_rest": 16}},
        }.items():
            trainer = _trainer(tmp_path, name, 200, **options)
            for step in range(40):
                run_training_step(trainer, step)
            states[name] = clone_state(_params(trainer))
            close_writers()
    finally:
        close_writers()
    assert_bitwise_equal(states["fastgs"], states["accumulated"], "parameters after 40 steps")
