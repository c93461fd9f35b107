"""The model options a run trained with: recorded in its checkpoints (:func:`options_record`), compared on resume
(:func:`resume_warning`).

A resume takes its options from its own command line, not from the checkpoint. One that leaves out an option of
the original run (the quickstart's ``--pipeline.model.num-downscales 0``, say) trained the rest of the run on
another schedule without a word: at a quarter of the resolution, with no more densification. Options that change
the Gaussians' shapes are refused by the checkpoint's state checks (``resume.py``); the others are named in one
warning, since changing one on purpose (a longer refinement, another loss weight) is a fair thing to do.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

RECORD_KEY = "model_options"
"""The record's key in the checkpoint's run info (``checkpoint.RUN_INFO_KEY``)."""
OPTION_PREFIX = "--pipeline.model."

_PLAIN = (bool, int, float, str, type(None))


def _stored(value: Any) -> Any:
    """``value`` as plain data a weights_only checkpoint holds (tuples as lists), or None where it is not plain
    (a nested config: its own options are not compared)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value):
        return list(value)
    return None


def options_record(model_config: Any) -> Dict[str, Any]:
    """{field name: value} of the model config's plain options (numbers, strings, flags and lists of them)."""
    record = {}
    for field in dataclasses.fields(model_config):
        value = getattr(model_config, field.name)
        if _stored(value) is not None or value is None:
            record[field.name] = _stored(value)
    return record


def changed_options(saved: Optional[Mapping[str, Any]], model_config: Any) -> List[str]:
    """``--pipeline.model.<option> <saved> -> <now>`` for each recorded option whose value differs now; none for a
    checkpoint without a record (written before it existed)."""
    if not saved:
        return []
    now = options_record(model_config)
    return [
        f"{OPTION_PREFIX}{name.replace('_', '-')} {_typed(saved[name])} -> {_typed(now[name])}"
        for name in sorted(saved)
        if name in now and saved[name] != now[name]
    ]


def _typed(value: Any) -> str:
    """A value as it is typed on the command line."""
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def resume_warning(changes: List[str], path: Optional[Path]) -> Optional[str]:
    """One warning naming the options of this resume that differ from those of the run that wrote ``path``."""
    if not changes:
        return None
    return (
        f"Resuming {path} with other model options than the run that wrote it: {'; '.join(changes)}. The rest of the "
        "run trains with the new values; to continue the run as it was, resume with the original run's options (its "
        "config.yml)."
    )
