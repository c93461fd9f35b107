"""The private parts of torch (2.6-2.15) and torchmetrics (1.x) that splat-plus calls: the fused Adam's
state and update ops, the warmup snapshot's module and grad-scaler state, checkpoints loadable with
``weights_only=True``; see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import inspect
import logging
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ns_splat_plus.upstream.command_line import splat_plus_command
from ns_splat_plus.upstream.versions import probe

ADAM_INIT_GROUP_ARGS = (
    "self",
    "group",
    "params_with_grad",
    "grads",
    "exp_avgs",
    "exp_avg_sqs",
    "max_exp_avg_sqs",
    "state_steps",
)
"""``torch.optim.Adam._init_group``'s parameters in torch 2.6-2.15."""
FOREACH_OPS = ("add_", "lerp_", "mul_", "addcmul_", "sqrt", "div_", "addcdiv_", "norm")
foreach = SimpleNamespace(**{op: getattr(torch, f"_foreach_{op}", None) for op in FOREACH_OPS})
"""``torch._foreach_<op>`` as ``foreach.<op>`` for each of :data:`FOREACH_OPS` (None where this torch lacks it)."""


def adam_init_group(optimizer: torch.optim.Adam, group: dict) -> Tuple[list, list, list, list, list]:
    """``Adam._init_group`` (torch 2.6-2.15): (params, grads, exp_avgs, exp_avg_sqs, steps) of the
    parameters of ``group`` that have a gradient, their state created as ``Adam.step`` would.
    Only where :func:`fused_adam_available` (the trainer checks it at start-up)."""
    params: List[torch.Tensor] = []
    grads: List[torch.Tensor] = []
    exp_avgs: List[torch.Tensor] = []
    exp_avg_sqs: List[torch.Tensor] = []
    steps: List[torch.Tensor] = []
    optimizer._init_group(group, params, grads, exp_avgs, exp_avg_sqs, [], steps)
    return params, grads, exp_avgs, exp_avg_sqs, steps


def mark_stepped(optimizer: torch.optim.Optimizer) -> None:
    """What ``Optimizer.step``'s wrapper records (``_opt_called``): LR schedulers warn without it."""
    optimizer._opt_called = True  # type: ignore[attr-defined]  # private: torch's stubs do not declare it


def _fused_adam_problem() -> Optional[str]:
    init_group = getattr(torch.optim.Adam, "_init_group", None)
    if init_group is None:
        return f"torch {torch.__version__} has no torch.optim.Adam._init_group"
    names = tuple(inspect.signature(init_group).parameters)
    if names != ADAM_INIT_GROUP_ARGS:
        return f"torch {torch.__version__}'s Adam._init_group takes ({', '.join(names)})"
    missing = [f"torch._foreach_{op}" for op in FOREACH_OPS if getattr(foreach, op) is None]
    if missing:
        return f"torch {torch.__version__} lacks {', '.join(missing)}"
    p = torch.nn.Parameter(torch.zeros(2))  # a trial: the lazy state torch's Adam makes
    p.grad = torch.ones(2)
    adam = torch.optim.Adam([p], lr=0.1)
    params, grads, exp_avgs, exp_avg_sqs, steps = adam_init_group(adam, adam.param_groups[0])
    if not (
        params == [p]
        and grads[0] is p.grad
        and exp_avgs[0].shape == exp_avg_sqs[0].shape == p.shape
        and steps[0].numel() == 1
        and adam.state[p]["exp_avg"] is exp_avgs[0]
    ):
        return f"torch {torch.__version__}'s Adam._init_group returns another state layout"
    return None


def fused_adam_available() -> bool:
    """Whether the fused Adam can run on this torch (probed once; one warning where it cannot, and
    the trainer then steps torch's own Adam per group: the same numbers, one step per group)."""
    return probe("fused_adam", _fused_adam_problem, "--fused-adam is off, torch's own Adam steps")


def max_abs_each(tensors: List[torch.Tensor]) -> List[torch.Tensor]:
    """The max-abs of each tensor (NaN and Inf propagate): ``torch._foreach_norm(ord=inf)``, one kernel;
    one ``vector_norm`` per tensor where this torch lacks it."""
    if foreach.norm is not None:
        return list(foreach.norm(tensors, float("inf")))
    return [torch.linalg.vector_norm(t, float("inf")) for t in tensors]


def module_slots(module: torch.nn.Module) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Copies of ``Module._parameters`` and ``_buffers`` (which object sits under which name, ``None`` included)."""
    return dict(module._parameters), dict(module._buffers)


def set_module_slots(module: torch.nn.Module, params: Dict[str, Any], buffers: Dict[str, Any]) -> None:
    """Put back what :func:`module_slots` returned (also where densification replaced the Parameters)."""
    module._parameters.clear()
    module._parameters.update(params)
    module._buffers.clear()
    module._buffers.update(buffers)


def grad_scaler_state(scaler) -> Dict[str, Any]:
    """A deep copy of a ``GradScaler``'s attributes (its state_dict leaves out the per-optimizer states)."""
    import copy

    return copy.deepcopy(scaler.__dict__)


def load_grad_scaler_state(scaler, state: Dict[str, Any]) -> None:
    """Put back what :func:`grad_scaler_state` returned."""
    import copy

    scaler.__dict__.clear()
    scaler.__dict__.update(copy.deepcopy(state))


def metric_state_names(module: Any) -> Optional[List[str]]:
    """A torchmetrics ``Metric``'s state attributes (``_defaults``, ``_update_count``, ``_computed``;
    torchmetrics 1.x), or None for any other module."""
    if not (hasattr(module, "_defaults") and hasattr(module, "_update_count")):
        return None
    return list(module._defaults) + ["_update_count", "_computed"]


def default_store():
    """The default process group's key-value store (``distributed_c10d._get_default_store``, torch
    2.6-2.15): the roll call after a failed collective (:mod:`ns_splat_plus.parallel.roll_call`)."""
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store()


def weights_only_safe(obj: Any) -> Any:
    """A copy of a checkpoint structure with numpy scalars/arrays replaced by Python numbers/tensors."""
    if isinstance(obj, dict):
        return {k: weights_only_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [weights_only_safe(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(weights_only_safe(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj  # tensors, Python numbers, strings, None: loadable as they are


class _NoCudaRuntimeNote(logging.Filter):
    """Drops torch's "No CUDA runtime is found, using CUDA_HOME=..." (``torch.utils.cpp_extension``, torch
    2.6-2.15), logged when gsplat loads its extension module on a machine without CUDA: the CPU runs use
    the reference rasterizer, so the line only adds noise to every CPU run's output."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


if splat_plus_command():  # a process-wide logger: nerfstudio imports splat-plus in other methods' commands too
    logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaRuntimeNote())


def dynamo_frames_compiled() -> int:
    """How many Python frames ``torch.compile`` (TorchDynamo) has compiled in this process so far
    (``torch._dynamo.utils.counters["frames"]["total"]``, which :func:`reset_dynamo` does not reset;
    tests: splat-plus's renders compile nothing)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def reset_dynamo() -> None:
    """Forget every compiled frame (``torch._dynamo.reset()``), so that a compiled function compiles
    again at its next call and :func:`dynamo_frames_compiled` sees it."""
    import torch._dynamo

    torch._dynamo.reset()
