"""Densification, shaped like ``gsplat.strategy``: instrumented Default, MCMC and Gaussian-efficient strategies.

Entry points: :func:`build_strategy` with :class:`StrategyOptions` (what the model calls),
:func:`attach_to_trainer` (records into the run directory), :func:`register_callback` (user
callbacks on densification records). Modules: ``default.py`` / ``mcmc.py`` (the strategies),
``efficient.py`` (multi-view error-guided densification under a budget) with ``multiview.py`` (its
scores), ``monitor.py`` (the per-step gradient monitor), ``stats.py`` (statistics behind decisions),
``records.py`` (records, sinks, callbacks), ``mcmc_torch.py`` (MCMC kernels in PyTorch, for the CPU),
``options.py`` (an option defined once: its default, help and valid range beside the strategy's field).
"""

from ns_splat_plus.strategy.build import (
    MCMC_RECIPE,
    InstrumentedStrategy,
    StrategyOptions,
    apply_mcmc_recipe,
    attach_to_trainer,
    build_strategy,
    options_given,
    owning_strategy,
    strategy_name,
)
from ns_splat_plus.strategy.default import InstrumentedDefaultStrategy
from ns_splat_plus.strategy.efficient import InstrumentedEfficientStrategy, gaussian_budget
from ns_splat_plus.strategy.mcmc import InstrumentedMCMCStrategy
from ns_splat_plus.strategy.monitor import GradientMonitor, seeded_rng
from ns_splat_plus.strategy.multiview import RefineViewSource, high_error_mask, multiview_scores, sample_views
from ns_splat_plus.strategy.records import (
    EVENTS,
    JSONL_NAME,
    DensificationLog,
    console_line,
    load_callback,
    recording_paused,
    register_callback,
    unregister_callback,
)
from ns_splat_plus.strategy.stats import grad2d_statistics, opacity_statistics

__all__ = [
    "EVENTS",
    "JSONL_NAME",
    "MCMC_RECIPE",
    "apply_mcmc_recipe",
    "options_given",
    "owning_strategy",
    "DensificationLog",
    "GradientMonitor",
    "InstrumentedDefaultStrategy",
    "InstrumentedEfficientStrategy",
    "RefineViewSource",
    "gaussian_budget",
    "high_error_mask",
    "multiview_scores",
    "sample_views",
    "InstrumentedMCMCStrategy",
    "InstrumentedStrategy",
    "StrategyOptions",
    "attach_to_trainer",
    "build_strategy",
    "strategy_name",
    "console_line",
    "grad2d_statistics",
    "load_callback",
    "opacity_statistics",
    "recording_paused",
    "register_callback",
    "seeded_rng",
    "unregister_callback",
]
