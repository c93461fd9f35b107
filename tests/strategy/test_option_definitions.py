"""One source per option (issue 47, item 4): a strategy option is defined once, beside its strategy's field
(default, help, valid range), and the model config's field, StrategyOptions, the ``start`` record's settings,
the checks at launch and the docs' option tables follow from that definition.

Unit tier: configs and strategies built in-process, no training, no subprocess.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.method import splat_plus, splat_plus_lite
from ns_splat_plus.model import SplatPlusModelConfig
from ns_splat_plus.model.options import INHERITED_RANGES, check_model_options, model_option_ranges
from ns_splat_plus.strategy import InstrumentedMCMCStrategy, StrategyOptions, build_strategy
from ns_splat_plus.strategy.build import start_settings
from ns_splat_plus.strategy.efficient import EFFICIENT_PREFIX, INITIAL_COUNT, InstrumentedEfficientStrategy
from ns_splat_plus.strategy.options import HELP, Range, check_option, option_fields, range_of

ROOT = Path(__file__).resolve().parents[2]
EFFICIENT = option_fields(InstrumentedEfficientStrategy)


def _flag(name: str) -> str:
    return "--pipeline.model." + name.replace("_", "-")


def _other_value(field: dataclasses.Field):
    """A value of ``field``'s type, inside its range, that differs from its default."""
    valid = range_of(field)
    candidates = [3, 7, 1] if valid.integer else [0.37, 0.61, 2.5]
    return next(v for v in candidates if v != field.default and valid.contains(v))


# --- derivation -------------------------------------------------------------------------------------


def test_every_efficient_option_is_a_model_config_field_made_from_its_definition():
    assert len(EFFICIENT) == 12  # num_views ... late_prune_opacity; a new one joins here on its own
    model_fields = {f.name: f for f in dataclasses.fields(SplatPlusModelConfig)}
    for field in EFFICIENT:
        made = model_fields[EFFICIENT_PREFIX + field.name]
        assert made.default == field.default
        assert made.metadata[HELP] == field.metadata[HELP] and range_of(made) is range_of(field)
        assert range_of(field) is not None, f"{field.name} has no valid range"
    # the command line's help is the definition's
    help_text = _cli_help(SplatPlusModelConfig)
    for field in EFFICIENT:
        assert field.metadata[HELP][1:30] in help_text[_flag(EFFICIENT_PREFIX + field.name)]


def _cli_help(config_cls):
    """Field flag -> its help text, as tyro prints it."""
    import io
    from contextlib import redirect_stdout

    import tyro

    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        tyro.cli(config_cls, args=["--help"], prog="x")
    text = re.sub(r"[│╭╮╰╯─]", " ", out.getvalue())
    flags = {}
    for block in re.split(r"\n\s*(?=--)", text):
        words = block.split()
        if words and words[0].startswith("--"):
            flags["--pipeline.model." + words[0][2:]] = " ".join(words[1:])
    return flags


def test_model_config_values_reach_the_strategy_and_its_start_settings():
    """Every efficient option (and the other options read by name) goes from the model config through
    StrategyOptions to the built strategy and the ``start`` record, with no default of its own on the way."""
    config = SplatPlusModelConfig(strategy="efficient", grad_stats_every_after_refine=7, empty_cache_after_refine=False)
    chosen = {field.name: _other_value(field) for field in EFFICIENT}
    for name, value in chosen.items():
        setattr(config, EFFICIENT_PREFIX + name, value)
    options = StrategyOptions.from_model_config(config, num_train_data=10, world_size=1, rng_seed=3)
    assert dict(options.efficient) == chosen
    strategy = build_strategy(options)
    assert isinstance(strategy, InstrumentedEfficientStrategy)
    assert {name: getattr(strategy, name) for name in chosen} == chosen
    assert strategy.stats_every_after_refine == 7 and strategy.empty_cache_after_refine is False
    settings = start_settings(strategy)
    assert {name: settings[name] for name in chosen} == chosen
    assert settings["grow_grad2d"] == config.densify_grad_thresh and settings["refine_every"] == config.refine_every
    # the default strategy neither takes nor logs them
    default = build_strategy(StrategyOptions.from_model_config(SplatPlusModelConfig(), 10, 1, rng_seed=3))
    assert not set(chosen) & set(start_settings(default))


def test_the_defaults_are_the_definitions_on_every_method_but_where_a_preset_sets_one():
    for field in EFFICIENT:
        name = EFFICIENT_PREFIX + field.name
        assert getattr(splat_plus.config.pipeline.model, name) == field.default
        options = StrategyOptions.from_model_config(SplatPlusModelConfig(strategy="efficient"), 10, 1, rng_seed=0)
        assert options.efficient[field.name] == field.default == getattr(build_strategy(options), field.name)
    lite = splat_plus_lite.config.pipeline.model
    overridden = {f.name for f in EFFICIENT if getattr(lite, EFFICIENT_PREFIX + f.name) != f.default}
    assert overridden == {"num_views", "densify_score"}  # method.py's LITE_* presets, documented in strategies.md


def test_a_config_yml_written_before_an_option_existed_reads_its_default():
    config = SplatPlusModelConfig(strategy="efficient")
    for field in EFFICIENT:
        config.__dict__.pop(EFFICIENT_PREFIX + field.name)  # as yaml restores an older config.yml
    options = StrategyOptions.from_model_config(config, 10, 1, rng_seed=0)
    assert dict(options.efficient) == {field.name: field.default for field in EFFICIENT}


# --- the docs' option tables ------------------------------------------------------------------------


def _table_rows(text: str, header: str):
    """The rows (lists of cells) of the Markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _documented(cell: str):
    """A default as the docs write it: ``None (auto)`` is None, ``True`` is True, ``1.0`` is 1.0..."""
    word = cell.split(" (")[0].strip()
    if word in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[word]
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            pass
    return word


def test_the_strategies_page_documents_each_efficient_option_with_the_codes_default_and_range():
    rows = _table_rows((ROOT / "docs" / "strategies.md").read_text(), "| option (`--pipeline.model.*`) |")
    documented = {row[0].strip("`"): row for row in rows}
    assert set(documented) == {(EFFICIENT_PREFIX + f.name).replace("_", "-") for f in EFFICIENT}
    for field in EFFICIENT:
        _, default, valid, _ = documented[(EFFICIENT_PREFIX + field.name).replace("_", "-")]
        assert _documented(default) == field.default, f"{field.name}: docs say {default}, code {field.default}"
        assert valid == range_of(field).describe(), f"{field.name}: docs say {valid!r}"


def test_the_readme_options_table_gives_the_codes_defaults():
    rows = _table_rows((ROOT / "README.md").read_text(), "| option | default | what it does |")
    checked = 0
    for flag, default, _ in rows:
        flag = flag.strip("`")
        if flag.endswith("*"):  # a group of options (--data-parallel.*)
            continue
        value = splat_plus.config
        for part in flag[2:].split("."):
            value = getattr(value, part.replace("-", "_"))
        if default == "":
            assert not value, f"{flag}: no default in the README, {value!r} in the code"
        else:
            assert _documented(default) == value, f"{flag}: README says {default}, the code {value!r}"
        checked += 1
    assert checked >= 15


# --- the valid ranges -------------------------------------------------------------------------------


def _outside(valid: Range):
    """Values just outside ``valid`` (and the non-finite ones)."""
    values = [math.nan, math.inf, -math.inf]
    if valid.low is not None:
        values.append(valid.low if valid.low_open else valid.low - (1 if valid.integer else 0.5))
    if valid.high is not None:
        values.append(valid.high if valid.high_open else valid.high + (1 if valid.integer else 0.5))
    if valid.integer:
        values.append((valid.low or 0) + 1.5)
    return values


def _inside(valid: Range):
    """Values at (or, for an open bound, just inside) ``valid``'s bounds."""
    values = [valid.low + (0.25 if valid.low_open else 0)] if valid.low is not None else [0.0]
    if valid.high is not None:
        values.append(valid.high - (0.25 if valid.high_open else 0))
    return [int(v) if valid.integer else float(v) for v in values]


def test_every_ranged_option_refuses_each_value_outside_its_range_and_takes_its_bounds():
    ranges = model_option_ranges(SplatPlusModelConfig)
    assert {EFFICIENT_PREFIX + f.name for f in EFFICIENT} <= set(ranges)
    assert set(INHERITED_RANGES) <= set(ranges) and "grad_summary_every" in ranges and "max_gs_num" in ranges
    for name, valid in ranges.items():
        default = getattr(SplatPlusModelConfig, name)
        assert valid.contains(default), f"{name}: its default {default} is outside {valid}"
        for bad in _outside(valid):
            config = SplatPlusModelConfig(**{name: bad})
            with pytest.raises(UserInputError) as info:
                check_model_options(config)
            message = str(info.value)
            assert message == f"{_flag(name)} must be {valid.describe()}, got {bad}", message
            assert info.value.exit_status == 2 and "\n" not in message
        for good in _inside(valid):
            check_model_options(SplatPlusModelConfig(**{name: good}))


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "efficient_budget_growth",
            math.nan,
            "--pipeline.model.efficient-budget-growth must be a number >= 0, got nan",
        ),
        ("efficient_num_views", -3, "--pipeline.model.efficient-num-views must be an integer >= 1, got -3"),
        ("efficient_num_views", 0, "--pipeline.model.efficient-num-views must be an integer >= 1, got 0"),
        (
            "efficient_prune_fraction",
            -0.5,
            "--pipeline.model.efficient-prune-fraction must be a number in [0, 1], got -0.5",
        ),
        (
            "efficient_loss_thresh",
            math.nan,
            "--pipeline.model.efficient-loss-thresh must be a number in [0, 1), got nan",
        ),
        ("efficient_loss_thresh", 1.0, "--pipeline.model.efficient-loss-thresh must be a number in [0, 1), got 1.0"),
        ("efficient_max_gaussians", -1, "--pipeline.model.efficient-max-gaussians must be an integer >= 0, got -1"),
    ],
)
def test_issue_50s_cases_are_refused_with_one_line(name, value, message):
    config = splat_plus_lite.config.pipeline.model
    config = dataclasses.replace(config, **{name: value})
    with pytest.raises(UserInputError) as info:
        check_model_options(config)
    assert str(info.value) == message


def test_the_range_words():
    assert Range(low=1, integer=True).describe() == "an integer >= 1"
    assert Range(low=0, high=1, high_open=True).describe() == "a number in [0, 1)"
    assert Range(low=0, low_open=True).describe() == "a number > 0"
    assert Range(high=2).describe() == "a number <= 2" and Range().describe() == "a finite number"
    assert not Range(low=0).contains(True) and not Range(low=0).contains("1") and not Range().contains(math.nan)
    assert (
        check_option("--x", 5, None) is None
        and check_option("--x", 5, Range(high=4)) == "--x must be a number <= 4, got 5"
    )


# --- the budget's cap against the initial count ------------------------------------------------------


def test_a_cap_below_the_initial_count_is_refused_and_names_both():
    strategy = InstrumentedEfficientStrategy(max_gaussians=100)
    state = strategy.initialize_state()
    with pytest.raises(UserInputError) as info:
        strategy.check_cap(state, 500)
    message = str(info.value)
    assert "--pipeline.model.efficient-max-gaussians 100 is below the 500 Gaussians" in message
    assert "What to do: pass --pipeline.model.efficient-max-gaussians 500 or more, or 0" in message
    assert info.value.exit_status == 2
    strategy.check_cap(state, 100)  # equal: no growth, but the cap holds
    InstrumentedEfficientStrategy(max_gaussians=0).check_cap(state, 500)  # 0: (1 + budget-growth) x the count
    state[INITIAL_COUNT] = 80  # a resumed run: the count it started from, not the one it has now
    strategy.check_cap(state, 500)


def test_an_mcmc_cap_below_the_count_is_said_once_not_refused(capsys):
    """MCMC relocates and adds, never removes: a --pipeline.model.max-gs-num below the count keeps them all. Said, not
    refused, since splatfacto-mcmc trains such a scene (more SfM points than the default cap) the same way."""
    mcmc = InstrumentedMCMCStrategy(cap_max=100)
    state = mcmc.initialize_state()
    mcmc.check_cap(state, 100)  # equal: nothing is added, and the cap holds
    assert capsys.readouterr().out == ""
    mcmc.check_cap(state, 500)
    out = capsys.readouterr().out
    assert "--pipeline.model.max-gs-num 100 is below the 500 Gaussians" in out and "keeps all 500 and adds none" in out
