"""The optimizer update of splat-plus: gradients averaged across ranks, checked, then stepped.

:class:`CheckedOptimizers` is nerfstudio's ``Optimizers`` (one per parameter group) with the
finiteness gate: training stops with :class:`~ns_splat_plus.strategy.TrainingHealthError` naming
the step and the parameter when a gradient or a parameter becomes NaN / Inf.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from nerfstudio.engine.optimizers import Optimizers

from ns_splat_plus.parallel.gradients import average_gradients
from ns_splat_plus.strategy.monitor import TrainingHealthError

class CheckedOptimizers(Optimizers):
    """nerfstudio's ``Optimizers`` that stop training on non-finite gradients or parameters.

    Before each optimizer step the max-abs of every gradient about to be stepped is taken in one
    fused kernel (``torch._foreach_norm(ord=inf)``: NaN and Inf propagate, finite values cannot
    overflow). On the CPU the maxima and the parameter values are checked at once and a bad step
    never happens. On CUDA the maxima stay on the device, one row per step, and the host reads
    ``check_every`` rows at a time together with the max-abs of the parameter values (no per-step
    synchronisation): the error names the step and the parameter, at most ``check_every`` steps
    after it. :meth:`resolve_pending` reads what is pending (the trainer calls it before each
    checkpoint and after the last step). Hook order in ``optimizer_scaler_step_some``: gradient
    averaging across ranks first, then the check, then the step.
    """

    def __init__(
        self,
        config: Dict[str, Any],
        param_groups: Dict[str, List[torch.nn.Parameter]],
        check_finite: bool = True,
        step_source: Optional[Callable[[], int]] = None,
        check_every: int = 25,
    ) -> None:
        super().__init__(config, param_groups)
        self.check_finite = check_finite
        self.step_source = step_source
        self.check_every = max(1, int(check_every))
        self._rows: Optional[Tensor] = None  # [check_every, gradients] max-abs per step, on the device
        self._row_steps: List[int] = []
        self._row_names: List[str] = []  # the gradients, in row order
        self._checked_groups: List[str] = []  # whose values the next read checks

    def optimizer_scaler_step_some(self, grad_scaler, param_groups: List[str]) -> None:
        # gradient averaging across ranks (parallel/gradients.py) goes first, so that the check sees the averaged gradients.
        # The optimizers' own param_groups, not self.parameters: densification replaces the Parameters there.
        average_gradients(
            p for group in param_groups for g in self.optimizers[group].param_groups for p in g["params"]
        )
        if self.check_finite:
            self.check_step(param_groups, check_grads=not grad_scaler.is_enabled())
        super().optimizer_scaler_step_some(grad_scaler, param_groups)

    def _current_step(self) -> int:
        return int(self.step_source()) if self.step_source is not None else -1

    def _named(self, param_groups: List[str]) -> List[Tuple[str, Tensor]]:
        named = []
        for group in param_groups:
            params = [p for g in self.optimizers[group].param_groups for p in g["params"]]
            named += [(group if len(params) == 1 else f"{group}[{i}]", p) for i, p in enumerate(params) if p.numel() > 0]
        return named

    @torch.no_grad()
    def check_step(self, param_groups: List[str], check_grads: bool = True) -> None:
        """Check (CPU) or record (CUDA) the gradients of the groups about to be stepped (see the class doc)."""
        step = self._current_step()
        named = self._named(param_groups)
        grads = [(name, p.grad) for name, p in named if check_grads and p.grad is not None]
        if not named:
            return
        if named[0][1].device.type != "cuda" or len({p.device for _, p in named}) > 1:
            names = [f"gradient of '{n}'" for n, _ in grads] + [f"values of '{n}'" for n, _ in named]
            tensors = [g for _, g in grads] + [p for _, p in named]
            maxima = [torch.linalg.vector_norm(t, float("inf")).item() for t in tensors]
            self._raise_if_bad(f"step {step}, before its optimizer step", names, [math.isfinite(m) for m in maxima])
            return
        names = [f"gradient of '{n}'" for n, _ in grads]
        new_layout = names != self._row_names or (names and self._rows.shape != (self.check_every, len(names)))
        if new_layout:
            self.resolve_pending()  # another set of gradients: read the rows of the old one first
            self._row_names = names
            self._rows = torch.empty((self.check_every, len(names)), device=named[0][1].device) if names else None
        self._checked_groups = list(param_groups)
        if names:
            torch.stack(torch._foreach_norm([g for _, g in grads], float("inf")), out=self._rows[len(self._row_steps)])
        self._row_steps.append(step)
        if len(self._row_steps) >= self.check_every:
            self.resolve_pending()

    @torch.no_grad()
    def resolve_pending(self) -> None:
        """Read the recorded gradient maxima and the current parameter values; raise on a non-finite one."""
        steps, self._row_steps = self._row_steps, []
        if not steps:
            return
        now = self._current_step()
        if self._rows is not None and self._row_names:
            for step, row in zip(steps, self._rows[: len(steps)].tolist()):  # the one transfer
                when = f"step {step} (read at step {now}: on the GPU the checks are read every {self.check_every} steps)"
                self._raise_if_bad(when, self._row_names, [math.isfinite(m) for m in row])
        named = self._named(self._checked_groups)
        if named:
            maxima = torch.stack(torch._foreach_norm([p for _, p in named], float("inf"))).tolist()
            names = [f"values of '{n}'" for n, _ in named]
            when = f"step {steps[-1]} (values read after steps {steps[0]}-{steps[-1]})"
            self._raise_if_bad(when, names, [math.isfinite(m) for m in maxima])

    def discard_pending(self) -> None:
        self._row_steps = []

    def _raise_if_bad(self, when: str, names: List[str], ok: List[bool]) -> None:
        if all(ok):
            return
        bad = [n for n, flag in zip(names, ok) if not flag]
        grads = [n for n in names if n.startswith("gradient")]
        bad_grads = [n for n in bad if n.startswith("gradient")]
        message = f"Training stopped at {when}: non-finite values (NaN or Inf) in " + ", ".join(bad) + "."
        if grads and len(bad_grads) == len(grads):
            message += " Every gradient is non-finite: the loss itself was most likely NaN or Inf."
        message += (
            "\nLikely causes:\n  - a NaN/Inf written into a parameter (custom code, a corrupt checkpoint)"
            "\n  - a learning rate too high for this scene (--optimizers.<group>.optimizer.lr)"
            "\n  - an input image or mask with NaN/Inf pixels, or a degenerate camera (zero focal length, NaN pose)"
        )
        raise TrainingHealthError.shown(message)

