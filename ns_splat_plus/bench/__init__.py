"""Benchmark tooling for nerfstudio methods; not part of the training path (nothing there imports it).

Modules, one concern each:

* :mod:`~ns_splat_plus.bench.probe`    the trainer probe, ``python -m ns_splat_plus.bench.probe train|eval ...``
* :mod:`~ns_splat_plus.bench.options`  what the probe measures (env variables / options), no heavy imports
* :mod:`~ns_splat_plus.bench.recorder` per-iteration times, memory peaks, Gaussian counts (inside the probe)
* :mod:`~ns_splat_plus.bench.gpu_busy` GPU busy time per step from torch.profiler (inside the probe)
* :mod:`~ns_splat_plus.bench.sections` per-section host timers of one step (inside the probe; scripts/profile_step.py)
* :mod:`~ns_splat_plus.bench.settings` benchmark settings and constants
* :mod:`~ns_splat_plus.bench.children` child processes, their environment and logs
* :mod:`~ns_splat_plus.bench.runner`   the benchmark: plan, run, collect (``run_benchmark``)
* :mod:`~ns_splat_plus.bench.results`  reading what a run left behind (probes, ns-eval JSON, densification.jsonl)
* :mod:`~ns_splat_plus.bench.per_image` each held-out image's metrics: recorded in the eval probe, tabled in the report
* :mod:`~ns_splat_plus.bench.stats`    statistics over repeated runs (mean, sd, difference of means, its SE)
* :mod:`~ns_splat_plus.bench.report`   Markdown tables, the README section, writing the outputs
* :mod:`~ns_splat_plus.bench.plots`    matplotlib figures (imported lazily)
* :mod:`~ns_splat_plus.bench.gate`     the quality gate (``scripts/quality_gate.py``)
* :mod:`~ns_splat_plus.bench.cli`      the benchmark's command line (``scripts/benchmark.py``)
* :mod:`~ns_splat_plus.bench.runtime`  the only place bench/ imports splat-plus runtime names from
"""
