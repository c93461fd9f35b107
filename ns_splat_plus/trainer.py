"""SplatPlusTrainer: nerfstudio's Trainer with the pieces splat-plus needs before and around steps.

Thin on purpose: each concern lives in its own module and is called from one place here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Type

import torch

from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils.decorators import check_main_thread
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import checkpoint, densify, distributed, inputs, viewer, warmup
from ns_splat_plus.devices import SplatPlusMachineConfig


@dataclass
class SplatPlusTrainerConfig(TrainerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusTrainer)
    machine: SplatPlusMachineConfig = field(default_factory=SplatPlusMachineConfig)
    """Machine configuration; --machine.num-devices 0 (default) uses every GPU the job was given."""
    data_parallel: distributed.DataParallelConfig = field(default_factory=distributed.DataParallelConfig)
    """Training on several GPUs / processes: schedule and learning-rate scaling, replica checks."""
    warmup_steps: int = 5
    """Training steps run (and undone, bitwise) before step 0 to warm kernels, allocator and caches; 0: off."""

    def set_timestamp(self) -> None:
        # ns-train's main() calls this first, before it prints/saves the config and launches: the
        # place to resolve devices, join torchrun/srun's process group, build gsplat once and scale
        # the schedule, before any rank starts. Every rank then uses rank 0's timestamp (one run dir).
        distributed.prepare_launch(self)
        super().set_timestamp()
        self.timestamp = distributed.broadcast_object(self.timestamp)

    def print_to_terminal(self) -> None:
        if distributed.is_main_process():
            super().print_to_terminal()

    def save_config(self) -> None:
        if distributed.is_main_process():
            super().save_config()


class SplatPlusTrainer(Trainer):
    config: SplatPlusTrainerConfig

    # --- process / device set-up (distributed.py, devices.py) -------------------------------

    def __init__(self, config: SplatPlusTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        # torchrun / srun: nerfstudio's launch passes (0, 1); the real rank, world size and GPU come
        # from the process group (nerfstudio never calls torch.cuda.set_device)
        process = distributed.setup_process(config, local_rank, world_size)
        super().__init__(config, local_rank=process.local_rank, world_size=process.world_size)
        self.rank = process.rank
        self.device = process.device  # cuda:<GPU of this rank>, which is 0 when srun binds one GPU per task

    def setup(self, test_mode="val") -> None:
        model_config = self.config.pipeline.model
        if getattr(model_config, "init_seed", 0) is None:
            model_config.init_seed = self.config.machine.seed  # same on every rank, unlike the global seed
        with inputs.user_errors():  # bad data/points: one clear message, not a dataparser traceback
            inputs.preflight(self.config)
            super().setup(test_mode=test_mode)
        # several ranks: initial checksums compared and logged, replica checks, final bitwise check
        self.rank_monitor = distributed.RankMonitor(self, self.config.data_parallel)
        self.rank_monitor.record_initial()
        self.callbacks.extend(self.rank_monitor.callbacks())
        # --- viewer panel (viewer.py) goes here ---
        self.health_panel = viewer.attach_to_trainer(self)  # also sets self.quit_on_train_completion
        densify.attach_to_trainer(self)  # densification.jsonl in the run directory, panel callbacks

    def _update_viewer_state(self, step: int) -> None:
        super()._update_viewer_state(step)
        # means.shape is host metadata: no device sync; the panel sends only to connected browsers
        self.health_panel.update(step, self.pipeline.model.num_points, state=self.training_state)

    def _train_complete_viewer(self) -> None:
        # nerfstudio calls this after the last step unless quit_on_train_completion is True; ours
        # defaults to None (auto, resolved in viewer.py) so that batch jobs end instead of idling forever.
        self.health_panel.update(self.step, self.pipeline.model.num_points, state="completed", force=True)
        if self.quit_on_train_completion:
            if self.viewer_state is not None and hasattr(self.viewer_state.viser_server, "stop"):
                self.viewer_state.viser_server.stop()
            return
        super()._train_complete_viewer()

    # --- optimizer step (gradient averaging: distributed.py; finiteness checks: densify.py) ---

    def setup_optimizers(self) -> densify.CheckedOptimizers:
        return densify.CheckedOptimizers(
            self.config.optimizers.copy(),
            self.pipeline.get_param_groups(),
            check_finite=getattr(self.config.pipeline.model, "instrumentation", True),
            step_source=lambda: self.step,
        )

    # --- training loop (warmup.py before step 0) ----------------------------------------------

    def train(self) -> None:
        warmup.run_warmup(self)  # state-neutral: also when resuming
        super().train()
        self.optimizers.resolve_pending()  # the last steps' finiteness checks (read in batches on the GPU)

    # --- checkpoints and resume (checkpoint.py) -----------------------------------------------

    def checkpoint_state(self, step: int) -> dict:
        """Everything a checkpoint holds (incl. strategy state, camera order, RNG), loadable with weights_only=True."""
        return checkpoint.checkpoint_state(self, step)

    @check_main_thread
    def save_checkpoint(self, step: int) -> None:
        self.optimizers.resolve_pending()  # never write a checkpoint over non-finite parameters unnoticed
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        ckpt_path: Path = self.checkpoint_dir / f"step-{step:09d}.ckpt"
        # The temporary file lives beside the checkpoint directory, not in it: nerfstudio's loaders
        # (ns-eval, ns-viewer) parse every file name there. Same filesystem, so the rename is atomic.
        tmp_path = self.checkpoint_dir.parent / f".{ckpt_path.name}.tmp"
        torch.save(self.checkpoint_state(step), tmp_path)
        tmp_path.replace(ckpt_path)  # never leave a half-written checkpoint behind
        if self.config.save_only_latest_checkpoint:
            for f in self.checkpoint_dir.glob("*.ckpt"):
                if f != ckpt_path:
                    f.unlink()

    def _load_checkpoint(self) -> None:
        """Resume (--load-dir / --load-checkpoint) with the Gaussian count, optimizer and strategy
        state, camera order and RNG of the checkpoint; --max-num-iterations counts from step 0."""
        path = checkpoint.resolve_checkpoint_path(
            self.config.load_dir, self.config.load_step, self.config.load_checkpoint
        )
        if path is None:
            CONSOLE.print("No checkpoint to load, so training from scratch.")
            return
        step = checkpoint.resume(self, path)
        if step + 1 >= self.config.max_num_iterations:
            raise checkpoint.CheckpointError(
                path,
                f"it is at step {step}, which already completes --max-num-iterations {self.config.max_num_iterations}",
                "pass a larger --max-num-iterations to train further",
            )
        # This run's config.yml must not keep --load-step: ns-eval / ns-viewer look for that step
        # in this run's own checkpoint directory.
        dataclasses.replace(self.config, load_step=None).save_config()
        self._start_step = step + 1
        self.config.max_num_iterations -= self._start_step  # nerfstudio's loop runs that many more steps
        CONSOLE.print(
            f"Resumed from {path}: step {step}, {self.pipeline.model.num_points} Gaussians; "
            f"{self.config.max_num_iterations} steps to go"
        )
