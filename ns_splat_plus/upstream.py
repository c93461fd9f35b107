"""Every private nerfstudio / gsplat touch point of splat-plus, and the start-up version check.

splat-plus subclasses nerfstudio and gsplat where it can; where it must reach into private code,
it does so here and nowhere else, each touch point with the versions it was written against.
:func:`check_versions` runs at start-up (the trainer config's ``set_timestamp``, the first thing
ns-train calls, and model construction, which ns-eval / ns-viewer / ns-export reach): a nerfstudio
or gsplat version this module was not written for stops the run with one message naming both
versions, instead of a shape error deep inside a training step (gsplat 1.5 changed
``info["radii"]`` to ``[C, N, 2]`` and ``isect_tiles(n_cameras=)`` to ``n_images``).

Touch points (written for nerfstudio 1.1.5 and gsplat 1.4.0):

======================================  =============================================================
nerfstudio
``FullImageDatamanager._load_images``   the tests' reference for our image decoding (:func:`load_images`)
``full_images_datamanager._undistort_image``  train and eval images decoded one at a time (:func:`undistort_image`)
``comms.LOCAL_PROCESS_GROUP``           the per-node group its launcher makes (:func:`set_local_process_group`)
``Trainer._load_checkpoint``            overridden by ``SplatPlusTrainer`` (resume)
``Trainer.train`` loop arithmetic       :func:`train_loop_subtracts_start_step`
``Viewer.render_statemachines``         per-browser render threads stopped at the end (:func:`stop_viewer_renders`)
``writer.GLOBAL_BUFFER``                 per-step running time averages without a scalar (:func:`note_running_time`)
gsplat
``cuda._backend._C``                    the JIT-built extension (:func:`gsplat_extension`)
``cuda._wrapper`` projection / tiles    strip rendering (:func:`gsplat_kernels`)
``cuda._torch_impl``                    the PyTorch reference (:func:`torch_reference_ops`)
``strategy.ops._update_param_with_optimizer``, ``_multinomial_sample``   CPU MCMC
``DefaultStrategy._grow_gs`` / ``_prune_gs``, ``MCMCStrategy._relocate_gs`` / ``_add_new_gs``
                                        counts of a refine (:func:`grow_gs` ... :func:`add_new_gs`)
triton (3.6 with torch 2.11, 3.9 with torch 2.15)
``CompiledKernel[grid](*args)``          launches without ``JITFunction.run`` (:func:`launch_compiled_triton`)
torchmetrics / torchvision / torch
LPIPS' AlexNet download                 :func:`build_lpips` (local weights, else one short-timeout download)
``torch.load(weights_only=True)``       :func:`weights_only_safe` (nerfstudio #3683)
======================================  =============================================================
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus.errors import SplatPlusError

SUPPORTED_VERSIONS: Dict[str, Tuple[str, ...]] = {"nerfstudio": ("1.1.5",), "gsplat": ("1.4.0",)}
"""The versions every touch point below was written against and tested with."""
SKIP_VERSION_CHECK_ENV = "NS_SPLAT_PLUS_SKIP_VERSION_CHECK"


class UnsupportedVersionError(SplatPlusError):
    """nerfstudio or gsplat is a version splat-plus was not written for."""

    exit_status = 2


def installed_version(distribution: str) -> Optional[str]:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def check_versions(installed: Optional[Dict[str, Optional[str]]] = None) -> None:
    """Raise UnsupportedVersionError unless nerfstudio and gsplat are versions listed in
    ``SUPPORTED_VERSIONS`` (``$NS_SPLAT_PLUS_SKIP_VERSION_CHECK=1`` skips the check, at your risk)."""
    if os.environ.get(SKIP_VERSION_CHECK_ENV, "").strip() not in ("", "0"):
        return
    if installed is None:
        installed = {name: installed_version(name) for name in SUPPORTED_VERSIONS}
    wrong = {name: v for name, v in installed.items() if v not in SUPPORTED_VERSIONS[name]}
    if not wrong:
        return
    found = ", ".join(f"{name} {installed.get(name) or 'not installed'}" for name in SUPPORTED_VERSIONS)
    wanted = ", ".join(f"{name} {' or '.join(v)}" for name, v in SUPPORTED_VERSIONS.items())
    raise UnsupportedVersionError(
        f"this ns-splat-plus was written for {wanted}, but {found} is installed "
        f"(gsplat 1.5 changed the shapes splat-plus reads, e.g. info['radii'] is [C, N, 2])",
        f"pip install nerfstudio=={SUPPORTED_VERSIONS['nerfstudio'][0]} gsplat=={SUPPORTED_VERSIONS['gsplat'][0]} "
        f"(or set {SKIP_VERSION_CHECK_ENV}=1 to try anyway)",
    )


# --- nerfstudio ---------------------------------------------------------------------------------------


def load_images(datamanager, split: str, cache_images_device: str):
    """``FullImageDatamanager._load_images`` (nerfstudio 1.1.5): decoded, undistorted images of a split."""
    from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager

    return FullImageDatamanager._load_images(datamanager, split, cache_images_device=cache_images_device)


def undistort_image(camera, distortion_params, data: dict, image, K):
    """``full_images_datamanager._undistort_image`` (nerfstudio 1.1.5): ``(K, image, mask)`` of one
    image, the per-image step of ``_load_images`` (train and eval images are decoded one at a time,
    :mod:`ns_splat_plus.training.image_memory`)."""
    from nerfstudio.data.datamanagers import full_images_datamanager

    return full_images_datamanager._undistort_image(camera, distortion_params, data, image, K)


def set_local_process_group(group) -> None:
    """nerfstudio's ``comms.get_local_rank()`` reads ``comms.LOCAL_PROCESS_GROUP``, which only its
    own launcher sets; under torchrun / srun we set it (nerfstudio 1.1.5)."""
    from nerfstudio.utils import comms

    comms.LOCAL_PROCESS_GROUP = group


def local_process_group():
    from nerfstudio.utils import comms

    return comms.LOCAL_PROCESS_GROUP


def stop_viewer_renders(viewer_state, timeout_s: float = 5.0) -> int:
    """Stop the viewer's per-browser render threads and wait for them; the number still alive after.

    nerfstudio 1.1.5's ``Viewer.render_statemachines`` are daemon threads (``RenderStateMachine``,
    a ``running`` flag, a ``render_trigger`` event) that keep rendering while a browser is connected.
    A render still inside torch while the interpreter exits after training can abort the process
    ("terminate called without an active exception", exit status -6) after a successful run.
    """
    machines = list((getattr(viewer_state, "render_statemachines", None) or {}).values())
    for machine in machines:
        machine.running = False
        trigger = getattr(machine, "render_trigger", None)
        if trigger is not None:
            trigger.set()  # wake a thread waiting for the next camera move
    alive = 0
    for machine in machines:
        if hasattr(machine, "join"):
            machine.join(timeout_s)
            alive += int(machine.is_alive())
    return alive


def note_running_time(name, duration: float, step: int, update_eta: bool = False) -> None:
    """nerfstudio's ``writer.put_time(name, duration, step, avg_over_steps=True, update_eta)``
    without queueing a scalar for the event writers: the running average (and the ETA) that the
    console line and the viewer read from ``GLOBAL_BUFFER`` is updated, but no TensorBoard / W&B
    point is written. The loop calls ``put_time`` itself on logging steps, so the logged series are
    the same averages, once every ``steps_per_log`` steps instead of every step (each point cost
    about 0.1 ms of host time per step with TensorBoard, far more with W&B). Main process only, as
    ``put_time`` (nerfstudio 1.1.5's buffer layout: ``events[name] = {"buffer", "avg"}``)."""
    from nerfstudio.utils import comms, writer as ns_writer

    if not comms.is_main_process() or not ns_writer.is_initialized():
        return
    buffer_state = ns_writer.GLOBAL_BUFFER
    name = name.value if isinstance(name, ns_writer.EventName) else name
    buffer_state["step"] = step
    times = buffer_state["events"].get(name, {"buffer": [], "avg": 0})["buffer"]
    if len(times) >= buffer_state["max_buffer_size"]:
        times.pop(0)
    times.append(duration)
    average = sum(times) / len(times)
    buffer_state["events"][name] = {"buffer": times, "avg": average}
    if update_eta:
        remaining = (buffer_state["max_iter"] - step) * average
        buffer_state["events"][ns_writer.EventName.ETA.value] = ns_writer._format_time(remaining)


# --- gsplat -------------------------------------------------------------------------------------------


def gsplat_extension():
    """gsplat's CUDA extension (``gsplat.cuda._backend._C``, built on first use), or None."""
    from gsplat.cuda import _backend

    return _backend._C


def gsplat_kernels():
    """The stages of ``gsplat.rasterization`` (``gsplat.cuda._wrapper``, gsplat 1.4.0), for strips."""
    from gsplat.cuda import _wrapper

    return _wrapper


def launch_compiled_triton(compiled: Any, grid: Tuple[int, ...], args: Tuple[Any, ...]) -> None:
    """Launch a kernel that ``JITFunction.run`` returned (``triton.compiler.CompiledKernel``) on the
    current stream: ``compiled[grid](*args)``, ``args`` being all of the JIT function's arguments in
    its signature's order, constexprs included, as ``JITFunction.run`` passes them (Triton 3.6, 3.9).
    No argument is bound or specialized again: :mod:`ns_splat_plus.model.kernel_launch` keys the
    kernel by everything its specialization depends on."""
    compiled[tuple(grid) + (1,) * (3 - len(grid))](*args)


def is_compiled_triton_kernel(obj: Any) -> bool:
    """Whether ``obj`` is what ``JITFunction.run`` returns after a compiled launch (not the interpreter's)."""
    try:
        from triton.compiler import CompiledKernel
    except ImportError:
        return False
    return isinstance(obj, CompiledKernel)


def torch_reference_ops():
    """gsplat's PyTorch implementations (``gsplat.cuda._torch_impl``, gsplat 1.4.0)."""
    from gsplat.cuda import _torch_impl

    return _torch_impl


def update_param_with_optimizer(param_fn: Callable, optimizer_fn: Callable, params, optimizers) -> None:
    """``gsplat.strategy.ops._update_param_with_optimizer`` (gsplat 1.4.0)."""
    from gsplat.strategy import ops

    ops._update_param_with_optimizer(param_fn, optimizer_fn, params, optimizers)


def multinomial_sample(weights: torch.Tensor, n: int, replacement: bool = True) -> torch.Tensor:
    """``gsplat.strategy.ops._multinomial_sample`` (gsplat 1.4.0)."""
    from gsplat.strategy import ops

    return ops._multinomial_sample(weights, n, replacement=replacement)


def grow_gs(strategy, params, optimizers, state, step: int) -> Tuple[int, int]:
    """``DefaultStrategy._grow_gs`` (gsplat 1.4.0): (duplicated, split)."""
    from gsplat.strategy import DefaultStrategy

    return DefaultStrategy._grow_gs(strategy, params, optimizers, state, step)


def prune_gs(strategy, params, optimizers, state, step: int) -> int:
    """``DefaultStrategy._prune_gs`` (gsplat 1.4.0): the number pruned."""
    from gsplat.strategy import DefaultStrategy

    return DefaultStrategy._prune_gs(strategy, params, optimizers, state, step)


def relocate_gs(strategy, params, optimizers, binoms) -> int:
    """``MCMCStrategy._relocate_gs`` (gsplat 1.4.0): the number relocated."""
    from gsplat.strategy import MCMCStrategy

    return MCMCStrategy._relocate_gs(strategy, params, optimizers, binoms)


def add_new_gs(strategy, params, optimizers, binoms) -> int:
    """``MCMCStrategy._add_new_gs`` (gsplat 1.4.0): the number added."""
    from gsplat.strategy import MCMCStrategy

    return MCMCStrategy._add_new_gs(strategy, params, optimizers, binoms)


# --- LPIPS (torchmetrics / torchvision) and checkpoints (torch) ------------------------------------------

_LPIPS_WARNED = False


def alexnet_weights_path() -> Path:
    """Where torchvision looks for the AlexNet weights that LPIPS needs ($TORCH_HOME/hub/checkpoints)."""
    from torchvision.models import AlexNet_Weights

    filename = AlexNet_Weights.IMAGENET1K_V1.url.rsplit("/", 1)[-1]
    return Path(torch.hub.get_dir()) / "checkpoints" / filename


LPIPS_DOWNLOAD_TIMEOUT_S = 10.0
ALEXNET_URL_ENV = "NS_SPLAT_PLUS_ALEXNET_URL"
"""Where to download the AlexNet weights from (default: torchvision's URL, as splatfacto does)."""
NO_DOWNLOAD_ENV = "NS_SPLAT_PLUS_NO_DOWNLOAD"
"""Set to 1 to never download (LPIPS is then null unless the weights are local)."""
_DOWNLOAD_FAILED: Optional[str] = None  # tried once per process


def _download_alexnet(path: Path) -> Optional[str]:
    """Download the AlexNet weights to ``path`` (atomically); returns None or why it failed."""
    global _DOWNLOAD_FAILED
    if os.environ.get(NO_DOWNLOAD_ENV, "").strip() not in ("", "0"):
        return f"downloads are off (${NO_DOWNLOAD_ENV})"
    if _DOWNLOAD_FAILED is not None:
        return _DOWNLOAD_FAILED
    import hashlib
    import urllib.request

    from torchvision.models import AlexNet_Weights

    url = os.environ.get(ALEXNET_URL_ENV) or AlexNet_Weights.IMAGENET1K_V1.url
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=LPIPS_DOWNLOAD_TIMEOUT_S) as response, open(tmp, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        expected = path.stem.rsplit("-", 1)[-1]  # torchvision's files end in a SHA-256 prefix
        if url == AlexNet_Weights.IMAGENET1K_V1.url and not digest.hexdigest().startswith(expected):
            raise ValueError(f"the downloaded file's SHA-256 does not start with {expected}")
        tmp.replace(path)
        CONSOLE.print(f"LPIPS: downloaded the AlexNet weights to {path}")
        return None
    except Exception as err:  # offline, DNS, timeout, HTTP error, a full disk: LPIPS is then null
        tmp.unlink(missing_ok=True)
        _DOWNLOAD_FAILED = f"{type(err).__name__}: {err}"
        return _DOWNLOAD_FAILED


def build_lpips() -> Optional[torch.nn.Module]:
    """torchmetrics' LPIPS (AlexNet), as splatfacto builds it, or None with one warning.

    Uses the weights in ``$TORCH_HOME/hub/checkpoints`` when present; otherwise downloads them as
    splatfacto does (torchvision's URL), with a short timeout and once per process. Offline,
    LPIPS is None (reported as null, never 0): copy ``alexnet-owt-7be5be79.pth`` into
    ``$TORCH_HOME/hub/checkpoints`` (by default ``~/.cache/torch/hub/checkpoints``) to enable it.
    """
    global _LPIPS_WARNED
    path = alexnet_weights_path()
    if not path.is_file():
        failure = _download_alexnet(path)
        if failure is not None:
            if not _LPIPS_WARNED:
                CONSOLE.print(
                    f"[yellow]LPIPS unavailable: AlexNet weights not found at {path} and not downloaded "
                    f"({failure}). LPIPS is reported as null; copy the file there (or set TORCH_HOME) to enable it.[/yellow]"
                )
                _LPIPS_WARNED = True
            return None
    from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

    return LearnedPerceptualImagePatchSimilarity(normalize=True)


def weights_only_safe(obj: Any) -> Any:
    """A copy of a checkpoint structure with numpy scalars/arrays replaced by Python numbers/tensors."""
    if isinstance(obj, dict):
        return {k: weights_only_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [weights_only_safe(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(weights_only_safe(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj  # tensors, Python numbers, strings, None: loadable as they are
