"""TrainerLike: what ns_splat_plus needs from nerfstudio's ``Trainer`` (nerfstudio 1.1.5, engine/trainer.py).

A ``typing.Protocol``, for type checkers only: every function that is handed the trainer (the loop, the
step, warmup, checkpoints, the strategy and viewer hooks, replica checks) takes a ``TrainerLike``, and
``SplatPlusTrainer`` (training layer) satisfies it. It sits in ``upstream`` so that every layer can name
it. What is only read is a read-only property (so a subclass may narrow its type, as ``SplatPlusTrainer``
narrows ``config`` and ``optimizers``); what ns_splat_plus sets is a plain attribute. The private members
(``_start_step``, ``_after_train``, ...) are reached through :mod:`.nerfstudio_private` and are not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, DefaultDict, List, Literal, Optional, Protocol

if TYPE_CHECKING:
    from pathlib import Path
    from threading import Lock

    from nerfstudio.engine.callbacks import TrainingCallback
    from nerfstudio.engine.optimizers import Optimizers
    from nerfstudio.engine.trainer import TRAIN_INTERATION_OUTPUT, TrainerConfig
    from nerfstudio.pipelines.base_pipeline import VanillaPipeline
    from torch.cuda.amp.grad_scaler import GradScaler


class TrainerLike(Protocol):
    """nerfstudio's ``Trainer`` as ns_splat_plus uses it (``SplatPlusTrainer`` in a run)."""

    @property
    def config(self) -> TrainerConfig:
        """The run's config: a ``SplatPlusTrainerConfig`` in a run (training layer, above this one)."""

    @property
    def pipeline(self) -> VanillaPipeline:
        """The pipeline (``SplatPlusPipeline``); ``pipeline.model`` is the ``SplatPlusModel``."""

    @property
    def optimizers(self) -> Optimizers:
        """The optimizers (``CheckedOptimizers`` in a run)."""

    @property
    def callbacks(self) -> List[TrainingCallback]:
        """The training callbacks, called before and after each training iteration."""

    @property
    def device(self) -> str:
        """This rank's device, ``"cuda:<n>"`` or ``"cpu"`` (nerfstudio's ``TORCH_DEVICE`` is ``str``)."""

    @property
    def local_rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def base_dir(self) -> Path:
        """The run directory."""

    @property
    def checkpoint_dir(self) -> Path: ...

    @property
    def train_lock(self) -> Lock:
        """Held during a training step; the viewer takes it to render."""

    @property
    def mixed_precision(self) -> bool: ...

    @property
    def grad_scaler(self) -> GradScaler: ...

    @property
    def gradient_accumulation_steps(self) -> DefaultDict[str, int]:
        """By parameter group: a group steps every this many iterations."""

    step: int
    """The current step (the loop and the step function set it)."""
    stop_training: bool
    """Set by the viewer or a signal; the loop stops after the step."""
    training_state: Literal["training", "paused", "completed"]
    """The viewer's state (its Pause button)."""

    # ns_splat_plus's own attributes of SplatPlusTrainer (declared on it), set by the layers that own them
    quit_on_train_completion: bool
    """Set by the viewer config (``attach_to_trainer``): end the process after the last step."""
    warmup_result: Optional[Any]
    """A ``training.warmup.WarmupResult`` (a layer above) once warmup ran; unset before."""

    def train_iteration(self, step: int) -> TRAIN_INTERATION_OUTPUT: ...

    def eval_iteration(self, step: int) -> None: ...

    def save_checkpoint(self, step: int) -> None: ...
