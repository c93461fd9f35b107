"""--vis comet / wandb (ns_splat_plus.training.trackers): an error raised while nerfstudio starts a tracker is one
message; any other error passes unchanged. Through the CLI: tests/faults/test_odd_settings.py."""

from __future__ import annotations

import pytest

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.training import trackers


def _writer_class(name: str, error: BaseException):
    """A class ``name`` whose ``__init__`` raises ``error`` and lies in a file named as nerfstudio's writer module."""
    source = f"class {name}:\n    def __init__(self):\n        raise ERROR\n"
    scope = {"ERROR": error}
    exec(compile(source, "/site-packages/nerfstudio/utils/writer.py", "exec"), scope)
    return scope[name]


def test_a_tracker_that_cannot_start_is_named_with_its_error():
    wandb_writer = _writer_class("WandbWriter", RuntimeError("Run initialization has timed out after 90.0 sec.\nmore"))
    with pytest.raises(UserInputError) as err, trackers.tracker_errors_named("wandb"):
        wandb_writer()
    message = str(err.value)
    assert "--vis wandb: Weights & Biases could not start (RuntimeError: Run initialization has timed out" in message
    assert "WANDB_MODE=offline" in message and "more" not in message and err.value.exit_status == 2


def test_other_errors_pass_unchanged():
    with pytest.raises(KeyError), trackers.tracker_errors_named("wandb"):
        raise KeyError("not a tracker's")
    tensorboard = _writer_class("TensorboardWriter", OSError("disk full"))  # not a tracker that needs an account
    with pytest.raises(OSError, match="disk full"), trackers.tracker_errors_named("tensorboard"):
        tensorboard()
