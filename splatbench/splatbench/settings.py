"""The benchmark's settings and constants (what to run, how often, with which arguments).

Entry point: :class:`BenchmarkSettings` (built by :mod:`.cli`, read by :mod:`.runner`), :func:`run_tag`.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

SCHEMA_VERSION = 2  # 2: repeats (per-run "repeat", "timing_valid"), "summary", GPU busy time
GIB = 1024**3
MIB = 1024**2
# environment key: a digest of the ns-splat-plus sources a run trained with (a merge pools one per method)
SOURCE_DIGEST_KEY = "ns-splat-plus-source"
# No default scene: the data lives wherever the user keeps it. Every command that trains needs --scene-args.
SCENE_ARGS_MISSING = (
    "--scene-args is required: the scene's --data folder and dataparser, passed to ns-train last, e.g. "
    "--scene-args '--data path/to/fox instant-ngp-data --eval-mode interval --eval-interval 8' (fox: instant-ngp's "
    "data/nerf/fox), or a synthetic scene: python scripts/make_synthetic_scene.py /tmp/scene, then "
    "--scene-args '--data /tmp/scene colmap'"
)
DEFAULT_METHODS = ("splat-plus", "splatfacto")
# Methods that train on several GPUs. splatfacto crashes at start on 2 GPUs (the README's table of changes): its
# multi-GPU runs are recorded as unsupported unless --force-multi-gpu asks to try.
MULTI_GPU_METHODS = ("splat-plus", "splat-plus-mcmc", "splat-plus-fast", "splat-plus-lite")
REFINE_COUNT_KEYS = ("duplicated", "split", "pruned", "relocated", "added")
PROBE_MODULE = "splatbench.probe"


def log(message: str) -> None:
    """One progress line on the console (flushed: visible while a long run goes on)."""
    stamp = _dt.datetime.now().strftime("%H:%M:%S")
    print(f"[benchmark {stamp}] {message}", flush=True)


@dataclass
class BenchmarkSettings:
    methods: List[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    gpus: List[int] = field(default_factory=lambda: [1])
    steps: int = 3000
    skip_steps: int = 100
    scene_args: str = ""  # --data and dataparser arguments (required to train: SCENE_ARGS_MISSING)
    train_args: str = ""
    method_args: Dict[str, str] = field(default_factory=dict)
    # label -> "METHOD ARGS": the label runs nerfstudio's METHOD with ARGS added (e.g. B = 2 cameras per step beside B = 1)
    variants: Dict[str, str] = field(default_factory=dict)
    # label -> command template: another project's trainer (splatbench.peer), one GPU
    peers: Dict[str, str] = field(default_factory=dict)
    multi_gpu_args: str = ""
    device_type: str = "cuda"
    launcher: str = "torchrun"  # for W > 1: torchrun, or spawn (ns-train --machine.num-devices W)
    eval_every: int = 0  # in-training evaluation of all images every N steps (0: none; ns-eval after)
    run_eval: bool = True
    export_ply: bool = False  # ns-export gaussian-splat after each run: the PLY's bytes and vertex count
    timeout_s: Optional[float] = None
    force_multi_gpu: bool = False
    prebuild_gsplat: bool = True
    compile_bytecode: bool = True  # where nerfstudio has no bytecode on disk, compile it before the first run
    # before the runs, each method's training once, ended after its first step (splatbench.cache_warming);
    # None: on CUDA (Triton's and the driver's disk caches), off on the CPU (nothing of the kind to warm)
    warm_caches: Optional[bool] = None
    reference: Optional[str] = None  # method the others are compared with (default: splatfacto if listed)
    scene_name: Optional[str] = None
    lpips_standin: bool = True  # let methods that need AlexNet at construction start offline (LPIPS then null)
    repeats: int = 1  # runs per method and GPU count, interleaved A1 B1 A2 B2 ...
    first_repeat: int = 1  # the repeats are numbered first_repeat.. (a later command adds repeats: --merge)
    # repeats 2..N of the 1-GPU runs train at the same time on one GPU (quality only; timing discarded)
    concurrent_quality: bool = False
    # repeat k trains with --machine.seed k and --pipeline.datamanager.train-cameras-sampling-seed k:
    # the repeats sample the seeds' spread (the initial Gaussians and the camera order), not only the GPU's
    seed_per_repeat: bool = False
    gpu_busy_steps: int = 0  # > 0: GPU busy time per step, torch.profiler over this many steps
    gpu_busy_start: Optional[int] = None  # first profiled step (default: centred on the timed steps)
    gpu_busy_at: Optional[float] = None  # the window at this fraction of each run's own steps
    gpu_busy_every: int = 0  # > 0: a profiled window every N steps (scripts/gaussian_scaling.py)

    @property
    def warms_caches(self) -> bool:
        """Whether the runs start with --warm-caches's (``warm_caches``, else on CUDA only)."""
        return self.device_type == "cuda" if self.warm_caches is None else self.warm_caches

    @property
    def effective_skip(self) -> int:
        """Steps left out of the median: --skip-steps, at most half the run (tiny CPU runs)."""
        return max(0, min(self.skip_steps, self.steps // 2))

    def nerfstudio_method(self, label: str) -> str:
        """The method ``ns-train`` runs for a name in ``methods`` (a variant's METHOD, else the name)."""
        spec = self.variants.get(label)
        return shlex.split(spec)[0] if spec else label

    def variant_args(self, label: str) -> List[str]:
        """The ns-train arguments a variant adds to its method ([] for a plain method)."""
        spec = self.variants.get(label)
        return shlex.split(spec)[1:] if spec else []

    def reference_method(self) -> Optional[str]:
        if self.reference:
            return self.reference
        if "splatfacto" in self.methods:
            return "splatfacto"
        return self.methods[-1] if len(self.methods) > 1 else None

    def describe_scene(self) -> str:
        if self.scene_name:
            return self.scene_name
        data = scene_data_dir(self.scene_args)
        return Path(data).name if data else "scene"


def scene_data_dir(scene_args: str) -> Optional[str]:
    """The folder after ``--data`` in ``--scene-args`` (None without one)."""
    tokens = shlex.split(scene_args)
    if "--data" in tokens and tokens.index("--data") + 1 < len(tokens):
        return tokens[tokens.index("--data") + 1]
    return None


def run_tag(method: str, num_gpus: int, repeat: Optional[int] = None) -> str:
    """``splat-plus-1gpu``; with repeats ``splat-plus-1gpu-r2`` (repeat 2)."""
    return f"{method}-{num_gpus}gpu" + (f"-r{repeat}" if repeat is not None else "")
