"""SplatPlusPipeline: nerfstudio's VanillaPipeline without the DDP wrapper.

nerfstudio wraps the model in DistributedDataParallel when world_size > 1, but gsplat's strategies
replace the nn.Parameter objects whenever they densify, after which DDP silently stops averaging
(and with SfM points it refuses to start: strided features_dc). Gradients are averaged by
:mod:`ns_splat_plus.parallel.gradients` instead.

Evaluation on W ranks: the all-images evaluation is split (each rank scores its share of the eval
images and every rank gets the whole result, :mod:`ns_splat_plus.evaluation`); the single-image and
eval-loss evaluations run on rank 0 alone (the only rank that writes: ``SplatPlusTrainer.eval_iteration``). Each rank's start-up record: :mod:`.rank_record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Literal, Optional, Type

import torch
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig
from nerfstudio.utils.rich_utils import CONSOLE
from rich.markup import escape

from ns_splat_plus import evaluation, upstream
from ns_splat_plus.errors import UserInputError, exit_on_user_error
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.schedule import cameras_per_step_of
from ns_splat_plus.training import dataset_record, resume
from ns_splat_plus.training.rank_record import StartupRecorder


@dataclass
class SplatPlusPipelineConfig(VanillaPipelineConfig):
    _target: Type = field(default_factory=lambda: SplatPlusPipeline)


class SplatPlusPipeline(VanillaPipeline):
    config: SplatPlusPipelineConfig

    def __init__(
        self,
        config: SplatPlusPipelineConfig,
        device: str,
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        grad_scaler: Optional[torch.cuda.amp.GradScaler] = None,
    ):
        # world_size=1 keeps VanillaPipeline from wrapping the model in DDP
        super().__init__(
            config, device, test_mode=test_mode, world_size=1, local_rank=local_rank, grad_scaler=grad_scaler
        )
        self.world_size = world_size
        self.startup = StartupRecorder(self.datamanager)
        self.startup.mark("model_built")
        self.loaded_step: Optional[int] = None  # the checkpoint's step, once load_pipeline ran (ns-eval, ns-viewer)
        self.dataset_changes = dataset_record.DatasetChanges()  # since the loaded checkpoint's run (load_pipeline)
        # nerfstudio's viewer sets this control up with itself; the viewer layer's handler then shows a finished
        # run (ns-viewer) at its last step, from a training camera, without training controls (viewer/finished_run.py)
        self.viewer_hook = upstream.ViewerHook()
        if hasattr(self.model, "set_cameras_per_step"):  # the model's strategy counts epochs in steps
            self.model.set_cameras_per_step(cameras_per_step_of(config.datamanager, world_size))

    # --- evaluation (evaluation/): no autograd, eval images streamed, held-out split only -------

    def get_training_callbacks(self, training_callback_attributes):
        callbacks = super().get_training_callbacks(training_callback_attributes)
        # training and evaluation peaks are measured in separate windows of torch's peak counter
        tracker = evaluation.memory_tracker(self.device)
        callbacks.append(
            TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], tracker.start_training_window)
        )
        callbacks.extend(
            self.startup.callbacks(training_callback_attributes.trainer)
        )  # <run>/ranks/startup_rank<r>.json
        return callbacks

    def get_eval_loss_dict(self, step: int):
        outputs, _, _, metrics, _, losses = evaluation.evaluate_one_image(self, with_loss=True)
        evaluation.memory_tracker(self.device).log(step)
        return outputs, losses, metrics

    def get_eval_image_metrics_and_images(self, step: int):
        _, _, _, metrics, images, _ = evaluation.evaluate_one_image(self)
        evaluation.memory_tracker(self.device).log(step)
        return metrics, images

    def get_average_eval_image_metrics(
        self, step: Optional[int] = None, output_path: Optional[Path] = None, get_std: bool = False
    ):
        """In training (``step`` given): numbers for the writer (LPIPS left out when unavailable).
        From ns-eval (no ``step``): nerfstudio's keys plus per-image metrics, the split, the Gaussian
        count and peak memory (the training peak as the checkpoint recorded it)."""
        report = evaluation.evaluate_all_images(self, output_path=output_path)  # on W ranks: split, then gathered
        self.startup.evaluated(report.scored_here)
        if step is not None:
            if not getattr(self, "_split_announced", False) and collectives.is_main_process():
                CONSOLE.log(f"Evaluation (all images) on {evaluation.split_summary(report.split)}")
                self._split_announced = True
            evaluation.memory_tracker(self.device).log(step)
            return evaluation.scalar_metrics(report.averages(get_std=get_std))
        if report.split["num_images"] == 0:
            # without this, ns-eval writes results without psnr/ssim and exits 0: a silent failure
            with exit_on_user_error():
                raise UserInputError(
                    f"no images to evaluate: {evaluation.split_summary(report.split)} of "
                    f"{report.split['dataparser']} leaves the {report.split['split']} split empty",
                    "train with a split that holds photos out (e.g. `colmap --eval-mode interval --eval-interval 8`, "
                    "or --train-split-fraction below 1), then run ns-eval on that run",
                )
        trained_now_eval = self.dataset_changes.trained_now_eval  # set in __init__, compared in load_pipeline
        if trained_now_eval:  # photos the run trained on, held out now (the dataset changed): not a held-out score
            report.split["held_out"] = False
            report.split["eval_images_trained_on"] = trained_now_eval
        run_info = getattr(self, "run_info", {})
        report.memory = evaluation.memory_tracker(self.device).as_dict(
            train_peak_bytes=run_info.get("train_peak_memory_bytes")
        )
        report.memory["train_peak_from"] = "checkpoint" if run_info.get("train_peak_memory_bytes") else None
        report.memory["metrics_limit_bytes"] = getattr(self.model, "eval_memory_limit_bytes", None)
        report.memory["eval_peak_during_training_bytes"] = run_info.get("eval_peak_memory_bytes_during_training")
        CONSOLE.print(f"Evaluated {evaluation.split_summary(report.split)}")
        results = report.ns_eval_results()
        if collectives.is_main_process():  # the result on the console, not only in the JSON
            summary = evaluation.metrics_summary(results, results["num_images"], bool(report.split.get("held_out")))
            CONSOLE.print(summary, soft_wrap=True, markup=False)
            train_peak = report.memory.get("train_peak_mib")
            places = evaluation.places_summary(results["metrics_computed_on"], results["num_images"], train_peak)
            if places is not None:
                CONSOLE.print(places, soft_wrap=True, markup=False)
            last, step = run_info.get("max_num_iterations"), getattr(self, "loaded_step", None)
            if last is not None and step is not None and step < last - 1:  # a run stopped early (Ctrl-C, SIGTERM)
                CONSOLE.print(
                    f"[yellow]The checkpoint is of step {step} of a run of {last} steps: it stopped early (resume "
                    "it with --load-dir to train the rest).[/yellow]",
                    soft_wrap=True,
                )
        return results

    def load_pipeline(self, loaded_state: Dict[str, Any], step: int) -> None:
        """nerfstudio's, after checking the Gaussians fit this model (one clear error otherwise), with a warning
        where the photos changed since the run trained (ns-eval, ns-viewer, ns-export: ``dataset_record``).

        LPIPS weights are never taken from a checkpoint: they are fixed (pretrained), and a run
        trained offline (no LPIPS) must load where LPIPS is available, and the reverse. (Checkpoints
        written before LPIPS was built lazily hold them; they are dropped here.)
        """
        state = dict(loaded_state)
        self.run_info = resume.pop_run_info(state)
        resume.check_pipeline_state(state, self.model, path=None)
        # photos added, removed or re-split since the run trained (none where the checkpoint has no record)
        self.dataset_changes = dataset_record.changes_since(self.run_info, self.datamanager)
        warning = dataset_record.evaluation_warning(self.dataset_changes)
        if warning is not None and collectives.is_main_process():
            CONSOLE.print(f"[yellow]{escape(warning)}[/yellow]", soft_wrap=True)
        own = self.state_dict()
        state = {k: v for k, v in state.items() if not k.startswith("_model.lpips.")}
        state.update({k: v for k, v in own.items() if k.startswith("_model.lpips.")})
        super().load_pipeline(state, step)
        self.loaded_step = step
