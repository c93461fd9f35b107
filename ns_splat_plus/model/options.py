"""The model config's strategy options, made from the strategies' definitions, and their checks at launch.

Entry points: :class:`StrategyModelOptions` (a base of
:class:`~ns_splat_plus.model.SplatPlusModelConfig`: one ``--pipeline.model.<prefix><name>`` field per
option a strategy declares with :func:`~ns_splat_plus.strategy.options.option`, with its default, help
and range), :func:`valid` (a model-config field with its range), :func:`model_option_ranges` and
:func:`check_model_options` (every option with a valid range, checked at launch: one message naming the
option and its range).

An option of the efficient strategy is written once, as a field of
:class:`~ns_splat_plus.strategy.efficient.InstrumentedEfficientStrategy`; this module makes the
``efficient_<name>`` field of the model config from it. splatfacto's own fields and splat-plus's
other strategy fields carry their ranges here (:data:`INHERITED_RANGES`) and in their field's
metadata (``ns_splat_plus.range``).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Dict, Iterator, Tuple

import tyro

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.raster.rasterize import MAX_SH_DEGREE
from ns_splat_plus.strategy.efficient import EFFICIENT_PREFIX, InstrumentedEfficientStrategy
from ns_splat_plus.strategy.options import HELP, RANGE, Range, check_option, option_fields

PREFIXED = {EFFICIENT_PREFIX: ("Efficient strategy", InstrumentedEfficientStrategy)}
"""Model-config prefix -> (what the help text calls the strategy, the strategy class declaring the options)."""

INHERITED_RANGES: Dict[str, Range] = {
    "warmup_length": Range(low=0, integer=True),
    "stop_split_at": Range(low=0, integer=True),
    "reset_alpha_every": Range(low=1, integer=True),
    "cull_alpha_thresh": Range(low=0, high=1),
    "cull_scale_thresh": Range(low=0, low_open=True),
    "cull_screen_size": Range(low=0),
    "split_screen_size": Range(low=0),
    "densify_grad_thresh": Range(low=0),
    "densify_size_thresh": Range(low=0),
    "stop_screen_size_at": Range(low=0, integer=True),
    "sh_degree": Range(low=0, high=MAX_SH_DEGREE, integer=True),
    "num_downscales": Range(low=0, integer=True),
    "resolution_schedule": Range(low=1, integer=True),
    "ssim_lambda": Range(low=0, high=1),
}
"""Valid ranges of splatfacto's options (nerfstudio's fields; their defaults are splatfacto's): those that feed the
strategy; the SH degree (0 to the highest gsplat renders: -1 crashed at initialization, a higher one was trained but
never rendered); the resolution schedule (0 divided by zero at the first step); the loss's SSIM weight (outside
[0, 1] one of its terms is maximized). ``refine_every`` is checked with the schedule (training/inputs.py)."""


def _prefixed_fields() -> Iterator[Tuple[str, Any, dataclasses.Field]]:
    for prefix, (what, cls) in PREFIXED.items():
        hints = typing.get_type_hints(cls)
        for field in option_fields(cls):
            text = field.metadata[HELP]
            help_text = f"{what}: {text[:1].lower()}{text[1:]}"
            kind = typing.cast(Any, Annotated)[hints[field.name], tyro.conf.arg(help=help_text)]  # a run-time type
            yield prefix + field.name, kind, dataclasses.field(default=field.default, metadata=field.metadata)


StrategyModelOptions = dataclasses.make_dataclass(
    "StrategyModelOptions", list(_prefixed_fields()), namespace={"__module__": __name__}
)
StrategyModelOptions.__doc__ = "The strategies' options as model-config fields (``efficient_num_views``...)."


def model_option_ranges(config_cls) -> Dict[str, Range]:
    """Field name -> valid range, for every field of the model config class ``config_cls`` that has one."""
    names = {field.name for field in dataclasses.fields(config_cls)}
    ranges = {name: valid for name, valid in INHERITED_RANGES.items() if name in names}
    for field in dataclasses.fields(config_cls):
        if field.metadata.get(RANGE) is not None:
            ranges[field.name] = field.metadata[RANGE]
    return ranges


def flag(name: str) -> str:
    """The command-line option of model-config field ``name``."""
    return f"--pipeline.model.{name.replace('_', '-')}"


def valid(default: Any, values: Range) -> Any:
    """A model-config field with its ``default`` and the ``values`` it accepts (checked at launch); its help
    is the docstring under it, as for every nerfstudio field."""
    return dataclasses.field(default=default, metadata={RANGE: values})


def check_model_options(config) -> None:
    """Refuse (:class:`~ns_splat_plus.errors.UserInputError`, one line) the first strategy option of ``config``
    (a SplatPlusModelConfig) outside its valid range, naming the option, the value and the range."""
    for name, values in model_option_ranges(type(config)).items():
        message = check_option(flag(name), getattr(config, name), values)
        if message is not None:
            raise UserInputError(message)
