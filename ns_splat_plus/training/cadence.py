"""Which optimizer groups zero their gradients before a step and which are stepped after it (:func:`groups_at`).

``every-step`` is nerfstudio's rule: each group steps every step, or every ``--gradient-accumulation-steps``
of its own (gradients summed over the window, zeroed at its start).

``fastgs`` is FastGS's optimizer schedule (``fastgs/FastGS``, ``GaussianModel.optimizer_step``; FastGS, 2025),
for a run of M steps, with iterations counted from 1 (``i = step + 1``):

- up to i = M / 2 (15k of FastGS's 30k), every group steps every iteration, except the higher-order SH
  coefficients (``features_rest``), which step every 16th;
- up to i = 2 M / 3 (20k), every group steps every 32nd iteration;
- after that, every 64th.

A group steps when ``i`` is a multiple of its period, and its gradients are zeroed right after its step, so
each update applies the gradients summed since the group's last one (as FastGS's ``zero_grad`` after each
``step``). The learning-rate schedulers still advance every step. Fewer optimizer updates is the point: the
Adam update of ``features_rest`` (45 of a Gaussian's 59 numbers) is most of the optimizer's memory traffic.
A refine replaces the parameters it changes, and with them the gradients summed so far (as in FastGS).
"""

from __future__ import annotations

from typing import List, Literal, Mapping, Sequence, Tuple

OptimizerCadence = Literal["every-step", "fastgs"]

SH_REST_GROUP = "features_rest"
SH_REST_EVERY = 16
"""FastGS: the higher-order SH coefficients step every 16th iteration in the first phase."""
PHASES: Tuple[Tuple[float, int], ...] = ((1 / 2, 1), (2 / 3, 32), (1.0, 64))
"""FastGS: (the phase's end as a fraction of the run, every group's period in it): 15k / 20k / 30k of 30k steps."""


def fastgs_period(step: int, group: str, max_steps: int) -> int:
    """The period (in steps) of ``group`` at ``step`` (0-based) of a ``max_steps`` run under FastGS's schedule."""
    iteration = step + 1
    for end, period in PHASES:
        if iteration <= int(end * max_steps):
            if period == 1 and group == SH_REST_GROUP:
                return SH_REST_EVERY
            return period
    return PHASES[-1][1]


def fastgs_steps(step: int, group: str, max_steps: int) -> bool:
    """Whether ``group`` is stepped after ``step`` under FastGS's schedule."""
    return (step + 1) % fastgs_period(step, group, max_steps) == 0


def groups_at(
    step: int,
    groups: Sequence[str],
    cadence: OptimizerCadence,
    max_steps: int,
    accumulation: Mapping[str, int],
    first_step: int = 0,
) -> Tuple[List[str], List[str]]:
    """(the groups whose gradients are zeroed before ``step``, the groups stepped after it).

    Args:
        step: the training step (0-based).
        groups: the optimizer's parameter groups (nerfstudio's ``Optimizers.parameters`` keys).
        cadence: ``every-step`` (nerfstudio's rule) or ``fastgs`` (see the module doc).
        max_steps: the run's ``--max-num-iterations`` (FastGS's phases are fractions of it).
        accumulation: nerfstudio's ``gradient_accumulation_steps`` (``every-step`` only; 1 where absent: read
            with ``get``, so the trainer's defaultdict is passed as it is, with no key added).
        first_step: the first step of this process (a resumed run's): nothing was summed before it.
    """
    if cadence == "every-step":
        every = {g: accumulation.get(g, 1) for g in groups}
        zero = [g for g in groups if step % every[g] == 0]
        return zero, [g for g in groups if step % every[g] == every[g] - 1]
    zero = [g for g in groups if step == first_step or fastgs_steps(step - 1, g, max_steps)]
    return zero, [g for g in groups if fastgs_steps(step, g, max_steps)]
