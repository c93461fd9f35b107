"""Resuming a run from a checkpoint: every check first, then the load (:func:`resume`).

Nothing of the trainer is modified when the checkpoint is unusable: another method, another
number of ranks or scaling (refused: its learning rates, Adam betas and schedule were scaled for
its ranks), another strategy or model options, inconsistent optimizer or strategy state.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE
from rich.markup import escape

from ns_splat_plus.parallel import collectives, schedule
from ns_splat_plus.training import dataset_record, options_record
from ns_splat_plus.training.checkpoint import (
    GAUSSIAN_KEY_PREFIX,
    PER_GAUSSIAN_STRATEGY_KEYS,
    RUN_INFO_KEY,
    CheckpointError,
    read_checkpoint,
    restore_rng_states,
    restore_sampler_state,
    training_facts,
)
from ns_splat_plus.upstream import TrainerLike

# --- checking a checkpoint against the model before touching anything ---------------------------------


def pop_run_info(pipeline_state: Dict[str, Any]) -> Dict[str, Any]:
    info = pipeline_state.pop(RUN_INFO_KEY, None)
    return info if isinstance(info, dict) else {}


def check_pipeline_state(pipeline_state: Dict[str, Any], model, path: Optional[Path]) -> int:
    """The Gaussian count of ``pipeline_state``, after checking it fits ``model``."""
    gaussian_keys = {k[len(GAUSSIAN_KEY_PREFIX) :]: k for k in pipeline_state if k.startswith(GAUSSIAN_KEY_PREFIX)}
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
        raise CheckpointError(
            path, f"Gaussian parameters {missing} are missing", "use a complete splat-plus checkpoint"
        )
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


def check_optimizer_states(
    saved: Dict[str, Any], optimizers, pipeline_state: Dict[str, Any], path: Optional[Path]
) -> None:
    """Saved optimizer state must fit this run (group names, parameter counts) and the checkpoint's
    own Gaussians (state shapes): checked before anything is loaded."""
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
                path,
                f"optimizer '{name}' has {len(saved_ids)} parameters saved, this run has {len(params)}",
                "use the options of the run that wrote the checkpoint (its config.yml)",
            )
        gaussians = pipeline_state.get(GAUSSIAN_KEY_PREFIX + name)
        for param_id, param in zip(saved_ids, params):
            expected = tuple(gaussians.shape) if gaussians is not None and len(params) == 1 else tuple(param.shape)
            for key, value in state["state"].get(param_id, {}).items():
                if isinstance(value, torch.Tensor) and value.dim() > 0 and tuple(value.shape) != expected:
                    raise CheckpointError(
                        path,
                        f"optimizer '{name}' state '{key}' has shape {list(value.shape)}, "
                        f"its parameter has {list(expected)} (the file is inconsistent)",
                        "resume from another checkpoint",
                    )


def check_strategy_state(saved: Dict[str, Any], num_gaussians: int, path: Optional[Path]) -> None:
    for key in PER_GAUSSIAN_STRATEGY_KEYS:
        value = saved.get(key)
        if isinstance(value, torch.Tensor) and value.shape[0] != num_gaussians:
            raise CheckpointError(
                path,
                f"strategy state '{key}' covers {value.shape[0]} Gaussians, the model has {num_gaussians}",
                "resume from another checkpoint",
            )


def no_steps_left(path: Path, step: int, config) -> CheckpointError:
    """The error of a resume whose checkpoint at ``step`` already completes the run of ``config`` (a launched
    SplatPlusTrainerConfig): it quotes the --max-num-iterations to type, not the scaled count; exit status 2,
    an option to change as every input error, not a damaged file."""
    error = CheckpointError(
        path,
        f"it is at step {step}, which already completes {schedule.describe_max_num_iterations(config)}",
        f"pass --max-num-iterations {schedule.typed_max_num_iterations(config, step + 2)} or more to train further",
    )
    error.exit_status = 2
    return error


def _launch_on(ranks: int, device_type: str) -> str:
    """How to start ``ranks`` ranks: ns-train's own launcher spawns several on CUDA GPUs only, and on CUDA takes
    every GPU of the job unless told how many."""
    if ranks == 1:
        return "ns-train --machine.num-devices 1" if device_type == "cuda" else "ns-train, without torchrun"
    torchrun = f"torchrun --nproc-per-node {ranks} $(which ns-train) ..."
    return f"ns-train --machine.num-devices {ranks}, or {torchrun}" if device_type == "cuda" else torchrun


def check_training_facts(state: Dict[str, Any], trainer: TrainerLike, path: Optional[Path]) -> None:
    """Refuse a resume whose ranks, scaling or strategy differ from the run that wrote the checkpoint:
    its learning rates, Adam betas and schedule were scaled for its number of ranks, and optimizer
    ``load_state_dict`` would silently bring them back. Warn when the dataset differs: another folder, or photos
    added, removed or re-split since the run (its record, ``dataset_record``; none in older checkpoints)."""
    saved = state.get("training") or {}
    run_info = state["pipeline"].get(RUN_INFO_KEY) or {}
    saved_world = int(saved.get("world_size", run_info.get("world_size", 1)))
    now = training_facts(trainer)
    if saved_world != now["world_size"]:
        raise CheckpointError(
            path,
            f"it was written by a run on {saved_world} rank(s) and this run has {now['world_size']}: the learning "
            f"rates, Adam betas and step schedule of that run were scaled for {saved_world} rank(s), and a resume "
            "cannot rescale optimizer moments and a half-done schedule exactly",
            f"resume on {saved_world} rank(s) ({_launch_on(saved_world, trainer.config.machine.device_type)}), or start "
            "a new run",
        )
    options = {
        "strategy": "--pipeline.model.strategy",
        "cameras_per_step": "--pipeline.datamanager.cameras-per-step",
        "steps_scaler": "--steps-scaler",
    }
    for key in ("scale_schedule", "lr_scaling", "scale_adam_betas", "strategy", "cameras_per_step", "steps_scaler"):
        if key in saved and saved[key] != now[key]:
            option = options.get(key, f"--data-parallel.{key.replace('_', '-')}")
            raise CheckpointError(
                path,
                f"it was written with {option} {saved[key]}, this run has {now[key]}",
                f"resume with {option} {saved[key]} (the options of the run that wrote it)",
            )
    if saved.get("data") and now["data"] and saved["data"] != now["data"] and collectives.is_main_process():
        CONSOLE.print(
            f"[yellow]Resuming {path} (trained on {saved['data']}) on another dataset: {now['data']}.[/yellow]"
        )
    warning = dataset_record.resume_warning(dataset_record.changes_since(run_info, trainer.pipeline.datamanager), path)
    if warning is not None and collectives.is_main_process():  # every rank reads the same photos: said once
        CONSOLE.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)
    changes = options_record.changed_options(run_info.get(options_record.RECORD_KEY), trainer.config.pipeline.model)
    warning = options_record.resume_warning(changes, path)
    if warning is not None and collectives.is_main_process():
        CONSOLE.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)


def restore_strategy_state(model, saved: Dict[str, Any]) -> None:
    device = model.device
    for key, value in saved.items():
        model.strategy_state[key] = value.to(device) if isinstance(value, torch.Tensor) else value


def restore_train_peak(trainer: TrainerLike, run_info: Dict[str, Any]) -> None:
    """The training peak memory the checkpoint's run measured, kept as this run's starting peak: a
    resumed run reports the peak of the whole training (ns-eval compares the eval peak with it)."""
    from ns_splat_plus.evaluation import memory_tracker

    saved = run_info.get("train_peak_memory_bytes")
    tracker = memory_tracker(trainer.pipeline.device)
    if saved is not None and str(run_info.get("memory_device", tracker.device)) == str(tracker.device):
        tracker.train_peak_bytes = max(tracker.train_peak_bytes or 0, int(saved))


# --- resuming ---------------------------------------------------------------------------------------


def resume(trainer: TrainerLike, path: Path) -> int:
    """Load ``path`` into ``trainer`` so that training continues exactly where it stopped.

    Returns the checkpoint's step. Everything is checked before anything is loaded: nothing of the
    trainer is modified when the checkpoint is unusable (another method, ranks, strategy, model
    options, inconsistent optimizer or strategy state).
    """
    state = read_checkpoint(path)
    method = state.get("method_name")
    if method is not None and method != trainer.config.method_name:
        raise CheckpointError(
            path,
            f"it was written by method '{method}', this run is '{trainer.config.method_name}'",
            f"resume it with `ns-train {method} ...`",
        )
    check_training_facts(state, trainer, path)
    step = int(state["step"])
    pipeline_state = dict(state["pipeline"])
    pop_run_info(pipeline_state)
    model = trainer.pipeline.model
    num = check_pipeline_state(pipeline_state, model, path)
    check_optimizer_states(state["optimizers"], trainer.optimizers, pipeline_state, path)
    if "strategy_state" in state:
        check_strategy_state(state["strategy_state"], num, path)

    trainer.pipeline.load_pipeline(pipeline_state, step)
    model.step = step  # splatfacto's load_state_dict sets 30000 (fully trained), wrong for a resume
    rebind_optimizers(trainer.optimizers, trainer.pipeline.get_param_groups())
    trainer.optimizers.load_optimizers(state["optimizers"])
    if "schedulers" in state and trainer.config.load_scheduler:
        trainer.optimizers.load_schedulers(state["schedulers"])
    trainer.grad_scaler.load_state_dict(state["scalers"])
    if "strategy_state" in state:
        restore_strategy_state(model, state["strategy_state"])
    elif collectives.is_main_process():  # the same file on every rank: said once
        CONSOLE.print(f"[yellow]{path} has no densification statistics: they start from zero.[/yellow]")
    if state.get("strategy_monitor") and hasattr(getattr(model, "strategy", None), "load_monitor_state_dict"):
        model.strategy.load_monitor_state_dict(state["strategy_monitor"], model.device)
    restore_train_peak(trainer, state["pipeline"].get(RUN_INFO_KEY) or {})
    if trainer.world_size == 1:
        # one process: the datamanager's own sampler (fps) and the RNG streams
        if state.get("sampler"):
            restore_sampler_state(trainer.pipeline.datamanager, state["sampler"])
        if "rng" in state:
            restore_rng_states(state["rng"])
    elif len(state.get("rng_per_rank") or []) == trainer.world_size:
        # several ranks: the camera order is a function of the step; each rank gets its own RNG streams back
        restore_rng_states(state["rng_per_rank"][collectives.get_rank()])
    elif collectives.is_main_process():
        CONSOLE.print(f"[yellow]{path} holds no per-rank RNG states: ranks > 0 continue with fresh ones.[/yellow]")
    return step
