"""Checkpoints that resume exactly and load safely (``weights_only=True``), with clear errors.

Why not nerfstudio's ``Trainer._load_checkpoint``:

* ``SplatfactoModel.load_state_dict`` replaces every Gaussian ``nn.Parameter`` (the count changed
  since start), but the optimizers were built before and keep the stale ones; the next step then
  indexes optimizer state of the wrong size (nerfstudio #3554, a CUDA index error). We rebind the
  optimizers' parameter groups to the model's current parameters before loading their state.
* the densification strategy state (gsplat ``strategy_state``: accumulated 2D gradients, counts,
  radii) is not saved at all, so a resumed run densifies from empty statistics;
* the checkpoint is picked by parsing every file name in the directory, so any stray file (an
  interrupted save's temporary file) breaks it; we only consider ``step-<N>.ckpt``, and we write
  the temporary file outside the checkpoint directory so nerfstudio's own loaders (ns-eval,
  ns-viewer) never see it;
* a truncated or mismatched checkpoint ends in a traceback from deep inside torch; here it is one
  :class:`CheckpointError` naming the file and what to do.

Everything saved is plain tensors / Python numbers, loadable with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import compat

CHECKPOINT_NAME = re.compile(r"^step-(\d+)\.ckpt$")
# Extra entry in the checkpoint's "pipeline" dict, so that ns-eval (which only hands the pipeline
# dict to the pipeline) can report what the training run measured. Popped before load_state_dict.
RUN_INFO_KEY = "splat_plus.run_info"
GAUSSIAN_KEY_PREFIX = "_model.gauss_params."
PER_GAUSSIAN_STRATEGY_KEYS = ("grad2d", "count", "radii")


class CheckpointError(SystemExit):
    """A checkpoint that cannot be used. A SystemExit on purpose: ns-train / ns-eval have no error
    handler, and a SystemExit prints its one message and exits with status 1, without a traceback."""

    def __init__(self, path: Optional[Path], problem: str, what_to_do: str):
        where = f"Checkpoint {path}" if path is not None else "Checkpoint"
        self.path = path
        self.problem = problem
        super().__init__(f"Error: {where}: {problem}\n  What to do: {what_to_do}")

    def __str__(self) -> str:
        return str(self.code)


# --- finding and reading ----------------------------------------------------------------------------


def checkpoint_steps(load_dir: Path) -> List[int]:
    """Steps of the ``step-<N>.ckpt`` files in ``load_dir``, ascending; anything else is ignored."""
    steps = []
    for entry in Path(load_dir).iterdir():
        match = CHECKPOINT_NAME.match(entry.name)
        if match and entry.is_file():
            steps.append(int(match.group(1)))
    return sorted(steps)


def resolve_checkpoint_path(
    load_dir: Optional[Path], load_step: Optional[int], load_checkpoint: Optional[Path]
) -> Optional[Path]:
    """The file ``--load-dir/--load-step`` or ``--load-checkpoint`` designate, or None (fresh run)."""
    if load_dir is not None:
        load_dir = Path(load_dir)
        if not load_dir.is_dir():
            raise CheckpointError(
                load_dir, "this --load-dir is not a directory", "pass the run's nerfstudio_models directory"
            )
        steps = checkpoint_steps(load_dir)
        if not steps:
            raise CheckpointError(
                load_dir,
                "no step-<N>.ckpt file in this --load-dir",
                "pass the run's nerfstudio_models directory (checkpoints are written every --steps-per-save)",
            )
        step = steps[-1] if load_step is None else load_step
        path = load_dir / f"step-{step:09d}.ckpt"
        if step not in steps:
            raise CheckpointError(path, "no such file", f"pick one of the saved steps {steps} with --load-step")
        return path
    if load_checkpoint is not None:
        path = Path(load_checkpoint)
        if not path.is_file():
            raise CheckpointError(path, "no such file", "check the --load-checkpoint path")
        return path
    return None


def read_checkpoint(path: Path) -> Dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on the CPU; unreadable or foreign files are a CheckpointError."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError... for bad files
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "weights_only" in str(err) or "Weights only load failed" in str(err):
            raise CheckpointError(
                path,
                "it holds Python objects that safe loading (weights_only=True) refuses; splat-plus never "
                "writes such checkpoints (splatfacto and older nerfstudio versions do)",
                "resume from a checkpoint written by ns-train splat-plus",
            ) from None
        raise CheckpointError(
            path,
            f"the file cannot be read ({type(err).__name__}: {text}); it is probably truncated or corrupt, "
            "e.g. the run was killed while writing it",
            "delete it and resume from an earlier checkpoint (--load-step), or start the run again",
        ) from None
    if not isinstance(state, dict) or "pipeline" not in state or "step" not in state:
        raise CheckpointError(
            path, "this is not a nerfstudio training checkpoint (no 'pipeline' / 'step')", "pass a step-<N>.ckpt file"
        )
    return state


# --- what a checkpoint holds ------------------------------------------------------------------------


def run_info(trainer) -> Dict[str, Any]:
    """Facts about the run that ns-eval reports next to its own (train peak memory, Gaussian count)."""
    from ns_splat_plus import evaluation

    tracker = evaluation.memory_tracker(trainer.pipeline.device)
    tracker.observe_training()
    return {
        "method_name": trainer.config.method_name,
        "train_peak_memory_bytes": tracker.train_peak_bytes,
        "eval_peak_memory_bytes_during_training": tracker.eval_peak_bytes,
        "memory_device": str(tracker.device),
        "num_gaussians": int(trainer.pipeline.model.num_points),
        "world_size": int(trainer.world_size),
    }


def rng_states() -> Dict[str, Any]:
    """Global RNG states (python, numpy, torch, this CUDA device): a resumed run draws what the
    uninterrupted run would have (camera order, eval picks, densification noise)."""
    np_state = np.random.get_state()
    states = {
        "python": random.getstate(),
        "numpy": {"key": torch.from_numpy(np_state[1].copy()), "pos": int(np_state[2]), "has_gauss": int(np_state[3]),
                  "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def restore_rng_states(states: Dict[str, Any]) -> None:
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        s = states["numpy"]
        np.random.set_state(("MT19937", s["key"].numpy().astype(np.uint32), s["pos"], s["has_gauss"], s["cached_gaussian"]))
    if "torch" in states:
        torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"])


def sampler_state(datamanager) -> Optional[Dict[str, Any]]:
    """The train-camera order of a FullImageDatamanager (remaining cameras and its generator)."""
    if hasattr(datamanager, "checkpoint_sampler_state"):  # a datamanager that knows better
        return datamanager.checkpoint_sampler_state()
    unseen = getattr(datamanager, "train_unseen_cameras", None)
    if unseen is None:
        return None
    state: Dict[str, Any] = {"train_unseen_cameras": [int(i) for i in unseen]}
    generator = getattr(datamanager, "random_generator", None)
    if isinstance(generator, random.Random):
        state["random_generator"] = generator.getstate()
    return state


def restore_sampler_state(datamanager, state: Dict[str, Any]) -> None:
    if hasattr(datamanager, "restore_sampler_state"):
        datamanager.restore_sampler_state(state)
        return
    if "train_unseen_cameras" in state:
        datamanager.train_unseen_cameras = [int(i) for i in state["train_unseen_cameras"]]
    if "random_generator" in state and isinstance(getattr(datamanager, "random_generator", None), random.Random):
        version, internal, gauss = state["random_generator"]
        datamanager.random_generator.setstate((version, tuple(internal), gauss))


def strategy_state_for_checkpoint(model) -> Dict[str, Any]:
    """gsplat's strategy state (tensors on the CPU, numbers as they are)."""
    state = getattr(model, "strategy_state", None) or {}
    saved = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            saved[key] = value.detach().cpu()
        elif value is None or isinstance(value, (bool, int, float, str)):
            saved[key] = value
        else:  # anything else would make the file fail weights_only loading
            CONSOLE.print(f"[yellow]Strategy state '{key}' ({type(value).__name__}) is not saved in checkpoints.[/yellow]")
    return saved


def checkpoint_state(trainer, step: int) -> Dict[str, Any]:
    """Everything a splat-plus checkpoint holds, free of numpy objects (loadable with weights_only=True)."""
    pipeline_state = dict(trainer.pipeline.state_dict())
    pipeline_state[RUN_INFO_KEY] = run_info(trainer)
    return compat.weights_only_safe(
        {
            "step": step,
            "method_name": trainer.config.method_name,
            "pipeline": pipeline_state,
            "optimizers": {k: v.state_dict() for (k, v) in trainer.optimizers.optimizers.items()},
            "schedulers": {k: v.state_dict() for (k, v) in trainer.optimizers.schedulers.items()},
            "scalers": trainer.grad_scaler.state_dict(),
            "strategy_state": strategy_state_for_checkpoint(trainer.pipeline.model),
            "sampler": sampler_state(trainer.pipeline.datamanager),
            "rng": rng_states(),
        }
    )


# --- checking a checkpoint against the model before touching anything ---------------------------------


def pop_run_info(pipeline_state: Dict[str, Any]) -> Dict[str, Any]:
    info = pipeline_state.pop(RUN_INFO_KEY, None)
    return info if isinstance(info, dict) else {}


def check_pipeline_state(pipeline_state: Dict[str, Any], model, path: Optional[Path]) -> int:
    """The Gaussian count of ``pipeline_state``, after checking it fits ``model``."""
    gaussian_keys = {k[len(GAUSSIAN_KEY_PREFIX):]: k for k in pipeline_state if k.startswith(GAUSSIAN_KEY_PREFIX)}
    if "means" not in gaussian_keys:
        raise CheckpointError(
            path,
            "it holds no Gaussians (no '_model.gauss_params.means'): it was written by another kind of method",
            "load it with the method that wrote it (see method_name in the run's config.yml)",
        )
    num = int(pipeline_state[gaussian_keys["means"]].shape[0])
    expected = {name: tuple(p.shape[1:]) for name, p in model.gauss_params.items()}
    missing = sorted(set(expected) - set(gaussian_keys))
    if missing:
        raise CheckpointError(path, f"Gaussian parameters {missing} are missing", "use a complete splat-plus checkpoint")
    for name, key in gaussian_keys.items():
        shape = tuple(pipeline_state[key].shape)
        if shape[0] != num:
            raise CheckpointError(
                path,
                f"inconsistent Gaussian counts: means has {num}, {name} has {shape[0]} (the file is damaged)",
                "resume from another checkpoint",
            )
        if name in expected and shape[1:] != expected[name]:
            raise CheckpointError(
                path,
                f"{name} has per-Gaussian shape {list(shape[1:])} but this model expects {list(expected[name])} "
                "(a different --pipeline.model.sh-degree or model option than the run that wrote it)",
                "use the options of the run that wrote the checkpoint (its config.yml)",
            )
    return num


def rebind_optimizers(optimizers, param_groups: Dict[str, List[torch.nn.Parameter]]) -> None:
    """Point every optimizer at the model's current parameters, dropping state keyed by stale ones
    (nerfstudio #3554: SplatfactoModel.load_state_dict replaces the Parameter objects)."""
    for name, optimizer in optimizers.optimizers.items():
        if name not in param_groups:
            continue
        params = list(param_groups[name])
        if len(optimizer.param_groups) != 1:
            raise RuntimeError(f"optimizer '{name}' has {len(optimizer.param_groups)} parameter groups, expected 1")
        optimizer.param_groups[0]["params"] = params
        optimizer.state = defaultdict(dict)
        optimizers.parameters[name] = params


def check_optimizer_states(saved: Dict[str, Any], optimizers, path: Optional[Path]) -> None:
    """Saved optimizer state must match the current parameters (names, counts, shapes)."""
    current = optimizers.optimizers
    if set(saved) != set(current):
        raise CheckpointError(
            path,
            f"optimizer groups {sorted(saved)} differ from this run's {sorted(current)} "
            "(different model options, e.g. camera optimizer or bilateral grid)",
            "use the options of the run that wrote the checkpoint (its config.yml)",
        )
    for name, state in saved.items():
        params = current[name].param_groups[0]["params"]
        saved_ids = state["param_groups"][0]["params"] if state.get("param_groups") else []
        if len(saved_ids) != len(params):
            raise CheckpointError(
                path, f"optimizer '{name}' has {len(saved_ids)} parameters saved, this run has {len(params)}",
                "use the options of the run that wrote the checkpoint (its config.yml)",
            )
        for param_id, param in zip(saved_ids, params):
            for key, value in state["state"].get(param_id, {}).items():
                if isinstance(value, torch.Tensor) and value.dim() > 0 and tuple(value.shape) != tuple(param.shape):
                    raise CheckpointError(
                        path,
                        f"optimizer '{name}' state '{key}' has shape {list(value.shape)}, "
                        f"its parameter has {list(param.shape)} (the file is inconsistent)",
                        "resume from another checkpoint",
                    )


def restore_strategy_state(model, saved: Dict[str, Any], num_gaussians: int, path: Optional[Path]) -> None:
    device = model.device
    for key in PER_GAUSSIAN_STRATEGY_KEYS:
        value = saved.get(key)
        if isinstance(value, torch.Tensor) and value.shape[0] != num_gaussians:
            raise CheckpointError(
                path,
                f"strategy state '{key}' covers {value.shape[0]} Gaussians, the model has {num_gaussians}",
                "resume from another checkpoint",
            )
    for key, value in saved.items():
        model.strategy_state[key] = value.to(device) if isinstance(value, torch.Tensor) else value


# --- resuming ---------------------------------------------------------------------------------------


def resume(trainer, path: Path) -> int:
    """Load ``path`` into ``trainer`` so that training continues exactly where it stopped.

    Returns the checkpoint's step. Nothing of the trainer is modified when the checkpoint is unusable.
    """
    state = read_checkpoint(path)
    method = state.get("method_name")
    if method is not None and method != trainer.config.method_name:
        raise CheckpointError(
            path,
            f"it was written by method '{method}', this run is '{trainer.config.method_name}'",
            f"resume it with `ns-train {method} ...`",
        )
    step = int(state["step"])
    pipeline_state = dict(state["pipeline"])
    pop_run_info(pipeline_state)
    model = trainer.pipeline.model
    num = check_pipeline_state(pipeline_state, model, path)

    trainer.pipeline.load_pipeline(pipeline_state, step)
    model.step = step  # splatfacto's load_state_dict sets 30000 (fully trained), wrong for a resume
    rebind_optimizers(trainer.optimizers, trainer.pipeline.get_param_groups())
    check_optimizer_states(state["optimizers"], trainer.optimizers, path)
    trainer.optimizers.load_optimizers(state["optimizers"])
    if "schedulers" in state and trainer.config.load_scheduler:
        trainer.optimizers.load_schedulers(state["schedulers"])
    trainer.grad_scaler.load_state_dict(state["scalers"])
    if "strategy_state" in state:
        restore_strategy_state(model, state["strategy_state"], num, path)
    else:
        CONSOLE.print(f"[yellow]{path} has no densification statistics: they start from zero.[/yellow]")
    if trainer.world_size == 1:
        # Camera order and RNG streams are per process; under several ranks each rank keeps its own.
        if state.get("sampler"):
            restore_sampler_state(trainer.pipeline.datamanager, state["sampler"])
        if "rng" in state:
            restore_rng_states(state["rng"])
    return step
