"""The optimizer update of splat-plus: gradients averaged across ranks, checked, then stepped.

:class:`CheckedOptimizers` is nerfstudio's ``Optimizers`` (one per parameter group) with the
finiteness gate: training stops with :class:`~ns_splat_plus.errors.TrainingHealthError` naming
the step and the parameter when a gradient or a parameter becomes NaN / Inf.

With ``fused_adam`` (``--fused-adam``) every plain ``torch.optim.Adam`` group that
steps this iteration is updated by one multi-tensor Adam, :func:`adam_step_all` (the ~8 foreach
kernels of torch's ``foreach=True`` Adam once, instead of once per group), while each group keeps
its own ``torch.optim.Adam`` (learning rate, scheduler, ``state[p]``, state_dict) as nerfstudio
and gsplat's strategies expect. It rests on torch's private ``Adam._init_group`` and
``torch._foreach_*`` (reached through :mod:`ns_splat_plus.upstream`): where the start-up probe finds
them changed, each group steps torch's own Adam instead, after one warning.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from nerfstudio.engine.optimizers import Optimizers
from torch import Tensor

from ns_splat_plus import upstream
from ns_splat_plus.errors import TrainingHealthError
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.gradients import average_gradients


class CheckedOptimizers(Optimizers):
    """nerfstudio's ``Optimizers`` that stop training on non-finite gradients or parameters.

    Before each optimizer step the max-abs of every gradient about to be stepped is taken in one
    fused kernel (``upstream.max_abs_each``, torch's ``_foreach_norm(ord=inf)``: NaN and Inf
    propagate, finite values cannot overflow). On the CPU the maxima and the parameter values are checked at once and a bad step
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
        fused_adam: bool = False,
    ) -> None:
        super().__init__(config, param_groups)
        # torch's private Adam API probed once per process: torch's own Adam (and one warning) where it changed
        self.fused_adam = fused_adam and upstream.fused_adam_available()
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
        average_gradients(p for group in param_groups for g in self.optimizers[group].param_groups for p in g["params"])
        if self.check_finite:
            self.check_step(param_groups, check_grads=not grad_scaler.is_enabled())
        if self.fused_adam and not grad_scaler.is_enabled():
            fused = [g for g in param_groups if self._fusable(g)]
            adam_step_all([self.optimizers[g] for g in fused])
            param_groups = [g for g in param_groups if g not in fused]
        super().optimizer_scaler_step_some(grad_scaler, param_groups)

    def zero_grad_some(self, param_groups: List[str]) -> None:
        """nerfstudio's ``zero_grad_some`` (each group's ``optimizer.zero_grad()``, which sets the
        gradients to None) as one plain loop: torch's ``zero_grad`` opens a profiler range per call,
        about 8 us of host time per optimizer per step here, for the same effect."""
        for group in param_groups:
            for param_group in self.optimizers[group].param_groups:
                for p in param_group["params"]:
                    p.grad = None

    def _fusable(self, group: str) -> bool:
        """A group :func:`adam_step_all` steps exactly as its own ``step()`` would (no gradient clipping)."""
        if self.config[group]["optimizer"].max_norm is not None:
            return False
        return adam_fusable(self.optimizers[group])

    def _current_step(self) -> int:
        return int(self.step_source()) if self.step_source is not None else -1

    def _named(self, param_groups: List[str]) -> List[Tuple[str, Tensor]]:
        named = []
        for group in param_groups:
            params = [p for g in self.optimizers[group].param_groups for p in g["params"]]
            named += [
                (group if len(params) == 1 else f"{group}[{i}]", p) for i, p in enumerate(params) if p.numel() > 0
            ]
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
        new_layout = names != self._row_names or (
            names and self._rows is not None and self._rows.shape != (self.check_every, len(names))
        )
        if new_layout:
            self.resolve_pending()  # another set of gradients: read the rows of the old one first
            self._row_names = names
            self._rows = torch.empty((self.check_every, len(names)), device=named[0][1].device) if names else None
        self._checked_groups = list(param_groups)
        if names:
            assert self._rows is not None  # made above for these names
            torch.stack(upstream.max_abs_each([g for _, g in grads]), out=self._rows[len(self._row_steps)])
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
                when = (
                    f"step {step} (read at step {now}: on the GPU the checks are read every {self.check_every} steps)"
                )
                self._raise_if_bad(when, self._row_names, [math.isfinite(m) for m in row])
        named = self._named(self._checked_groups)
        if named:
            maxima = torch.stack(upstream.max_abs_each([p for _, p in named])).tolist()
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
        raise TrainingHealthError.shown(message, collectives.get_rank())


# --- one multi-tensor Adam update for several torch.optim.Adam --------------------------------------


def adam_fusable(optimizer: torch.optim.Optimizer) -> bool:
    """Whether :func:`adam_step_all` reproduces ``optimizer.step()``: a plain torch.optim.Adam
    (float learning rate, no weight decay, amsgrad, maximize, capturable, differentiable or fused)."""
    if type(optimizer) is not torch.optim.Adam:
        return False
    return all(
        isinstance(g["lr"], float)
        and g["weight_decay"] == 0
        and not g["amsgrad"]
        and not g["maximize"]
        and not g["capturable"]
        and not g["differentiable"]
        and not g.get("fused")
        and not g.get("decoupled_weight_decay")
        for g in optimizer.param_groups
    )


@torch.no_grad()
def adam_step_all(optimizers: List[torch.optim.Adam]) -> None:
    """``step()`` of every optimizer in ``optimizers`` (each :func:`adam_fusable`) in one update.

    torch's ``foreach`` Adam (``_multi_tensor_adam``, torch's default on CUDA) takes one learning
    rate per call; here the tensors of all groups go through one set of foreach kernels, with the
    per-tensor step sizes as scalar lists (as torch already does for the bias corrections), one
    call per distinct (betas, eps, device, dtype). State is created by each optimizer's own
    ``_init_group`` (:func:`ns_splat_plus.upstream.adam_init_group`; the same lazy ``step`` / ``exp_avg`` / ``exp_avg_sq``), so state_dicts,
    checkpoints and gsplat's per-group edits of ``optimizer.state[p]`` are unchanged. The same
    operations, in the same order, per element as torch's foreach Adam: bitwise the same numbers.
    """
    buckets: Dict[Tuple, Tuple[List[Any], ...]] = {}  # params, grads, exp_avgs, exp_avg_sqs, steps: tensors; lrs
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = upstream.adam_init_group(optimizer, group)
            for i, p in enumerate(params):
                key = (tuple(group["betas"]), group["eps"], p.device, p.dtype, steps[i].device)
                bucket = buckets.setdefault(key, ([], [], [], [], [], []))
                for target, value in zip(bucket, (p, grads[i], exp_avgs[i], exp_avg_sqs[i], steps[i], group["lr"])):
                    target.append(value)
        upstream.mark_stepped(optimizer)  # what Optimizer.step's wrapper records (LR schedulers check it)
    for (betas, eps, *_), (params, grads, exp_avgs, exp_avg_sqs, steps, lrs) in buckets.items():
        _multi_tensor_adam_lrs(params, grads, exp_avgs, exp_avg_sqs, steps, lrs, betas[0], betas[1], eps)


def _multi_tensor_adam_lrs(
    params: List[Tensor],
    grads: List[Tensor],
    exp_avgs: List[Tensor],
    exp_avg_sqs: List[Tensor],
    steps: List[Tensor],
    lrs: List[float],
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """torch.optim.adam._multi_tensor_adam (capturable=False, no weight decay / amsgrad / maximize)
    with a learning rate per tensor. Args: lists of equal length, params[i] / grads[i] /
    exp_avgs[i] / exp_avg_sqs[i] of one shape, steps[i] a 0-d float tensor, lrs[i] a float."""
    foreach = upstream.foreach  # torch._foreach_<op> as foreach.<op>
    if steps[0].is_cpu:  # torch's own trick: one wrapped scalar for the CPU slow path
        foreach.add_(steps, torch.tensor(1.0, device="cpu"), alpha=1.0)
    else:
        foreach.add_(steps, 1)
    foreach.lerp_(exp_avgs, grads, 1 - beta1)
    foreach.mul_(exp_avg_sqs, beta2)
    foreach.addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
    counts = [step.item() for step in steps]  # host tensors: no device sync
    step_size = [(lr / (1 - beta1**t)) * -1 for lr, t in zip(lrs, counts)]
    bias_correction2_sqrt = [(1 - beta2**t) ** 0.5 for t in counts]
    denom = foreach.sqrt(exp_avg_sqs)
    foreach.div_(denom, bias_correction2_sqrt)
    foreach.add_(denom, eps)
    foreach.addcdiv_(params, exp_avgs, denom, step_size)
