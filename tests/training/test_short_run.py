"""The start-up notes of a run shorter than its schedule (training/short_run.py), from the scaled schedule."""

from __future__ import annotations

from ns_splat_plus.training.short_run import short_run_notes


def splatfacto_refines(step: int) -> bool:
    """gsplat's default condition with splatfacto's numbers: after 500, every 100, paused 116 after a reset."""
    return 500 < step < 15000 and step % 100 == 0 and step % 3000 >= 116


def test_a_short_run_names_the_refine_and_the_resolution_it_misses():
    notes = short_run_notes(
        splatfacto_refines, 0, 300, num_downscales=2, resolution_schedule=3000, refine_horizon=15000
    )
    assert len(notes) == 2
    assert notes[0].startswith("Short run: the first refine would be at step 600, after the last step 299: ")
    assert notes[1].startswith("Short run: the resolution schedule ends at step 6000, after the last step 299: ")
    assert "this run trains at 1/4 resolution" in notes[1]


def test_a_run_that_reaches_both_says_nothing_and_a_partial_one_names_its_range():
    assert short_run_notes(splatfacto_refines, 0, 30000, 2, 3000, 15000) == []
    notes = short_run_notes(splatfacto_refines, 0, 4000, 2, 3000, 15000)
    assert len(notes) == 1 and "this run trains at 1/4 to 1/2 resolution" in notes[0]
    # refinement over (a resumed run past its stop): no note about a refine that will never come
    assert short_run_notes(splatfacto_refines, 20000, 20010, 0, 3000, 15000) == []
    # a resume at step 256 of a run that refined at steps 5, 105 and 205: it did densify, no note
    refines_early = lambda step: step % 100 == 5  # noqa: E731
    assert short_run_notes(refines_early, 256, 300, 0, 3000, 1000) == []
    assert len(short_run_notes(lambda step: step == 400, 256, 300, 0, 3000, 1000)) == 1  # none before: a note


def test_late_prunes_after_the_last_step_are_named():
    """The efficient strategy's late prunes (FastGS's final pruning) that a run's steps do not reach."""
    late = [6020, 7040, 8060, 9080]  # splat-plus-lite's with --pipeline.model.efficient-late-prunes 4
    assert short_run_notes(None, 0, 10000, 0, 3000, 5000, late_prune_steps=late) == []
    (note,) = short_run_notes(None, 0, 8000, 0, 3000, 5000, late_prune_steps=late)
    assert note.startswith("Short run: 2 of the 4 late prunes (at 8060, 9080) fall after the last step 7999 ("), note
    assert short_run_notes(None, 0, 8000, 0, 3000, 5000) == []  # no late prunes asked for
