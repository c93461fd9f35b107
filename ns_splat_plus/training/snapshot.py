"""A snapshot of everything a training step can change: :class:`TrainingSnapshot` (restore undoes
the steps bitwise). Used by the warmup; parameters (also when the strategy replaced the
``nn.Parameter`` objects), gradients, buffers, torchmetrics states, optimizers, schedulers, the grad
scaler, the strategy state and its instrumentation, plain model attributes, the RNGs, the
datamanager's sampling state, the trainer's step and the writer's pending events.
"""

from __future__ import annotations

import copy
import random
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ns_splat_plus import upstream
from ns_splat_plus.upstream import TrainerLike

# --- snapshot ---------------------------------------------------------------------------------------


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return copy.deepcopy(value)


def _put_back(target: torch.Tensor, saved: torch.Tensor) -> None:
    """Make ``target`` hold ``saved`` bitwise (in place when the layout still matches)."""
    with torch.no_grad():
        if target.shape == saved.shape and target.dtype == saved.dtype and target.device == saved.device:
            target.copy_(saved)
        else:
            target.data = saved.clone()


_PLAIN_SAMPLING_TYPES = (int, float, bool, str, type(None))


def _sampling_snapshot(datamanager: Any) -> Dict[str, Any]:
    """The datamanager's sampling state, generically: index lists, RNG objects, small arrays, and
    anything with state_dict() that is not a module. A datamanager can also define
    ``sampling_state_dict()`` / ``load_sampling_state_dict()`` to say it exactly."""
    if hasattr(datamanager, "sampling_state_dict") and hasattr(datamanager, "load_sampling_state_dict"):
        return {"__explicit__": copy.deepcopy(datamanager.sampling_state_dict())}
    saved: Dict[str, Any] = {}
    for name, value in vars(datamanager).items():
        if name.startswith("__") or name in ("config",):
            continue
        if isinstance(value, random.Random):
            saved[name] = ("random", value.getstate())
        elif isinstance(value, np.random.Generator):
            saved[name] = ("np_generator", copy.deepcopy(value.bit_generator.state))
        elif isinstance(value, np.random.RandomState):
            saved[name] = ("np_randomstate", value.get_state())
        elif isinstance(value, torch.Generator):
            saved[name] = ("torch_generator", value.get_state())
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer)) for v in value):
            saved[name] = ("value", copy.copy(value))
        elif isinstance(value, np.ndarray) and value.size <= 1_000_000:
            saved[name] = ("value", value.copy())
        elif isinstance(value, _PLAIN_SAMPLING_TYPES) and not name.startswith("_"):
            saved[name] = ("value", value)
        elif (
            hasattr(value, "state_dict")
            and hasattr(value, "load_state_dict")
            and not isinstance(value, (torch.nn.Module, torch.utils.data.Dataset))
        ):
            saved[name] = ("state_dict", copy.deepcopy(value.state_dict()))
    return saved


def _sampling_restore(datamanager: Any, saved: Dict[str, Any]) -> None:
    if "__explicit__" in saved:
        datamanager.load_sampling_state_dict(copy.deepcopy(saved["__explicit__"]))
        return
    for name, (kind, value) in saved.items():
        current: Any = getattr(datamanager, name, None)  # a generator or state holder, by kind
        if kind == "random":
            current.setstate(value)
        elif kind == "np_generator":
            current.bit_generator.state = copy.deepcopy(value)
        elif kind == "np_randomstate":
            current.set_state(value)
        elif kind == "torch_generator":
            current.set_state(value)
        elif kind == "state_dict":
            current.load_state_dict(copy.deepcopy(value))
        else:
            setattr(datamanager, name, copy.copy(value))


class TrainingSnapshot:
    """Everything a training step can change, captured so that :meth:`restore` undoes the steps bitwise."""

    def __init__(self, trainer: TrainerLike) -> None:
        pipeline = trainer.pipeline
        model = pipeline.model
        self.device = torch.device(trainer.device) if not isinstance(trainer.device, torch.device) else trainer.device
        # parameters: which object sits where, and its values, gradient and requires_grad
        self.param_values: Dict[int, Tuple[torch.nn.Parameter, torch.Tensor, Optional[torch.Tensor], bool]] = {}
        self.buffer_values: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}
        self.metric_states: List[Tuple[Any, Dict[str, Any]]] = []
        self.module_slots: List[Tuple[torch.nn.Module, Dict[str, Any], Dict[str, Any]]] = []
        for module in pipeline.modules():
            params, buffers = upstream.module_slots(module)  # which object sits under which name
            self.module_slots.append((module, params, buffers))
            for p in params.values():
                if p is not None and id(p) not in self.param_values:
                    grad = None if p.grad is None else p.grad.detach().clone()
                    self.param_values[id(p)] = (p, p.detach().clone(), grad, p.requires_grad)
            for b in buffers.values():
                if b is not None and id(b) not in self.buffer_values:
                    self.buffer_values[id(b)] = (b, b.detach().clone())
            names = upstream.metric_state_names(module)  # a torchmetrics Metric's state, else None
            if names is not None:
                self.metric_states.append((module, {n: _clone(getattr(module, n, None)) for n in names}))
        # optimizers, schedulers, grad scaler
        optimizers = trainer.optimizers
        self.optimizer_groups: Dict[str, List[Dict[str, Any]]] = {}
        self.optimizer_state: Dict[str, Dict[Any, Dict[str, Any]]] = {}
        for name, opt in optimizers.optimizers.items():
            self.optimizer_groups[name] = [
                {k: (list(v) if k == "params" else copy.deepcopy(v)) for k, v in group.items()}
                for group in opt.param_groups
            ]
            self.optimizer_state[name] = {p: {k: _clone(v) for k, v in s.items()} for p, s in opt.state.items()}
        self.optimizer_parameters = {k: list(v) for k, v in optimizers.parameters.items()}
        self.schedulers = {k: copy.deepcopy(s.state_dict()) for k, s in optimizers.schedulers.items()}
        self.grad_scaler = upstream.grad_scaler_state(trainer.grad_scaler)
        # strategy
        self.strategy_state = None
        if isinstance(getattr(model, "strategy_state", None), dict):
            self.strategy_state = {k: _clone(v) for k, v in model.strategy_state.items()}
        strategy: Any = getattr(model, "strategy", None)
        self.strategy_instrumentation = (
            strategy.instrumentation_state() if hasattr(strategy, "instrumentation_state") else None
        )
        # plain attributes of the model (step, info, last_size, ...): references
        self.model_attrs = {k: v for k, v in vars(model).items() if not k.startswith("_")}
        # RNGs
        self.python_rng = random.getstate()
        self.numpy_rng = np.random.get_state()
        self.torch_rng = torch.get_rng_state()
        self.cuda_rng = None
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            self.cuda_index = index
            self.cuda_rng = torch.cuda.get_rng_state(index)
        # data sampling, trainer step, writer events, train/eval mode
        self.sampling = _sampling_snapshot(pipeline.datamanager)
        self.trainer_step = getattr(trainer, "step", 0)
        self.num_writer_events = upstream.writer_event_count()
        self.training_mode = pipeline.training

    def restore(self, trainer: TrainerLike) -> None:
        pipeline = trainer.pipeline
        model = pipeline.model
        for module, params, buffers in self.module_slots:
            upstream.set_module_slots(module, params, buffers)
        for p, value, grad, requires_grad in self.param_values.values():
            _put_back(p, value)
            p.grad = None if grad is None else grad.clone()
            p.requires_grad_(requires_grad)
        for b, value in self.buffer_values.values():
            _put_back(b, value)
        for metric, states in self.metric_states:
            for name, value in states.items():
                setattr(metric, name, _clone(value))
        optimizers = trainer.optimizers
        for name, opt in optimizers.optimizers.items():
            for group, saved in zip(opt.param_groups, self.optimizer_groups[name]):
                group.clear()
                group.update({k: (list(v) if k == "params" else copy.deepcopy(v)) for k, v in saved.items()})
            opt.state.clear()
            for p, s in self.optimizer_state[name].items():
                opt.state[p] = {k: _clone(v) for k, v in s.items()}
        optimizers.parameters.clear()
        optimizers.parameters.update({k: list(v) for k, v in self.optimizer_parameters.items()})
        for name, state in self.schedulers.items():
            optimizers.schedulers[name].load_state_dict(copy.deepcopy(state))
        if hasattr(optimizers, "discard_pending"):
            optimizers.discard_pending()
        upstream.load_grad_scaler_state(trainer.grad_scaler, self.grad_scaler)
        for key in [k for k in vars(model) if not k.startswith("_") and k not in self.model_attrs]:
            del model.__dict__[key]
        model.__dict__.update(self.model_attrs)
        if self.strategy_state is not None:
            model.strategy_state.clear()
            model.strategy_state.update({k: _clone(v) for k, v in self.strategy_state.items()})
        if self.strategy_instrumentation is not None:
            model.strategy.load_instrumentation_state(self.strategy_instrumentation)
        random.setstate(self.python_rng)
        np.random.set_state(self.numpy_rng)
        torch.set_rng_state(self.torch_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, self.cuda_index)
        _sampling_restore(pipeline.datamanager, self.sampling)
        trainer.step = self.trainer_step
        upstream.drop_writer_events(self.num_writer_events)
        pipeline.train(self.training_mode)


# --- the warmup ---------------------------------------------------------------------------------------
