"""What a run too short for its schedule skips, said at start-up: :func:`short_run_notes`.

The schedule (refine start and interval, resolution schedule) is written for splatfacto's 30k steps
and scaled at launch for W ranks x B cameras per step and ``--steps-scaler``
(:mod:`ns_splat_plus.parallel.schedule`). ``--max-num-iterations 300`` alone cuts it short: splat-plus
then never densifies (its first refine is after step 500) and trains every step at 1/4 resolution.
The numbers come from the schedule this run uses (its strategy's own refine condition and the model's
scaled resolution schedule), so they are right for every method, rank count and scaler.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from ns_splat_plus.parallel import schedule
from ns_splat_plus.upstream import TrainerLike


def first_refine_step(refines_at: Callable[[int], bool], start_step: int, stop_step: int) -> Optional[int]:
    """The first step in [start_step, stop_step) at which ``refines_at`` (a strategy's) is true, else None."""
    return next((step for step in range(start_step, stop_step) if refines_at(step)), None)


def next_refine_step(refines_at: Callable[[int], bool], after: int, horizon: int) -> Optional[int]:
    """The first refine after ``after``, looked for up to ``horizon`` steps further (None if none)."""
    return first_refine_step(refines_at, after + 1, after + 1 + horizon)


def resolution_at(step: int, num_downscales: int, resolution_schedule: int) -> int:
    """splatfacto's training-resolution divisor at ``step`` (``SplatfactoModel._get_downscale_factor``)."""
    return 2 ** max(num_downscales - step // max(1, resolution_schedule), 0)


def resolution_change_steps(
    start_step: int, stop_step: int, num_downscales: int, resolution_schedule: int
) -> List[int]:
    """The steps in (start_step, stop_step) at which the training resolution changes (:func:`resolution_at`):
    the first step of each resolution that a run started at ``start_step`` reaches later."""
    schedule = max(1, resolution_schedule)
    return [k * schedule for k in range(1, num_downscales + 1) if start_step < k * schedule < stop_step]


def short_run_notes(
    refines_at: Optional[Callable[[int], bool]],
    start_step: int,
    max_num_iterations: int,
    num_downscales: int,
    resolution_schedule: int,
    refine_horizon: int,
    late_prune_steps: Sequence[int] = (),
) -> List[str]:
    """One line per part of the schedule that this run's steps [start_step, max_num_iterations) never
    reach: the first refine (``refines_at``: the strategy's condition; None: no strategy), the end
    of the resolution schedule (full resolution from step num_downscales x resolution_schedule), and
    the efficient strategy's late prunes (``late_prune_steps``) that fall after the last step.
    ``refine_horizon``: how far past the last step to look for the refine the run misses."""
    last = max_num_iterations - 1
    if last < start_step:
        return []
    notes = []
    # from step 0: a resumed run whose earlier steps refined did densify (it was told it did not)
    if refines_at is not None and first_refine_step(refines_at, 0, last + 1) is None:
        missed = next_refine_step(refines_at, last, refine_horizon)
        if missed is not None:
            notes.append(
                f"Short run: the first refine would be at step {missed}, after the last step {last}: this run does "
                "not densify (lower --pipeline.model.warmup-length or --pipeline.model.refine-every, or raise "
                "--max-num-iterations)"
            )
    full_from = num_downscales * max(1, resolution_schedule)
    if num_downscales > 0 and last < full_from:
        first, final = (
            resolution_at(start_step, num_downscales, resolution_schedule),
            resolution_at(last, num_downscales, resolution_schedule),
        )
        trains = f"1/{first}" if first == final else f"1/{first} to 1/{final}"
        notes.append(
            f"Short run: the resolution schedule ends at step {full_from}, after the last step {last}: this run trains "
            f"at {trains} resolution (lower --pipeline.model.resolution-schedule or --pipeline.model.num-downscales, "
            "or raise --max-num-iterations)"
        )
    missed_prunes = [step for step in late_prune_steps if step > last]
    if missed_prunes:
        steps = ", ".join(str(step) for step in missed_prunes)
        notes.append(
            f"Short run: {len(missed_prunes)} of the {len(late_prune_steps)} late prunes (at {steps}) "
            f"{'falls' if len(missed_prunes) == 1 else 'fall'} after the last step {last} (lower "
            "--pipeline.model.efficient-late-prune-every, or raise --max-num-iterations)"
        )
    return notes


def notes_for_trainer(trainer: TrainerLike) -> List[str]:
    """:func:`short_run_notes` of a set-up SplatPlusTrainer (its scaled schedule and its strategy)."""
    from ns_splat_plus import upstream

    model = trainer.pipeline.model
    config = model.config
    strategy = getattr(model, "strategy", None)
    refines_at = getattr(strategy, "refines_at", None)
    late_prune_steps = getattr(strategy, "late_prune_steps", None)  # the efficient strategy's
    notes = short_run_notes(
        refines_at,
        upstream.start_step(trainer),
        trainer.config.max_num_iterations,
        int(getattr(config, "num_downscales", 0)),
        int(getattr(config, "resolution_schedule", 1)),
        refine_horizon=max(1, int(getattr(config, "stop_split_at", 0) or 0)),
        late_prune_steps=late_prune_steps() if late_prune_steps is not None else (),
    )
    steps = schedule.describe_max_num_iterations(trainer.config)
    if notes and not steps.startswith("--max-num-iterations"):  # a scaled schedule: lite's 1/3, several ranks
        # the steps named are the run's; the options are typed in splatfacto's units (a fresh-eyes trial)
        notes.append(f"Short run: the steps above count {steps}; the options named scale by the same factor")
    return notes
