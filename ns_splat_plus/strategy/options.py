"""Options defined once: a default, a help text and a valid range beside each strategy field.

Entry points: :func:`option` (a dataclass field that carries its help and its :class:`Range`),
:func:`option_fields` (the fields of a class defined that way), :func:`range_of` and
:func:`check_option` (one message naming the option and its valid range, or None).

A strategy's dataclass declares its options with :func:`option`; everything else is derived from
that one definition: the model config's ``--pipeline.model.*`` fields
(:mod:`ns_splat_plus.model.options`), :class:`~ns_splat_plus.strategy.StrategyOptions`, the settings
of the ``start`` record, the checks at launch, and the tests of the docs' option tables.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

HELP = "ns_splat_plus.help"
RANGE = "ns_splat_plus.range"
"""Keys of a field's ``metadata``."""


@dataclass(frozen=True)
class Range:
    """The values an option accepts: a finite number (an integer with ``integer``) from ``low`` to ``high``,
    each bound included unless ``low_open`` / ``high_open``; None: no bound on that side."""

    low: Optional[float] = None
    high: Optional[float] = None
    integer: bool = False
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not (isinstance(value, int) or float(value).is_integer()):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def describe(self) -> str:
        """The range in words, as the docs' tables and the messages give it: ``an integer >= 1``,
        ``a number in [0, 1)``, ``a number >= 0``."""
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            return (
                f"{kind} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
            )
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{kind} {'<' if self.high_open else '<='} {self.high:g}"
        return f"a finite {'integer' if self.integer else 'number'}"


def option(default: Any, help: str, valid: Optional[Range] = None) -> Any:
    """A dataclass field with its ``default``, its ``help`` (the command line's help text) and the
    ``valid`` range its value must lie in (checked at launch)."""
    return dataclasses.field(default=default, metadata={HELP: help, RANGE: valid})


def option_fields(cls) -> Tuple[dataclasses.Field, ...]:
    """The fields of dataclass ``cls`` declared with :func:`option`, in declaration order."""
    return tuple(f for f in dataclasses.fields(cls) if HELP in f.metadata)


def option_values(config, prefix: str, cls) -> Dict[str, Any]:
    """``config``'s values of the options ``cls`` declares, in ``cls``'s names: the field ``num_views`` is read
    as ``config.<prefix>num_views``. A config.yml written before an option existed has the field's default
    (dataclass defaults are class attributes of the config)."""
    return {field.name: getattr(config, prefix + field.name) for field in option_fields(cls)}


def range_of(field: dataclasses.Field) -> Optional[Range]:
    """The valid range of a field declared with :func:`option` (None: any value of its type)."""
    return field.metadata.get(RANGE)


def check_option(flag: str, value: Any, valid: Optional[Range]) -> Optional[str]:
    """One message naming ``flag`` (``--pipeline.model.efficient-num-views``), the ``value`` given and
    the ``valid`` range when the value lies outside it; None when it is fine."""
    if valid is None or valid.contains(value):
        return None
    return f"{flag} must be {valid.describe()}, got {value}"
