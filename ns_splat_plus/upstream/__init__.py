"""Every private nerfstudio / gsplat / torch / Triton / torchmetrics / viser touch point of splat-plus, and
the start-up check.

splat-plus subclasses nerfstudio and gsplat where it can; where it must reach into private code,
it does so through a named function here and nowhere else, each with the versions it was written
for. :func:`check_versions` runs at start-up (the trainer config's ``set_timestamp``, the first thing
ns-train calls, and model construction, which ns-eval / ns-viewer / ns-export reach):

* a nerfstudio or gsplat version this module was not written for stops the run with one message
  naming both versions, instead of a shape error deep inside a training step (gsplat 1.5 changed
  ``info["radii"]`` to ``[C, N, 2]`` and ``isect_tiles(n_cameras=)`` to ``n_images``);
* torch and Triton outside :data:`VERSION_BOUNDS` get one warning (they change often and most of
  what is read here has a fallback), and each private API with a fallback is probed
  (:func:`probe_private_apis`): where the probe fails, the fallback runs, with one warning.

Touch points, by library and the versions they were written for: what is touched, the function
here that touches it, [the fallback, where one exists; probed at start-up where marked "probed"].
The package is split by library (``nerfstudio_private``, ``gsplat_private``, ``torch_private``,
``viser_private``, ``lpips``, ``torchmetrics_private``, ``versions``); everything is reached as ``upstream.<name>``.
:class:`TrainerLike` (:mod:`.trainer`) is the type of nerfstudio's ``Trainer`` as the layers use it (a Protocol).

nerfstudio 1.1.5 (:mod:`.nerfstudio_private`)
  ``FullImageDatamanager._load_images``            :func:`load_images` (the tests' reference decoding)
  ``full_images_datamanager._undistort_image``     :func:`undistort_image` (one image at a time)
  ``ColmapDataParser._load_3D_points``             :func:`load_colmap_points` (a ``.txt`` model's train points)
  ``comms.LOCAL_PROCESS_GROUP``                    :func:`set_local_process_group` (torchrun / srun)
  ``Trainer._start_step``                          :func:`start_step`, :func:`set_start_step` (resume)
  ``Trainer._init_viewer_state``, ``_update_viewer_state``, ``_after_train``
                                                   :func:`init_viewer_state`, :func:`update_viewer_state`,
                                                   :func:`after_train` (our loop calls them)
  ``Viewer.init_scene`` reads ``len``, ``cameras``, ``[i]["image"]`` of its dataset; ``_pick_drawn_image_idxs``
                                                   :func:`init_viewer_state` (the cameras' pictures from memory),
                                                   :func:`drawn_image_indices`
  ``Trainer._load_checkpoint``                     overridden by ``SplatPlusTrainer`` (resume)
  ``Trainer.train`` loop arithmetic                :func:`train_loop_subtracts_start_step`
  ``SplatfactoModel._get_downscale_factor``, ``_downscale_if_required``, ``_get_background_color``,
  ``_apply_bilateral_grid``                        :func:`downscale_factor`, :func:`downscale_mask`, :func:`background`,
                                                   :func:`apply_bilateral_grid`
  ``InputDataset._dataparser_outputs``             :func:`dataparser_outputs`
  ``Viewer.render_statemachines``                  :func:`stop_viewer_renders` (render threads stopped at the end)
  ``ViewerState.viewer_info``, ``LocalWriter.past_mssgs``  :func:`correct_viewer_port` (the port viser serves on)
  ``writer.GLOBAL_BUFFER``                         :func:`note_running_time` (averages without a scalar)
  ``writer.EVENT_STORAGE``                         :func:`writer_event_count`, :func:`drop_writer_events` (warmup)
  ``ExportGaussianSplat.write_ply``                :func:`announce_gaussian_splat_export`, :func:`write_ply` (ns-export
                                                   writes the PLY at once and says what it wrote; one message
                                                   when nothing is left to write)
  the ``self`` of ns-eval's, ns-viewer's, ns-export's ``main`` (``ComputePSNR``, ``RunViewer``, ``Export*``)
                                                   :func:`running_script`, :func:`script_output_paths`,
                                                   :func:`ray_export_subcommand`, :func:`gaussian_splat_crop` (their
                                                   options, checked before the checkpoint is loaded)
  ``ViewerControl._setup`` (``Viewer.__init__``)   :class:`ViewerHook`, :func:`on_viewer_built` (:mod:`.viewer_hook`;
                                                   the page of ns-viewer)
  ``eval_utils.eval_setup``, ``scripts/train.py``'s ``main`` (the frames that load ``--load-config``)
                                                   :func:`~.command_line.raised_while_loading_the_config` (an
                                                   error there is the config's; one after it is not)
  ``ExternalMethodDummyTrainerConfig.__post_init__``  :func:`list_external_methods_without_inspect_stack` (1.25 s
                                                   of import; splat-plus commands only)
  ``external_methods.external_methods`` (each one's ``configurations``)
                                                   :func:`~.command_line.other_method_names` (the names of
                                                   methods nerfstudio does not ship, without their dummy configs)
  ``writer.CometWriter.__init__``, ``WandbWriter.__init__`` (the frames that start a tracker)
                                                   :func:`experiment_tracker_that_raised` (--vis comet / wandb
                                                   that cannot start: one message)
viser 0.2.7 (:mod:`.viser_private`)
  ``_icons.svg_from_icon`` (and its names in ``_gui_api``, ``_gui_handles``)
                                                   :func:`read_icons_from_one_index` (1.27 s of the viewer's
                                                   start; splat-plus commands only)
gsplat 1.4.0 (:mod:`.gsplat_private`)
  ``cuda._backend._C``                             :func:`gsplat_extension` (the JIT-built extension)
  ``cuda._wrapper`` projection / tiles             :func:`gsplat_kernels` (strip rendering)
  ``cuda._torch_impl``                             :func:`torch_reference_ops` (the PyTorch reference),
                                                   :func:`recordable_spherical_harmonics` (its SH kernels launch
                                                   on the legacy stream, which a CUDA graph does not record)
  ``strategy.ops._update_param_with_optimizer``, ``_multinomial_sample``
                                                   :func:`update_param_with_optimizer`, :func:`multinomial_sample`
  ``DefaultStrategy._grow_gs`` / ``_prune_gs``, ``MCMCStrategy._relocate_gs`` / ``_add_new_gs``
                                                   :func:`grow_gs` ... :func:`add_new_gs` (counts of a refine)
torch 2.6-2.15: 2.11 on the GPU machine, 2.14 on the CPU one (:mod:`.torch_private`)
  ``Adam._init_group``, ``Optimizer._opt_called``  :func:`adam_init_group`, :func:`mark_stepped` (the fused
                                                   Adam) [probed: torch's own Adam, one step per group]
  ``torch._foreach_*`` (add_, lerp_, mul_, ...)    :data:`foreach` (the fused Adam's update) [probed: as above]
  ``torch._foreach_norm``                          :func:`max_abs_each` (finiteness checks) [one norm per tensor]
  ``Module._parameters`` / ``_buffers``            :func:`module_slots`, :func:`set_module_slots` (warmup snapshot)
  ``GradScaler.__dict__``                          :func:`grad_scaler_state`, :func:`load_grad_scaler_state`
  ``torch.load(weights_only=True)``                :func:`weights_only_safe` (nerfstudio #3683)
  ``distributed_c10d._get_default_store``         :func:`default_store` (the roll call after a failed collective)
  ``torch.utils.cpp_extension``'s logger           a filter dropping its "No CUDA runtime is found" line (CPU runs;
                                                   splat-plus commands only)
  ``torch._dynamo.reset``, ``utils.counters``      :func:`reset_dynamo`, :func:`dynamo_frames_compiled` (tests: renders
                                                   compile nothing)
Triton 3.2-3.9: 3.6 with torch 2.11, 3.8 with torch 2.14 (:mod:`.gsplat_private`)
  ``CompiledKernel[grid](*args)``                  :func:`launch_compiled_triton` (no ``JITFunction.run``)
                                                   [probed; a TypeError at a launch: ``JITFunction.run``]
  ``runtime.cache.triton_key``                     :func:`prepare_triton_cache_key` (computed while the trainer
                                                   sets up; another Triton: skipped)
torchmetrics 1.x, torchvision (:mod:`.torch_private`, :mod:`.lpips`, :mod:`.torchmetrics_private`)
  lightning-utilities 0.15's ``imports._version``  :func:`import_torchmetrics` (torchmetrics' import without
                                                   transformers: 9.0 s of ns-eval on the GPU machine) [where the
                                                   name is missing: torchmetrics' own import]
  ``Metric._defaults``, ``_update_count``, ``_computed``  :func:`metric_state_names` (warmup snapshot)
  LPIPS' AlexNet download                          :func:`build_lpips` (local weights, else one short download)
  ``_LPIPS.scaling_layer``, ``net.slice1-5``,      :func:`lpips_in_row_strips` (LPIPS over row strips within the
  ``lins``, ``_normalize_tensor`` (1.9)            training peak) [:func:`lpips_strip_geometry`: None, the whole
                                                   image, for any other structure]
"""

from __future__ import annotations

import os
from typing import Dict, Optional

from ns_splat_plus.errors import SplatPlusError
from ns_splat_plus.upstream import versions
from ns_splat_plus.upstream.command_line import splat_plus_command as splat_plus_command
from ns_splat_plus.upstream.gsplat_private import *  # noqa: F401,F403
from ns_splat_plus.upstream.gsplat_private import direct_triton_launch_available
from ns_splat_plus.upstream.lpips import *  # noqa: F401,F403
from ns_splat_plus.upstream.nerfstudio_private import *  # noqa: F401,F403
from ns_splat_plus.upstream.torch_private import *  # noqa: F401,F403
from ns_splat_plus.upstream.torch_private import fused_adam_available
from ns_splat_plus.upstream.torchmetrics_private import import_torchmetrics as import_torchmetrics
from ns_splat_plus.upstream.trainer import TrainerLike as TrainerLike  # the type of the trainer, for every layer
from ns_splat_plus.upstream.versions import (
    SUPPORTED_VERSIONS,
    VERSION_BOUNDS,
    installed_version,
    release,
    warn_once,
)
from ns_splat_plus.upstream.viewer_hook import ViewerHook, on_viewer_built  # noqa: F401
from ns_splat_plus.upstream.viser_private import *  # noqa: F401,F403

SKIP_VERSION_CHECK_ENV = "NS_SPLAT_PLUS_SKIP_VERSION_CHECK"


class UnsupportedVersionError(SplatPlusError):
    """nerfstudio or gsplat is a version splat-plus was not written for."""

    exit_status = 2


def check_versions(installed: Optional[Dict[str, Optional[str]]] = None) -> None:
    """Raise UnsupportedVersionError unless nerfstudio and gsplat are versions listed in
    ``SUPPORTED_VERSIONS`` (``$NS_SPLAT_PLUS_SKIP_VERSION_CHECK=1`` skips the check, at your risk); warn
    once about a torch or Triton outside :data:`VERSION_BOUNDS`, and probe the private APIs that
    have a fallback (:func:`probe_private_apis`). ``installed``: versions by distribution name (tests)."""
    if os.environ.get(SKIP_VERSION_CHECK_ENV, "").strip() not in ("", "0"):
        return
    installed = dict(installed or {})
    for name in (*SUPPORTED_VERSIONS, *VERSION_BOUNDS):
        if name not in installed:
            installed[name] = installed_version(name)
    wrong = {name: installed[name] for name in SUPPORTED_VERSIONS if installed[name] not in SUPPORTED_VERSIONS[name]}
    if wrong:
        found = ", ".join(f"{name} {installed.get(name) or 'not installed'}" for name in SUPPORTED_VERSIONS)
        wanted = ", ".join(f"{name} {' or '.join(v)}" for name, v in SUPPORTED_VERSIONS.items())
        raise UnsupportedVersionError(
            f"this ns-splat-plus was written for {wanted}, but {found} is installed "
            f"(gsplat 1.5 changed the shapes splat-plus reads, e.g. info['radii'] is [C, N, 2])",
            f"pip install nerfstudio=={SUPPORTED_VERSIONS['nerfstudio'][0]} "
            f"gsplat=={SUPPORTED_VERSIONS['gsplat'][0]} (or set {SKIP_VERSION_CHECK_ENV}=1 to try anyway)",
        )
    for name, (lowest, below) in VERSION_BOUNDS.items():
        version = installed[name]
        if version is not None and not release(lowest) <= release(version) < release(below):
            warn_once(
                f"version:{name}",
                f"{name} {version} is outside the versions splat-plus was written for "
                f"({name}>={lowest},<{below}); its private APIs are probed and fall back where they changed",
            )
    probe_private_apis()


def probe_private_apis() -> Dict[str, Optional[str]]:
    """Probe every private API that has a fallback, warning once for each that fails: the fused Adam
    (``Adam._init_group`` and ``torch._foreach_*``) and Triton's direct launches. Returns the problems."""
    fused_adam_available()
    direct_triton_launch_available()
    return dict(versions.PROBES)
