"""Several GPUs or processes: devices, launch, collectives, gradient averaging, replicas, schedule.

Entry points: :func:`prepare_launch` (before ranks start: devices, process group, gsplat built
once, schedule scaled), :func:`setup_process` (a rank's device), the collectives API
(:func:`get_rank`, :func:`get_world_size`, ...), :func:`average_gradients`, :class:`RankMonitor`,
:func:`camera_for_step` / :func:`cameras_for_step`, :func:`scale_schedule`. See docs/multi-gpu.md.
"""

from ns_splat_plus.parallel.collectives import (
    all_gather_object,
    all_reduce,
    any_rank,
    barrier,
    broadcast_object,
    get_rank,
    get_world_size,
    is_distributed,
    is_main_process,
)
from ns_splat_plus.parallel.config import AdamWithBetasOptimizerConfig, DataParallelConfig
from ns_splat_plus.parallel.devices import DevicePlan, DeviceResolutionError, SplatPlusMachineConfig
from ns_splat_plus.parallel.gradients import average_gradients
from ns_splat_plus.parallel.launch import ProcessContext, prepare_launch, setup_process
from ns_splat_plus.parallel.replicas import RankMonitor, ReplicaDivergenceError, check_replicas, parameter_checksum
from ns_splat_plus.parallel.schedule import lr_factor, scale_schedule, scaled_steps
from ns_splat_plus.parallel.sharding import camera_for_step, cameras_for_step

__all__ = [
    "AdamWithBetasOptimizerConfig",
    "DataParallelConfig",
    "DevicePlan",
    "DeviceResolutionError",
    "ProcessContext",
    "RankMonitor",
    "ReplicaDivergenceError",
    "SplatPlusMachineConfig",
    "all_gather_object",
    "all_reduce",
    "any_rank",
    "average_gradients",
    "barrier",
    "broadcast_object",
    "camera_for_step",
    "cameras_for_step",
    "check_replicas",
    "get_rank",
    "get_world_size",
    "is_distributed",
    "is_main_process",
    "lr_factor",
    "parameter_checksum",
    "prepare_launch",
    "scale_schedule",
    "scaled_steps",
    "setup_process",
]
