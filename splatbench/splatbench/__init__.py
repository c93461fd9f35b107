"""splatbench: benchmarks for nerfstudio methods (ns-splat-plus against splatfacto and others).

Its own distribution (``pip install -e ./splatbench``, which ``scripts/setup.sh`` runs); ns-splat-plus
never imports it, and ``pip install ns-splat-plus`` never ships it. The thin ``scripts/*.py`` call the
``main()`` of the modules below. Modules, one concern each (each imports only modules listed above it
or beside it, never one that imports it back):

* :mod:`~splatbench.options`  what the probe measures (env variables / options), no heavy imports
* :mod:`~splatbench.settings` benchmark settings and constants
* :mod:`~splatbench.runtime`  the only place splatbench imports ns-splat-plus runtime names from
* :mod:`~splatbench.recorder` per-iteration times, memory peaks, Gaussian counts (inside the probe)
* :mod:`~splatbench.gpu_busy` GPU busy time per step from torch.profiler (inside the probe)
* :mod:`~splatbench.sections` per-section host timers of one step (inside the probe; ``profile_step``)
* :mod:`~splatbench.probe`    the trainer probe, ``python -m splatbench.probe train|eval ...``
* :mod:`~splatbench.children` child processes, their environment and logs
* :mod:`~splatbench.results`  reading what a run left behind (probes, ns-eval JSON, densification.jsonl)
* :mod:`~splatbench.per_image` each held-out image's metrics: recorded in the eval probe, tabled in the report
* :mod:`~splatbench.stats`    statistics over repeated runs (mean, sd, difference of means, its SE)
* :mod:`~splatbench.document` results.json's content: runs, speedups, the summary over repeats
* :mod:`~splatbench.report`   Markdown tables and the README section (text)
* :mod:`~splatbench.plots`    matplotlib figures (imported lazily)
* :mod:`~splatbench.outputs`  writing results.json, results.md, readme_section.md and the plots
* :mod:`~splatbench.merge`    several commands' results of one experiment pooled (``--from-json``), one
  ns-splat-plus source per method
* :mod:`~splatbench.ply_export` ``ns-export gaussian-splat`` of a trained run, the PLY's size (``--export-ply``)
* :mod:`~splatbench.runner`   the benchmark: plan, run, collect (``run_benchmark``)
* :mod:`~splatbench.cli`      the benchmark's command line (``scripts/benchmark.py``)
* :mod:`~splatbench.gate`     the quality gate (``scripts/quality_gate.py``)
* :mod:`~splatbench.gaussian_scaling` step time, GPU busy time and memory against the Gaussian count
  (``scripts/gaussian_scaling.py``)
* :mod:`~splatbench.scaling_check` 1 GPU against W GPUs with the scaled schedule (``scripts/scaling_check.py``)
* :mod:`~splatbench.warmup_check` fresh-process consistency and instrumentation overhead (``scripts/warmup_check.py``)
* :mod:`~splatbench.eval_memory` peak memory of training and in-training evaluation (``scripts/measure_eval_memory.py``)
* :mod:`~splatbench.profile_step` where one step's time goes, per section (``scripts/profile_step.py``)
* :mod:`~splatbench.ssim_speed` the loss's SSIM: pytorch_msssim against the fused kernels (``scripts/bench_ssim.py``)
* :mod:`~splatbench.scenes`   synthetic COLMAP scenes: test fixtures and benchmark scenes
  (``scripts/make_synthetic_scene.py``)
"""
