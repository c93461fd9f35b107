"""The viewer's options (:class:`SplatPlusViewerConfig`) and what they decide for a trainer.

:meth:`SplatPlusViewerConfig.attach_to_trainer` changes nerfstudio's page (:mod:`.page`: the theme
without the remote logo, the first training camera as each new browser's first view), builds the
health panel (:mod:`.panel`), lets it drive nerfstudio's Step line and Pause / Resume buttons, and
applies the exit rule; the trainer calls it on its ``config.viewer``, so that training, a layer below
the viewer (docs/development.md, "Layers"), imports nothing of it. The exit rule,
:func:`resolve_quit_on_train_completion`: nerfstudio's ``ViewerConfig.quit_on_train_completion`` is
False, so a batch job with the viewer never ends. Here it defaults to None (auto): batch jobs exit,
terminal runs keep the viewer open.

Was ``viewer/exit_rule.py``: config.yml files that name that module load through ``legacy.py``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, TextIO, Tuple

from nerfstudio.configs.base_config import ViewerConfig

from ns_splat_plus import upstream
from ns_splat_plus.upstream import TrainerLike
from ns_splat_plus.viewer.page import adjust_viewer_page, follow_panel
from ns_splat_plus.viewer.panel import TrainingHealthPanel, describe_devices


@dataclass
class SplatPlusViewerConfig(ViewerConfig):
    """nerfstudio's viewer options; splat-plus changes the exit rule and adds the health panel."""

    quit_on_train_completion: Optional[bool] = None  # type: ignore[assignment]  # None (auto) added to the bool
    """Exit when training ends. None (auto): batch jobs exit (no TTY on stdin and stdout, SLURM_JOB_ID or CI set), runs started from a terminal keep the viewer open."""
    health_panel: bool = True
    """Show the "Training health" panel (Gaussian count, refine events, gradients, warmup, ranks)."""
    health_panel_interval_s: float = 0.5
    """Send the panel to connected browsers at most this often (seconds)."""

    def attach_to_trainer(self, trainer: TrainerLike) -> TrainingHealthPanel:
        """Change nerfstudio's page, resolve the exit rule and build the panel for a set-up trainer
        (every rank; only rank 0 has a viewer). Called by the trainer on its ``config.viewer``.

        Sets ``trainer.quit_on_train_completion`` and returns the panel (without a server on ranks > 0
        or without the viewer: it then only records values; with ``--viewer.health-panel False`` it is
        not shown, but still keeps nerfstudio's Step line current and ends the Pause / Resume buttons).
        """
        from nerfstudio.utils.rich_utils import CONSOLE

        quit_on_completion, reason = resolve_quit_on_train_completion(self.quit_on_train_completion)
        trainer.quit_on_train_completion = quit_on_completion

        viewer_state = getattr(trainer, "viewer_state", None)
        server = getattr(viewer_state, "viser_server", None)
        if server is not None and not hasattr(server, "gui"):
            server = None  # the legacy viewer's server has no GUI API
        if server is not None:
            # the theme without the remote logo, each new browser at the first training camera (page.py; a
            # browser that connected while nerfstudio built its viewer keeps its camera)
            adjust_viewer_page(viewer_state, getattr(trainer.pipeline.datamanager, "train_dataset", None))
        if server is not None and trainer.local_rank == 0:
            if quit_on_completion:
                CONSOLE.print(f"Viewer: the run exits after its last step ({reason}).")
            else:
                CONSOLE.print(
                    f"Viewer: stays open after the last step ({reason}); Ctrl+C to quit, "
                    "or --viewer.quit-on-train-completion True to exit on completion."
                )
        stats_markdown = getattr(viewer_state, "stats_markdown", None)
        panel = TrainingHealthPanel(
            server,
            devices=describe_devices(trainer.device, trainer.world_size, trainer.local_rank),
            max_steps=upstream.start_step(trainer) + trainer.config.max_num_iterations,
            interval_s=self.health_panel_interval_s,
            # Right under nerfstudio's "Step / Resolution" lines, above the Control / Render / Export tabs.
            order=None if stats_markdown is None else stats_markdown.order + 0.5,
            show=self.health_panel,
        )
        if server is not None:
            follow_panel(viewer_state, panel)  # nerfstudio's Step line and, at the end, its Pause / Resume buttons

            # the page's Pause / Resume buttons (nerfstudio's handlers run first and set training_state)
            def show_training_state(_event: Any) -> None:
                panel.update(None, state=trainer.training_state, force=True)  # the step as the training thread left it

            for button in (getattr(viewer_state, "pause_train", None), getattr(viewer_state, "resume_train", None)):
                if button is not None:
                    button.on_click(show_training_state)
        warmup_steps = getattr(trainer.config, "warmup_steps", None)
        if warmup_steps is not None:
            panel.warmup_pending = (
                "off (--warmup-steps 0)" if warmup_steps <= 0 else f"{warmup_steps} steps before step 0"
            )
        panel.update(upstream.start_step(trainer), trainer.pipeline.model.num_points, state=trainer.training_state)
        return panel


# --- the exit rule --------------------------------------------------------------------------------


def _is_tty(stream: Optional[TextIO]) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed or detached stream
        return False


def _truthy(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def resolve_quit_on_train_completion(
    configured: Optional[bool],
    environ: Optional[Mapping[str, str]] = None,
    stdin: Optional[TextIO] = None,
    stdout: Optional[TextIO] = None,
) -> Tuple[bool, str]:
    """Whether the process should exit after its last step, and why (for the log line).

    An explicit True/False wins. Otherwise (None, auto) a batch job exits: SLURM_JOB_ID set, CI set,
    or neither stdin nor stdout attached to a terminal (nohup, cron, a subprocess, a container
    without -t). A run started from a terminal keeps the viewer open until Ctrl+C.
    """
    if configured is not None:
        return bool(configured), "--viewer.quit-on-train-completion " + str(bool(configured))
    environ = os.environ if environ is None else environ
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if environ.get("SLURM_JOB_ID"):
        return True, f"SLURM job {environ['SLURM_JOB_ID']}"
    if _truthy(environ.get("CI")):
        return True, "CI is set"
    if not _is_tty(stdin) and not _is_tty(stdout):
        return True, "stdin and stdout are not terminals"
    return False, "interactive terminal"
