"""SplatPlusTrainer: nerfstudio's Trainer with the pieces splat-plus needs before and around steps.

Thin on purpose: each concern lives in its own module and is called from one place here
(launch: :mod:`ns_splat_plus.parallel`; dataset checks: :mod:`.inputs`; the loop and its step:
:mod:`.loop` / :mod:`.step`; warmup: :mod:`.warmup`; the optimizer update: :mod:`.optimizers`;
checkpoints: :mod:`.checkpoint`; densification records: :mod:`ns_splat_plus.strategy`; the viewer
panel: built by ``config.viewer``, :mod:`ns_splat_plus.viewer`, a layer above, never imported here).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Type, cast

from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils.decorators import check_eval_enabled
from nerfstudio.utils.misc import step_check
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import evaluation, strategy, upstream
from ns_splat_plus.errors import UserInputError, exit_on_user_error
from ns_splat_plus.parallel import (
    DataParallelConfig,
    RankMonitor,
    SplatPlusMachineConfig,
    collectives,
    roll_call,
)
from ns_splat_plus.parallel.launch import launch_rank, prepare_launch, setup_process
from ns_splat_plus.training import (
    checkpoint,
    console,
    dataset_checks,
    gpu_preload,
    inputs,
    outputs,
    rank_record,
    resume,
    run_dir,
    saved_config,
    short_run,
    startup,
    trackers,
    uncaught,
    viewer_address,
    warmup,
)
from ns_splat_plus.training.graphed_step import GraphedForwardBackward, graphed_step_for
from ns_splat_plus.training.heap_at_exit import freeze_heap_at_exit
from ns_splat_plus.training.images.decode import PhotoReadError
from ns_splat_plus.training.loop import train_loop
from ns_splat_plus.training.optimizers import CheckedOptimizers
from ns_splat_plus.training.step import optimize

if TYPE_CHECKING:
    from ns_splat_plus.model import SplatPlusModelConfig

_TRAINING_PROCESS = False
"""True in a training process (set_timestamp or a trainer ran): a process-level flag, not a config
field, because config.yml is loaded by ns-eval with every attribute the saved object had."""


@dataclass
class SplatPlusTrainerConfig(TrainerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusTrainer)
    machine: SplatPlusMachineConfig = field(default_factory=SplatPlusMachineConfig)
    """Machine configuration; --machine.num-devices 0 (default) uses every GPU the job was given."""
    data_parallel: DataParallelConfig = field(default_factory=DataParallelConfig)
    """Training on several GPUs / processes: schedule and learning-rate scaling, replica checks."""
    steps_scaler: float = 1.0
    """Multiply every step count of the schedule by this, as gsplat's simple_trainer does: 0.5 trains the whole schedule (refinement, resolution and SH schedules, learning-rate decay) in half the steps, where --max-num-iterations alone would cut it short. Composes with ranks and cameras per step: steps x scaler / (W x B)."""
    warmup_steps: int = 5
    """Training steps run (and undone, bitwise) before step 0 to warm kernels, allocator and caches, then one
    render, loss and backward at each later training size of the resolution schedule; 0: off."""
    fused_adam: Optional[bool] = None
    """Step every Adam parameter group (means, scales, quats, features_dc, features_rest, opacities, ...)
    with one multi-tensor update instead of one optimizer step per group: fewer kernel launches, the
    same numbers as torch's foreach Adam; each group keeps its learning rate, scheduler and state.
    None: on with CUDA. Groups with --optimizers.<group>.optimizer.max-norm step on their own."""
    cuda_graph: bool = False
    """Replay each training step's forward and backward from a CUDA graph (docs/speed-and-memory.md): far less host
    work per step, for runs whose step the host sets (splat-plus-lite: 3.2 against 5.0 ms per step on plush-dog).
    One process, one camera per step, no camera optimizer, bilateral grid, masks or mixed precision; elsewhere the
    step runs eagerly and start-up says why. On for splat-plus-lite (its PSNR over 8 runs against 8 with the eager
    step: benchmarks/2026-11-29-h200x2-cuda-graph-lite-default/), off for the others: splat-plus with it had
    0.32 +- 0.87 dB less PSNR over 5 runs against 5, where its rule asked for at most 0.1
    (benchmarks/2026-12-02-h200-splat-plus-cuda-graph-quality-at-b38290e/).
    The first replay of each recording is checked against the eager render; where they differ, or where CUDA
    refuses a recording, the run steps eagerly from there, with one line saying so."""
    print_config: bool = False
    """Print the whole configuration at start-up (it is always saved as config.yml in the run directory)."""

    def is_viewer_enabled(self) -> bool:
        # nerfstudio's Trainer.setup starts a viewer on local rank 0 of every node: one run, one viewer,
        # on global rank 0 (ns-viewer and single-process runs are rank 0)
        return super().is_viewer_enabled() and collectives.get_rank() == 0

    def is_viewer_legacy_enabled(self) -> bool:
        return super().is_viewer_legacy_enabled() and collectives.get_rank() == 0

    def set_timestamp(self) -> None:
        global _TRAINING_PROCESS
        _TRAINING_PROCESS = True  # only ns-train calls this; get_checkpoint_dir checks checkpoints elsewhere
        uncaught.install()  # a splat-plus run (method.py installs it where the command line names one)
        # ns-train's main() calls this first, before it prints/saves the config and launches: the
        # place to check versions and options, resolve devices, join torchrun/srun's process group,
        # build gsplat once and scale the schedule, before any rank starts. Every rank then uses
        # rank 0's run directory, which rank 0 creates exclusively (no run overwrites another's).
        with exit_on_user_error(launch_rank()):
            upstream.check_versions()
            inputs.check_options(self)
        # images/ + sparse/0/ at the top of --data (COLMAP's, 3DGS's layout): before config.yml is written
        layout = inputs.use_top_level_colmap_model(self)
        model = cast("SplatPlusModelConfig", self.pipeline.model)  # nerfstudio types it ModelConfig
        if getattr(model, "init_seed", 0) is None:
            model.init_seed = self.machine.seed  # the same on every rank, unlike nerfstudio's seed + rank
        loaded = run_dir.loaded_from_config_file(sys.argv)
        if loaded:  # nerfstudio replaced the parsed config with the file's: its method, whatever was asked
            with exit_on_user_error(launch_rank()):
                saved_config.check_loaded_method(self, sys.argv)
        recipe = strategy.apply_mcmc_recipe(  # before prepare_launch scales stop_split_at
            model,
            strategy.MCMC_RECIPE
            if loaded
            else strategy.options_given(sys.argv, "pipeline.model", strategy.MCMC_RECIPE),
        )
        if not loaded:  # a saved config's options are the file's, not typed
            with exit_on_user_error(launch_rank()):  # one strategy's options typed for another
                owned = [f.name for f in dataclasses.fields(model) if strategy.owning_strategy(f.name) is not None]
                inputs.check_strategy_options(model, strategy.options_given(sys.argv, "pipeline.model", owned))
        prepare_launch(self)
        with exit_on_user_error():  # cameras-per-step auto is a number now: what B > 1 does not work with
            inputs.check_cameras_per_step(self)
        if loaded:  # the saved run's timestamp: this is a new run with its options (nerfstudio's --load-config)
            self.timestamp = "{timestamp}"
        explicit = self.timestamp != "{timestamp}"
        super().set_timestamp()
        if collectives.is_main_process():
            with exit_on_user_error():
                outputs.check_writable(self.output_dir, "--output-dir")  # read-only or full: before anything is written
                self.timestamp = run_dir.claim(self, explicit)
            # Ctrl-C (or an error) before training writes anything: no empty run directory is left
            base_dir = self.get_base_dir()
            uncaught.add_cleanup(lambda: run_dir.discard_if_unused(base_dir))
            if recipe:
                CONSOLE.print(
                    f"--pipeline.model.strategy mcmc: the MCMC recipe's {', '.join(recipe)} (as splat-plus-mcmc)"
                )
            if loaded:
                CONSOLE.print(saved_config.describe_loaded_run(self, sys.argv, self.get_base_dir()))
            if layout:
                CONSOLE.print(layout, soft_wrap=True, markup=False)
        with roll_call.quiet_when_another_rank_ends("during start-up"):  # rank 0 may have stopped on a user error
            self.timestamp = collectives.broadcast_object(self.timestamp)

    def fused_adam_on(self, device: str) -> bool:
        """--fused-adam, None meaning: on with CUDA (bitwise torch's foreach Adam, its CUDA default).

        A config.yml written before the option moved here has it on the model config
        (``pipeline.model.fused_adam``, an attribute YAML restores): honoured when this one is None."""
        option = self.fused_adam
        if option is None:
            option = getattr(self.pipeline.model, "fused_adam", None)
        return device.startswith("cuda") if option is None else bool(option)

    def __setstate__(self, state: dict) -> None:
        # YAML (config.yml for ns-eval, ns-viewer, ns-export, ns-train --load-config) restores the
        # fields through this: a missing section or a wrong type stops here, naming the field.
        # deepcopy and pickle also call it, with an in-memory config: restored as it is.
        if sys._getframe(1).f_globals.get("__name__", "").startswith("yaml"):
            with exit_on_user_error():
                saved_config.check_saved_config(self, state)
        self.__dict__.update(state)

    def get_checkpoint_dir(self) -> Path:
        # Outside ns-train (ns-eval, ns-viewer, ns-export: nerfstudio's eval_setup), the run's
        # checkpoint is about to be loaded by nerfstudio's eval_load_checkpoint, which fails with a
        # traceback on a missing, stray or truncated file: pick and check it here instead.
        path = super().get_checkpoint_dir()
        if not _TRAINING_PROCESS:
            path = checkpoints_beside_the_config(self, path)
            # a CheckpointError (a SystemExit) that reached Python printed bare, without "splat-plus: ", and exited 1
            with exit_on_user_error():
                check_before_loading(self)
                self.load_step = checkpoint.checked_checkpoint_step(path, self.load_step)
            upstream.announce_gaussian_splat_export()  # only in ns-export: it names the file and count it wrote
            freeze_heap_at_exit()  # ns-eval / ns-export / ns-viewer exit sooner too
        return path

    def print_to_terminal(self) -> None:
        # about 300 lines that bury the start-up messages: only on request (config.yml has them)
        if self.print_config and collectives.is_main_process():
            super().print_to_terminal()

    def save_config(self) -> None:
        if collectives.is_main_process():
            console.save_config(self)
        if self.machine.num_devices * self.machine.num_machines == 1:  # nerfstudio's launch runs the trainer here
            uncaught.signals_stop_until_trainer(self.get_base_dir(), collectives.get_rank())


GRAD_SCALER_NOTE = (
    "Gradient scaler on (--mixed-precision / --use-grad-scaler): gradients are not checked for NaN/Inf (the scaler "
    "skips such steps and lowers its scale); parameters still are."
)
"""One start-up line: the NaN/Inf check of gradients is off under the grad scaler (docs/training-health.md)."""


def checkpoints_beside_the_config(config: SplatPlusTrainerConfig, named: Path) -> Path:
    """ns-eval, ns-viewer, ns-export: the checkpoint folder of the run whose config.yml the command was given.
    The config names its run directory (``--output-dir``/experiment/method/timestamp, relative to where ns-train
    ran): a moved run had "no checkpoint", a copied one loaded the original's, one run from another folder found
    none. The ``nerfstudio_models`` beside the config.yml is loaded, with one line where the run was moved or copied."""
    load_config = getattr(upstream.running_script(), "load_config", None)
    beside = Path(load_config).parent / named.name if load_config is not None else named
    if not beside.is_dir() or beside.resolve() == named.resolve():
        return named
    if saved_config.folder_trained_in(config, load_config) is not None:  # run from another folder: not moved
        return beside
    CONSOLE.print(
        f"splat-plus: {load_config} names its run directory {config.get_base_dir()}, not the folder it is in "
        f"(moved or copied?): loading the checkpoints beside it, in {beside}",
        markup=False,
    )
    return beside


def check_before_loading(config: SplatPlusTrainerConfig) -> None:
    """ns-eval, ns-viewer, ns-export: the command can work on this run (an export of a Gaussian model, a viewer
    port), the run's dataset exists and the command's output can be written, checked before the model is built
    and the evaluation or export runs."""
    script = upstream.running_script()
    export = upstream.ray_export_subcommand(script)
    if script is not None and export is not None:
        subcommand, reads = export
        raise UserInputError(
            f"ns-export {subcommand} needs a NeRF-type model (it {reads}), and a {config.method_name} run holds "
            "Gaussians",
            "export the Gaussians as a PLY: ns-export gaussian-splat "
            f"--load-config {shlex.quote(str(script.load_config))} --output-dir {shlex.quote(str(script.output_dir))}",
        )
    # ns-viewer's own --viewer options (not the run's); port 0 served on a port the banner did not name
    viewer_address.check_viewer_ports(script)
    viewer_address.check_viewer_host(script)
    data = saved_config.dataset_as_trained(config, getattr(script, "load_config", None))
    if data is not None and not data.exists():
        raise saved_config.dataset_missing(data)
    for option, path, suffix in upstream.script_output_paths():
        outputs.check_output_file_type(path, option, suffix)
        outputs.check_writable(path, option, is_file=option == "--output-path")


class SplatPlusTrainer(Trainer):
    config: SplatPlusTrainerConfig
    optimizers: CheckedOptimizers
    # set by other layers (the upstream.TrainerLike Protocol names them): the viewer config's
    # attach_to_trainer, and warmup once it ran (unset before)
    quit_on_train_completion: bool
    warmup_result: Optional[warmup.WarmupResult]
    graphed_step: Optional[GraphedForwardBackward] = None  # --cuda-graph, from the loop's start (train())

    def __init__(self, config: SplatPlusTrainerConfig, local_rank: int = 0, world_size: int = 1) -> None:
        # torchrun / srun: nerfstudio's launch passes (0, 1); the real rank, world size and GPU come
        # from the process group (nerfstudio never calls torch.cuda.set_device)
        global _TRAINING_PROCESS
        _TRAINING_PROCESS = True  # also in spawned ranks, which never call set_timestamp
        # the start-up record's marks before the pipeline (which keeps the record) exists; passed on in setup
        self.early_startup_marks = {"trainer_init": time.time()}
        with uncaught.interrupted_before_training(config.get_base_dir(), "while starting"):
            uncaught.signals_raise_again()  # from here a KeyboardInterrupt, caught by the block
            process = setup_process(config, local_rank, world_size)
            self.early_startup_marks["device_ready"] = time.time()
            with console.upstream_warnings_silenced(), console.quiet_unless(process.rank == 0):
                # nerfstudio's GradScaler(...) FutureWarning; its "Saving checkpoints to" once per run
                super().__init__(config, local_rank=process.local_rank, world_size=process.world_size)
        self.rank = process.rank
        self.device = process.device  # cuda:<GPU of this rank>, which is 0 when srun binds one GPU per task
        self.written_checkpoints: List[Path] = []
        self.saved_step: Optional[int] = None  # the step of the newest checkpoint this process saved
        self.gpu_preload = gpu_preload.GpuPreload(tasks=[])  # started by setup

    def setup(self, test_mode="val") -> None:
        # another rank that stops on a user error (printed by it) ends this one quietly, not in gloo's traceback
        with roll_call.quiet_when_another_rank_ends("during set-up"):
            self._setup(test_mode)

    def _setup(self, test_mode) -> None:
        evaluation.memory.start_run(self.device)  # this run's peaks, not an earlier run's in this process
        # Triton's key and cuSOLVER's loading: on a side thread while the dataset, model and photos set up
        self.gpu_preload = gpu_preload.start_gpu_preload(self.device)
        with exit_on_user_error(self.rank):
            try:
                inputs.preflight(self.config)
                viewer_address.check_viewer_host(self.config)  # where this process runs the viewer
                with (
                    console.plain_progress_when_piped(self.config.logging) as plain_progress,
                    trackers.tracker_errors_named(self.config.vis),
                ):
                    super().setup(test_mode=test_mode)  # the dataparser's errors: named by the datamanager
                for name, at in self.early_startup_marks.items():
                    rank_record.mark_startup(self, name, at)
                # decode (cache) the photos now: a damaged one stops here, not in the middle of warmup or training
                datamanager = self.pipeline.datamanager
                # what any dataparser produced: focal lengths, duplicates, missing photos, sizes (dataset_checks.py)
                dataset_checks.check_parsed_datasets(self.config, [datamanager.train_dataset, datamanager.eval_dataset])
                assert datamanager.train_dataset is not None  # a training datamanager has one
                inputs.check_cameras_per_step_fits(self.config, len(datamanager.train_dataset), self.world_size)
                datamanager.cached_train  # noqa: B018
                if datamanager.eval_dataset is not None and len(datamanager.eval_dataset) > 0:
                    datamanager.cached_eval  # noqa: B018 (loaded at the first evaluation anyway)
            except SystemExit:  # a SplatPlusError, or one the datamanager has shown already
                # a start-up error (input, a checkpoint to resume from) leaves no empty run directory; only the
                # rank that claimed it removes it: on another rank (a photo of its own share) rank 0 may still be
                # writing there (its event file)
                if collectives.is_main_process():
                    run_dir.discard_if_unused(self.base_dir, also=run_dir.SETUP_FILES)
                raise
            except KeyboardInterrupt:  # nerfstudio's launch would print a traceback and exit 0
                raise uncaught.StartupInterrupted.before_training(self.base_dir, "during set-up") from None
        self.pipeline.model.metrics_every = self.config.logging.steps_per_log  # training PSNR on log steps only
        ssim_note = self.pipeline.model.loss_ssim_note() if self.rank == 0 else None  # once per run, not per rank
        if ssim_note is not None:
            CONSOLE.log(ssim_note)
        # several ranks: initial checksums compared and logged, replica checks, final bitwise check
        self.rank_monitor = RankMonitor(self, self.config.data_parallel)
        self.rank_monitor.record_initial()
        self.callbacks.extend(self.rank_monitor.callbacks())
        # the viewer is a layer above training: its config (SplatPlusViewerConfig, set by method.py) builds
        # the panel and sets self.quit_on_train_completion
        self.health_panel = self.config.viewer.attach_to_trainer(self)  # type: ignore[attr-defined]  # see above
        if self.viewer_state is not None:
            upstream.correct_viewer_port(self.viewer_state)  # a taken port: viser moved on, the banner did not
            if plain_progress:
                console.print_viewer_address(self.viewer_state.viewer_info)
        strategy.attach_to_trainer(self)  # densification.jsonl in the run directory, panel callbacks
        instrumentation = cast("SplatPlusModelConfig", self.config.pipeline.model).instrumentation
        if instrumentation and self.grad_scaler.is_enabled() and self.rank == 0:
            CONSOLE.print(GRAD_SCALER_NOTE)
        if self.rank == 0:  # a run shorter than its schedule: no refine, or never full resolution (one line each)
            for note in short_run.notes_for_trainer(self):
                CONSOLE.print(note, soft_wrap=True, markup=False)
        # after nerfstudio's "Training Finished" box and before a viewer that stays open: the result in one line
        self.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN], self._print_summary))

    def _print_summary(self, step: int) -> None:
        if self.rank != 0:
            return
        started, start_step = getattr(self, "_loop_started", (time.perf_counter(), step))
        summary = console.training_summary(
            steps=step - start_step + 1,
            seconds=time.perf_counter() - started,
            since_start=startup.process_age_seconds(),
            gaussians=int(self.pipeline.model.num_points),
            base_dir=self.base_dir,
        )
        CONSOLE.print(summary, soft_wrap=True, markup=False)

    def _update_viewer_state(self, step: int) -> None:
        super()._update_viewer_state(step)
        # means.shape is host metadata: no device sync; the panel sends only to connected browsers
        self.health_panel.update(step, self.pipeline.model.num_points, state=self.training_state)

    def _train_complete_viewer(self) -> None:
        # nerfstudio calls this after the last step unless quit_on_train_completion is True; ours
        # defaults to None (auto, resolved in viewer/) so that batch jobs end instead of idling forever.
        self.health_panel.update(self.step, self.pipeline.model.num_points, state="completed", force=True)
        if self.viewer_state is None:  # a rank without the viewer (every rank but global rank 0)
            return
        if self.quit_on_train_completion:
            # renders still running when the interpreter exits can abort the finished process
            upstream.stop_viewer_renders(self.viewer_state)
            if hasattr(self.viewer_state.viser_server, "stop"):
                self.viewer_state.viser_server.stop()
            return
        try:
            super()._train_complete_viewer()  # serves the viewer until Ctrl-C, as the run says
        except KeyboardInterrupt:
            # the way to close it (nerfstudio printed a traceback here): training finished and was saved
            CONSOLE.print(f"Viewer closed (Ctrl-C); training had finished, checkpoints in {self.checkpoint_dir}")

    def setup_optimizers(self) -> CheckedOptimizers:
        return CheckedOptimizers(
            self.config.optimizers.copy(),
            self.pipeline.get_param_groups(),
            check_finite=cast("SplatPlusModelConfig", self.config.pipeline.model).instrumentation,
            step_source=lambda: self.step,
            fused_adam=self.config.fused_adam_on(self.device),
        )

    def train_iteration(self, step: int):
        if self.graphed_step is not None:
            return self.graphed_step(step)
        return optimize(self, step)

    @check_eval_enabled  # as nerfstudio's: the same condition on every rank (the logger config)
    def eval_iteration(self, step: int) -> None:
        """nerfstudio's evaluations on rank 0. On the other ranks only the all-images evaluation, which
        is split across the ranks and gathered (a collective every rank joins); the eval-batch and
        one-image evaluations are rank 0's alone, the only rank that writes."""
        if collectives.is_main_process():
            super().eval_iteration(step)
        elif step_check(step, self.config.steps_per_eval_all_images):
            self.pipeline.get_average_eval_image_metrics(step=step)

    def train(self) -> None:
        with (
            uncaught.interrupted_before_training(self.base_dir, "during warmup", self.rank),
            roll_call.quiet_when_another_rank_ends("during warmup"),
        ):  # no loop handler yet
            startup.report_startup(self)  # process start to here: parsing, images, model, writers
            if collectives.is_main_process():  # a disk without room for one checkpoint: before any step
                with exit_on_user_error():
                    try:
                        outputs.check_room_for_checkpoint(self.checkpoint_dir, outputs.checkpoint_bytes_estimate(self))
                    except outputs.DiskFullError:
                        run_dir.discard_if_unused(self.base_dir, also=run_dir.SETUP_FILES)  # nothing trained
                        raise
            try:
                rank_record.mark_startup(self, "preload_wait_start")
                rank_record.note_startup(self, "gpu_preload", self.gpu_preload.join())  # no GPU work beside the warmup
                rank_record.mark_startup(self, "warmup_start")
                warmup.run_warmup(self)  # state-neutral: also when resuming
                rank_record.mark_startup(self, "warmup_end")
            except PhotoReadError as err:  # streaming decodes a photo for the first time here
                with exit_on_user_error(rank=0):  # printed by the rank that could not read it
                    raise UserInputError(
                        f"{err.message}, found by warmup before the first training step (nothing to save)",
                        "restore the photo, or remove it from the dataset",
                    ) from None
        self.graphed_step = graphed_step_for(self)  # after the warmup, which steps eagerly and undoes its steps
        self._loop_started = (time.perf_counter(), upstream.start_step(self))  # the summary's wall time and steps
        train_loop(self)
        self.optimizers.resolve_pending()  # the last steps' finiteness checks (read in batches on the GPU)
        if self.graphed_step is not None and collectives.is_main_process():
            CONSOLE.print(self.graphed_step.summary())

    # --- checkpoints and resume (checkpoint.py) -----------------------------------------------

    def checkpoint_state(self, step: int) -> dict:
        """Everything a checkpoint holds (incl. strategy state, camera order, RNG), loadable with weights_only=True."""
        gathered = collectives.all_gather_object(checkpoint.portable(checkpoint.rng_states()))
        return checkpoint.checkpoint_state(self, step, rng_per_rank=[checkpoint.from_portable(g) for g in gathered])

    def save_checkpoint(self, step: int) -> None:
        """Every rank calls this at the same steps (their RNG states are gathered); rank 0 writes. The step just
        saved again (the loop's end, then nerfstudio's after_train) writes nothing: the same state."""
        if step == self.saved_step:
            return
        self.optimizers.resolve_pending()  # never write a checkpoint over non-finite parameters unnoticed
        state = self.checkpoint_state(step)
        self.saved_step = step
        if not collectives.is_main_process():
            return
        path = checkpoint.write_checkpoint(state, self.checkpoint_dir, step)
        if path not in self.written_checkpoints:
            self.written_checkpoints.append(path)
        if self.config.save_only_latest_checkpoint:
            # only this process's own earlier checkpoints: never another run's files
            for old in self.written_checkpoints[:-1]:
                old.unlink(missing_ok=True)
            self.written_checkpoints = self.written_checkpoints[-1:]

    def _load_checkpoint(self) -> None:
        """Resume (--load-dir / --load-checkpoint) with the Gaussian count, optimizer and strategy
        state, camera order and RNG of the checkpoint; --max-num-iterations counts from step 0."""
        path = checkpoint.resolve_checkpoint_path(
            self.config.load_dir, self.config.load_step, self.config.load_checkpoint
        )
        if path is None:
            # said here, not when the model is built: ns-export / ns-eval build it too, then load a checkpoint;
            # by rank 0 alone: the ranks' checksums are compared, and that line names them all (RankMonitor)
            if self.rank != 0:
                return
            model = self.pipeline.model
            CONSOLE.print(
                f"No checkpoint to load, so training from scratch. Initial Gaussians: {model.num_points}, "
                f"checksum {getattr(model, 'initial_checksum', None)}"
            )
            return
        step = resume.resume(self, path)
        if step + 1 >= self.config.max_num_iterations:
            raise resume.no_steps_left(path, step, self.config)
        # This run's config.yml must not keep --load-step: ns-eval / ns-viewer look for that step
        # in this run's own checkpoint directory.
        if collectives.is_main_process():  # (the file alone: the config's save_config is ns-train's start-up step)
            console.save_config(dataclasses.replace(self.config, load_step=None), announce=False)
        upstream.set_start_step(self, step + 1)  # the loop (loop.py) runs to --max-num-iterations, counted from step 0
        if collectives.is_main_process():  # every rank loaded the same file (RankMonitor compares them): said once
            CONSOLE.print(
                f"Resumed from {path}: step {step}, {self.pipeline.model.num_points} Gaussians; "
                f"{self.config.max_num_iterations - upstream.start_step(self)} steps to go"
            )
