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

import errno
import os
import random
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, cast

import numpy as np
import torch
from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanagerConfig
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import upstream
from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.parallel.config import data_parallel_of
from ns_splat_plus.parallel.schedule import cameras_per_step_of
from ns_splat_plus.training import dataset_record, options_record
from ns_splat_plus.upstream import TrainerLike

CHECKPOINT_NAME = re.compile(r"^step-(\d+)\.ckpt$")
# Extra entry in the checkpoint's "pipeline" dict, so that ns-eval (which only hands the pipeline
# dict to the pipeline) can report what the training run measured. Popped before load_state_dict.
RUN_INFO_KEY = "splat_plus.run_info"
GAUSSIAN_KEY_PREFIX = "_model.gauss_params."
PER_GAUSSIAN_STRATEGY_KEYS = ("grad2d", "count", "radii")


class CheckpointError(SplatPlusError):
    """A checkpoint that cannot be used: the message names the file, the problem and what to do."""

    def __init__(self, path: Optional[Path], problem: str, what_to_do: str):
        where = f"Checkpoint {path}" if path is not None else "Checkpoint"
        self.path = path
        self.problem = problem
        super().__init__(f"Error: {where}: {problem}", what_to_do)


class CheckpointNotFoundError(CheckpointError):
    """The checkpoint an option names (``--load-dir``, ``--load-step``, ``--load-checkpoint``, a run's config.yml)
    is not there: input, so exit status 2 as every input error (docs/evaluation-and-resume.md, "Errors")."""

    exit_status = 2


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
        if load_dir.is_file():
            one = f"--load-checkpoint {load_dir} to resume from this file, or " if load_dir.suffix == ".ckpt" else ""
            raise CheckpointNotFoundError(
                load_dir,
                "this --load-dir is a file, not a folder of checkpoints",
                f"pass {one}--load-dir with the run's nerfstudio_models folder",
            )
        if not load_dir.is_dir():
            if load_dir.name == "nerfstudio_models" and (load_dir.parent / "config.yml").is_file():
                problem, fix = "no such folder: that run saved no checkpoint", "train it again from the start"
            else:
                problem, fix = "no such folder", "check the path: pass the run's nerfstudio_models directory"
            raise CheckpointNotFoundError(load_dir, problem, fix)
        models = load_dir / "nerfstudio_models"
        if models.is_dir() and checkpoint_steps(models):  # the run's folder, given for its checkpoints' folder
            fix = f"pass --load-dir {models}, the run's checkpoints"
        else:
            fix = "pass the run's nerfstudio_models directory (checkpoints are written every --steps-per-save)"
        return _step_file(load_dir, load_step, "no step-<N>.ckpt file in this --load-dir", fix, "with --load-step")
    if load_checkpoint is not None:
        path = Path(load_checkpoint)
        if path.is_dir():  # a run's nerfstudio_models folder: --load-dir's job
            steps = checkpoint_steps(path)
            raise CheckpointNotFoundError(
                path,
                "--load-checkpoint names one checkpoint file, and this is a folder"
                + (f" of checkpoints (steps {steps})" if steps else ""),
                f"pass --load-dir {path} to resume from its newest checkpoint, or --load-checkpoint "
                f"{path / 'step-<N>.ckpt'}",
            )
        if not path.is_file():
            raise CheckpointNotFoundError(path, "no such file", "check the --load-checkpoint path")
        return path
    return None


def _step_file(directory: Path, load_step: Optional[int], none_problem: str, none_fix: str, how_to_pick: str) -> Path:
    """``directory/step-<load_step>.ckpt`` (the newest when None), after checking it exists."""
    steps = checkpoint_steps(directory) if directory.is_dir() else []
    if not steps:
        raise CheckpointNotFoundError(directory, none_problem, none_fix)
    step = steps[-1] if load_step is None else load_step
    path = directory / f"step-{step:09d}.ckpt"
    if step not in steps:
        raise CheckpointNotFoundError(path, "no such file", f"pick one of the saved steps {steps} {how_to_pick}")
    return path


def checked_checkpoint_step(checkpoint_dir: Path, load_step: Optional[int]) -> int:
    """The step ns-eval / ns-viewer / ns-export should load from a run's ``checkpoint_dir``:
    ``load_step``, or the newest ``step-<N>.ckpt`` (stray files such as ``.DS_Store`` ignored),
    after a cheap check that the file is complete. nerfstudio's ``eval_load_checkpoint`` parses
    every name in the directory (ValueError on a stray file, IndexError when there is none) and
    reports a truncated file as a PytorchStreamReader error."""
    import zipfile

    path = _step_file(
        Path(checkpoint_dir),
        load_step,
        "the run has no step-<N>.ckpt checkpoint (deleted, or training stopped before it saved one)",
        "restore the run's nerfstudio_models/ directory, or train again (ns-train saves every --steps-per-save steps and at the end)",
        "with --load-step in config.yml",
    )
    match = CHECKPOINT_NAME.match(path.name)
    assert match is not None  # _step_file picks a step-<N>.ckpt
    step = int(match.group(1))
    try:
        # torch.save writes a zip archive: a truncated file has no end-of-central-directory record
        zipfile.ZipFile(path).close()
    except (zipfile.BadZipFile, OSError) as exc:
        others = [s for s in checkpoint_steps(path.parent) if s != step]
        raise CheckpointError(
            path,
            f"the file is damaged or truncated ({exc}; {path.stat().st_size} bytes)",
            "restore it from a backup"
            + (
                f", or delete it to use the previous checkpoint (saved steps: {others})"
                if others
                else ", or train again"
            ),
        ) from None
    return step


TORCH_FILE_STARTS = (b"PK\x03\x04", b"\x80")
"""How a ``torch.save`` file starts: a zip archive (torch's format since 1.6) or a pickle (its legacy format)."""


def not_a_torch_file(path: Path) -> Optional[str]:
    """Why ``path`` cannot be a checkpoint whatever is in it (empty, or another kind of file: a text file, a
    config.yml), from its first bytes; None where it starts as torch's files do, or cannot be opened (torch.load's
    error then names why, as before)."""
    try:
        with open(path, "rb") as file:
            head = file.read(4)
    except OSError:
        return None
    if not head:
        return "the file is empty (0 bytes)"
    if head.startswith(TORCH_FILE_STARTS):
        return None
    kind = "a text file" if head.isascii() else "another kind of file"
    return f"it is not a PyTorch checkpoint ({kind}: neither a zip archive nor a pickle)"


def read_checkpoint(path: Path) -> Dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on the CPU; unreadable or foreign files are a CheckpointError."""
    why_not = not_a_torch_file(path)
    if why_not is not None:  # not a damaged checkpoint: nothing to delete, another file to pass
        raise CheckpointError(
            path, why_not, "pass a step-<N>.ckpt file that ns-train wrote (in <run>/nerfstudio_models)"
        )
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


def run_info(trainer: TrainerLike) -> Dict[str, Any]:
    """Facts about the run that ns-eval reports next to its own (train peak memory, Gaussian count), and the
    photos it trained and held out, in which frame (``dataset_record``: compared on resume and in ns-eval)."""
    from ns_splat_plus.evaluation import memory_tracker

    tracker = memory_tracker(trainer.pipeline.device)
    tracker.observe_training()
    return {
        "method_name": trainer.config.method_name,
        "train_peak_memory_bytes": tracker.train_peak_bytes,
        "eval_peak_memory_bytes_during_training": tracker.eval_peak_bytes,
        "memory_device": str(tracker.device),
        "num_gaussians": int(trainer.pipeline.model.num_points),
        "world_size": int(trainer.world_size),
        "max_num_iterations": int(trainer.config.max_num_iterations),  # ns-eval names a checkpoint before the end
        dataset_record.RECORD_KEY: dataset_record.photo_record_of(trainer.pipeline.datamanager),
        options_record.RECORD_KEY: options_record.options_record(trainer.config.pipeline.model),
    }


def rng_states() -> Dict[str, Any]:
    """Global RNG states (python, numpy, torch, this CUDA device): a resumed run draws what the
    uninterrupted run would have (camera order, eval picks, densification noise)."""
    np_state = np.random.get_state()
    assert isinstance(np_state, tuple)  # the legacy form, get_state's default
    states = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state[1].copy()),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def portable(value: Any) -> Any:
    """``value`` with tensors as (dtype, shape, bytes) tuples: what torch.distributed's object
    collectives can pickle on every torch version (they fail on tensors in torch 2.15)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        return ("__tensor__", str(t.dtype).removeprefix("torch."), tuple(t.shape), t.numpy().tobytes())
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(portable(v) for v in value)
    return value


def from_portable(value: Any) -> Any:
    """The inverse of :func:`portable`."""
    if isinstance(value, tuple) and len(value) == 4 and value[0] == "__tensor__":
        dtype = getattr(torch, value[1])
        return torch.frombuffer(bytearray(value[3]), dtype=dtype).reshape(value[2]).clone()
    if isinstance(value, dict):
        return {k: from_portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(from_portable(v) for v in value)
    return value


def restore_rng_states(states: Dict[str, Any]) -> None:
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        s = states["numpy"]
        np.random.set_state(
            ("MT19937", s["key"].numpy().astype(np.uint32), s["pos"], s["has_gauss"], s["cached_gaussian"])
        )
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
    eval_unseen = getattr(datamanager, "eval_unseen_cameras", None)
    if eval_unseen is not None:  # the in-training evaluation's image order (next_eval_image pops from it)
        state["eval_unseen_cameras"] = [int(i) for i in eval_unseen]
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
    if "eval_unseen_cameras" in state and hasattr(datamanager, "eval_unseen_cameras"):
        datamanager.eval_unseen_cameras = [int(i) for i in state["eval_unseen_cameras"]]
    if "random_generator" in state and isinstance(getattr(datamanager, "random_generator", None), random.Random):
        version, internal, gauss = state["random_generator"]
        datamanager.random_generator.setstate((version, tuple(internal), gauss))


def strategy_state_for_checkpoint(model) -> Dict[str, Any]:
    """gsplat's strategy state (tensors on the CPU, numbers as they are)."""
    state = getattr(model, "strategy_state", None) or {}
    saved: Dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            saved[key] = value.detach().cpu()
        elif value is None or isinstance(value, (bool, int, float, str)):
            saved[key] = value
        else:  # anything else would make the file fail weights_only loading
            CONSOLE.print(
                f"[yellow]Strategy state '{key}' ({type(value).__name__}) is not saved in checkpoints.[/yellow]"
            )
    return saved


def monitor_state_for_checkpoint(model) -> Optional[Dict[str, Any]]:
    """The gradient monitor's bookkeeping (refine count, warned flag, zero-gradient run, summary window)."""
    strategy: Any = getattr(model, "strategy", None)
    return strategy.monitor_state_dict() if hasattr(strategy, "monitor_state_dict") else None


def training_facts(trainer: TrainerLike) -> Dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint (checked by :func:`resume`)."""
    dp = data_parallel_of(trainer.config)
    model_config = trainer.config.pipeline.model
    datamanager = cast(FullImageDatamanagerConfig, trainer.config.pipeline.datamanager)  # SplatPlusDataManagerConfig
    data = getattr(datamanager, "data", None) or getattr(datamanager.dataparser, "data", None)
    return {
        "world_size": int(trainer.world_size),
        "cameras_per_step": cameras_per_step_of(trainer.config.pipeline.datamanager, trainer.world_size),
        "scale_schedule": bool(dp.scale_schedule),
        "steps_scaler": float(getattr(trainer.config, "steps_scaler", 1.0)),
        "lr_scaling": str(dp.lr_scaling),
        "scale_adam_betas": bool(dp.scale_adam_betas),
        "strategy": str(getattr(model_config, "strategy", "default")),
        "data": None if data is None else str(Path(data).resolve()),
    }


def checkpoint_state(
    trainer: TrainerLike, step: int, rng_per_rank: Optional[List[Dict[str, Any]]] = None
) -> Dict[str, Any]:
    """Everything a splat-plus checkpoint holds, free of numpy objects (loadable with weights_only=True).

    ``rng_per_rank``: every rank's RNG states (gathered by the trainer), so that a run on W ranks
    resumed on W ranks continues exactly; rank 0's are also stored as ``rng``.
    """
    pipeline_state = dict(trainer.pipeline.state_dict())
    pipeline_state[RUN_INFO_KEY] = run_info(trainer)
    return upstream.weights_only_safe(
        {
            "step": step,
            "method_name": trainer.config.method_name,
            "pipeline": pipeline_state,
            "optimizers": {k: v.state_dict() for (k, v) in trainer.optimizers.optimizers.items()},
            "schedulers": {k: v.state_dict() for (k, v) in trainer.optimizers.schedulers.items()},
            "scalers": trainer.grad_scaler.state_dict(),
            "strategy_state": strategy_state_for_checkpoint(trainer.pipeline.model),
            "strategy_monitor": monitor_state_for_checkpoint(trainer.pipeline.model),
            "sampler": sampler_state(trainer.pipeline.datamanager),
            "rng": rng_states() if not rng_per_rank else rng_per_rank[0],
            "rng_per_rank": rng_per_rank or [],
            "training": training_facts(trainer),
        }
    )


def fsync_directory(directory: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows, or a filesystem that refuses: the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_checkpoint(state: Dict[str, Any], checkpoint_dir: Path, step: int) -> Path:
    """Write ``state`` as ``checkpoint_dir/step-<N>.ckpt`` atomically; a failed write (full disk)
    leaves the earlier checkpoints untouched and ends in one CheckpointError."""
    path = Path(checkpoint_dir) / f"step-{step:09d}.ckpt"
    # The temporary file lives beside the checkpoint directory, not in it: nerfstudio's loaders
    # (ns-eval, ns-viewer) parse every file name there. Same filesystem, so the rename is atomic.
    tmp_path = path.parent.parent / f".{path.name}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp_path, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes on disk before the rename makes them the checkpoint
        tmp_path.replace(path)
        fsync_directory(path.parent)  # and the rename itself (a crash now keeps the new name)
    except BaseException as err:  # a second Ctrl-C too (SystemExit): no half-written file left behind
        tmp_path.unlink(missing_ok=True)
        if not isinstance(err, (OSError, RuntimeError)):
            raise
        reason = getattr(err, "strerror", None) or str(err).strip().splitlines()[0]
        full = getattr(err, "errno", None) == errno.ENOSPC or "No space left" in str(err)
        earlier = [s for s in checkpoint_steps(path.parent) if s != step] if path.parent.is_dir() else []
        kept = (
            f"the last checkpoint, {path.parent / f'step-{earlier[-1]:09d}.ckpt'}, is untouched"
            if earlier
            else "this run has no earlier checkpoint: the steps trained so far are lost"
        )
        raise CheckpointError(
            path,
            ("disk full: " if full else "") + f"it could not be written ({type(err).__name__}: {reason}); {kept}",
            "free disk space (or point --output-dir at another disk)"
            + (f" and resume with --load-dir {shlex.quote(str(path.parent))}" if earlier else " and train again"),
        ) from None
    return path
