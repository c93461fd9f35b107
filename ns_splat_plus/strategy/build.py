"""Building a strategy from the model's options, and wiring its records into a run.

Entry points: :class:`StrategyOptions` (every option a strategy takes, read once from the model
config by :meth:`StrategyOptions.from_model_config`), :func:`build_strategy` (options -> an
instrumented gsplat strategy) and :func:`attach_to_trainer` (densification.jsonl in the run
directory, the viewer panel's callbacks, the ``start`` record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Set, Tuple, Union

from gsplat.strategy import MCMCStrategy

from ns_splat_plus import upstream
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.schedule import scaled_steps
from ns_splat_plus.strategy.default import InstrumentedDefaultStrategy
from ns_splat_plus.strategy.efficient import EFFICIENT_PREFIX, InstrumentedEfficientStrategy
from ns_splat_plus.strategy.mcmc import InstrumentedMCMCStrategy
from ns_splat_plus.strategy.options import option_fields, option_values
from ns_splat_plus.strategy.records import DensificationLog
from ns_splat_plus.upstream import TrainerLike

GSPLAT_SETTINGS = (
    "grow_grad2d",
    "grow_scale3d",
    "prune_opa",
    "refine_start_iter",
    "refine_stop_iter",
    "refine_every",
    "reset_every",
    "absgrad",
    "cap_max",
    "noise_lr",
    "min_opacity",
)
"""The gsplat strategy fields the ``start`` record's settings hold (those a strategy has), before the options
its own class declares (:func:`~ns_splat_plus.strategy.options.option_fields`: the efficient strategy's)."""

InstrumentedStrategy = Union[InstrumentedDefaultStrategy, InstrumentedMCMCStrategy, InstrumentedEfficientStrategy]

MCMC_RECIPE = {"cull_alpha_thresh": 0.005, "stop_split_at": 25000}
"""nerfstudio's splatfacto-mcmc recipe (``splat-plus-mcmc``): relocate at opacity <= 0.005, refine until 25000."""
MCMC_OPTIONS = ("max_gs_num", "noise_lr", "mcmc_opacity_reg", "mcmc_scale_reg")
"""The model-config fields only ``--pipeline.model.strategy mcmc`` reads (its cap, noise and the loss's regularisers)."""
STRATEGY_PRESETS = {"efficient": "splat-plus-lite", "mcmc": "splat-plus-mcmc"}
"""The method that densifies with each strategy that has options of its own."""


def owning_strategy(name: str) -> Optional[str]:
    """The strategy whose option model-config field ``name`` is (``efficient`` or ``mcmc``); None: any strategy's."""
    if name.startswith(EFFICIENT_PREFIX):
        return "efficient"
    return "mcmc" if name in MCMC_OPTIONS else None


SPLATFACTO_VALUES = {"cull_alpha_thresh": 0.1, "stop_split_at": 15000}
"""The same options in splatfacto's recipe (``splat-plus``): 0.1 is the initial opacity, 20x the MCMC recipe's."""


def apply_mcmc_recipe(model_config, given: Iterable[str]) -> List[str]:
    """``--pipeline.model.strategy mcmc`` on a method with splatfacto's recipe (``splat-plus``,
    ``splat-plus-fast``): set the MCMC recipe's values of the options still at splatfacto's, unless
    the user set them (``given``: field names set on the command line or by ``--load-config``).
    Returns one line per change. Call before the schedule is scaled (``stop_split_at`` is a step count)."""
    if getattr(model_config, "strategy", "default") != "mcmc":
        return []
    changes = []
    for name, value in MCMC_RECIPE.items():
        if name in given or getattr(model_config, name, None) != SPLATFACTO_VALUES[name]:
            continue
        setattr(model_config, name, value)
        changes.append(f"--pipeline.model.{name.replace('_', '-')} {SPLATFACTO_VALUES[name]} -> {value}")
    return changes


def options_given(argv: Sequence[str], prefix: str, names: Iterable[str]) -> Set[str]:
    """The field ``names`` that ``argv`` sets as ``--<prefix>.<name>`` (with - or _, ``=value`` or not)."""
    given = set()
    for name in names:
        spellings = {f"--{prefix}.{name}", f"--{prefix}.{name.replace('_', '-')}"}
        if any(arg.split("=", 1)[0] in spellings for arg in argv):
            given.add(name)
    return given


@dataclass(frozen=True)
class StrategyOptions:
    """Everything :func:`build_strategy` needs, in gsplat's names. Built from the model config by
    :meth:`from_model_config` (the one place that maps splatfacto's option names to gsplat's)."""

    strategy: Literal["default", "mcmc", "efficient"]
    refine_start_iter: int
    refine_stop_iter: int
    refine_every: int
    # DefaultStrategy (splatfacto's recipe)
    prune_opa: float
    grow_grad2d: float
    grow_scale3d: float
    grow_scale2d: float
    prune_scale3d: float
    prune_scale2d: float
    refine_scale2d_stop_iter: int
    reset_every: int
    pause_refine_after_reset: int
    absgrad: bool
    # MCMCStrategy
    cap_max: int
    noise_lr: float
    min_opacity: float
    # instrumentation (densification.jsonl, gradient checks)
    instrumentation: bool
    grad_summary_every: int
    zero_grad_patience: int
    warn_no_densify_after: int
    stats_every_after_refine: int
    rng_seed: int
    callbacks: Tuple[str, ...] = ()
    empty_cache_after_refine: bool = True
    # InstrumentedEfficientStrategy's options (multi-view scores, budget), in its names; it also uses the
    # DefaultStrategy options. Defined once, as that class's fields (strategy/options.py)
    efficient: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_model_config(cls, config, num_train_data: int, world_size: int, rng_seed: int) -> "StrategyOptions":
        """``config``: a SplatPlusModelConfig (splatfacto's option names plus splat-plus's); ``rng_seed``:
        the run's seed as the model resolved it (the seed of its initial Gaussians), which every
        random draw of a refine derives from."""
        return cls(
            strategy=config.strategy,
            refine_start_iter=config.warmup_length,
            refine_stop_iter=config.stop_split_at,
            refine_every=config.refine_every,
            prune_opa=config.cull_alpha_thresh,
            grow_grad2d=config.densify_grad_thresh,
            grow_scale3d=config.densify_size_thresh,
            grow_scale2d=config.split_screen_size,
            prune_scale3d=config.cull_scale_thresh,
            prune_scale2d=config.cull_screen_size,
            refine_scale2d_stop_iter=config.stop_screen_size_at,
            reset_every=config.reset_alpha_every * config.refine_every,
            # one epoch of images after a reset; on W ranks an epoch takes num_train_data / W steps
            pause_refine_after_reset=scaled_steps(num_train_data, world_size) + config.refine_every,
            absgrad=config.use_absgrad,
            cap_max=config.max_gs_num,
            noise_lr=config.noise_lr,
            min_opacity=config.cull_alpha_thresh,  # nerfstudio: MCMC relocates at --pipeline.model.cull-alpha-thresh
            instrumentation=config.instrumentation,
            grad_summary_every=max(1, config.grad_summary_every),
            zero_grad_patience=config.zero_grad_patience,
            warn_no_densify_after=config.warn_no_densify_after,
            stats_every_after_refine=config.grad_stats_every_after_refine,
            rng_seed=int(rng_seed),
            callbacks=tuple(config.densify_callbacks),
            empty_cache_after_refine=config.empty_cache_after_refine,
            efficient=option_values(config, EFFICIENT_PREFIX, InstrumentedEfficientStrategy),
        )


def build_strategy(options: StrategyOptions) -> InstrumentedStrategy:
    """The instrumented strategy ``options.strategy`` names (default, mcmc or efficient)."""
    if options.refine_every <= 0:
        from ns_splat_plus.errors import UserInputError

        raise UserInputError(
            f"--pipeline.model.refine-every must be a positive number of steps, got {options.refine_every}"
        )
    common: Dict[str, Any] = dict(  # the fields every strategy class has
        instrumentation=options.instrumentation,
        grad_summary_every=options.grad_summary_every,
        zero_grad_patience=options.zero_grad_patience,
        warn_no_densify_after=options.warn_no_densify_after,
        stats_every_after_refine=options.stats_every_after_refine,
        rng_seed=options.rng_seed,
        empty_cache_after_refine=options.empty_cache_after_refine,
        log=DensificationLog(callback_paths=list(options.callbacks)),
        refine_start_iter=options.refine_start_iter,
        refine_stop_iter=options.refine_stop_iter,
        refine_every=options.refine_every,
        verbose=False,
    )
    if options.strategy == "mcmc":
        return InstrumentedMCMCStrategy(
            cap_max=options.cap_max, noise_lr=options.noise_lr, min_opacity=options.min_opacity, **common
        )
    if options.strategy not in ("default", "efficient"):
        raise ValueError(f"unknown densification strategy {options.strategy!r}: use 'default', 'mcmc' or 'efficient'")
    efficient: Dict[str, Any] = dict(options.efficient) if options.strategy == "efficient" else {}
    cls = InstrumentedEfficientStrategy if options.strategy == "efficient" else InstrumentedDefaultStrategy
    return cls(
        prune_opa=options.prune_opa,
        grow_grad2d=options.grow_grad2d,
        grow_scale3d=options.grow_scale3d,
        grow_scale2d=options.grow_scale2d,
        prune_scale3d=options.prune_scale3d,
        prune_scale2d=options.prune_scale2d,
        refine_scale2d_stop_iter=options.refine_scale2d_stop_iter,
        reset_every=options.reset_every,
        pause_refine_after_reset=options.pause_refine_after_reset,
        absgrad=options.absgrad,
        revised_opacity=False,
        **efficient,
        **common,
    )


def strategy_name(strategy) -> str:
    """``default``, ``mcmc`` or ``efficient``: the ``--pipeline.model.strategy`` that built ``strategy``."""
    if isinstance(strategy, MCMCStrategy):
        return "mcmc"
    return "efficient" if isinstance(strategy, InstrumentedEfficientStrategy) else "default"


def start_settings(strategy) -> Dict[str, Any]:
    """The ``settings`` of the ``start`` record: the gsplat fields of :data:`GSPLAT_SETTINGS` that
    ``strategy`` has, and every option its class declares (the efficient strategy's), in their names."""
    names = GSPLAT_SETTINGS + tuple(f.name for f in option_fields(type(strategy)))
    return {name: getattr(strategy, name) for name in names if hasattr(strategy, name)}


def attach_to_trainer(trainer: TrainerLike) -> None:
    """Point the model's densification log at the run directory and the viewer panel, and write
    the ``start`` record (settings of the strategy). Called from ``SplatPlusTrainer.setup``."""
    model = trainer.pipeline.model
    strategy: Any = getattr(model, "strategy", None)  # one with a DensificationLog (checked below)
    log = getattr(strategy, "log", None)
    if not isinstance(log, DensificationLog):
        return
    log.set_run_dir(trainer.base_dir)
    log.load_configured_callbacks()  # a wrong 'pkg.module:function' fails here, before step 0
    log.take_registered_callbacks()  # register_callback's: this run's, not a later run's in this process
    panel = getattr(trainer, "health_panel", None)
    if panel is not None:
        if hasattr(panel, "on_refine"):
            log.add_callback(panel.on_refine, events=["refine"])
        if hasattr(panel, "on_gradient_summary"):
            log.add_callback(panel.on_gradient_summary, events=["gradient_summary"])
    if strategy.instrumentation:
        log.emit(
            {
                "step": upstream.start_step(trainer),
                "event": "start",
                "strategy": strategy_name(strategy),
                "num_gaussians": int(model.num_points),
                "world_size": collectives.get_world_size(),
                "settings": start_settings(strategy),
                "zero_grad_patience": strategy.zero_grad_patience,
                "grad_summary_every": strategy.grad_summary_every,
                "stats_every_after_refine": strategy.stats_every_after_refine,
            }
        )
