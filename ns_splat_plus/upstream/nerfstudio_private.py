"""The private parts of nerfstudio 1.1.5 that splat-plus reads or calls; see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import sys
from typing import Any, Literal, Optional, Tuple

import torch

from ns_splat_plus.errors import UserInputError, exit_on_user_error
from ns_splat_plus.upstream.command_line import splat_plus_command


def load_images(datamanager, split: Literal["train", "eval"], cache_images_device: Literal["cpu", "gpu"]):
    """``FullImageDatamanager._load_images`` (nerfstudio 1.1.5): decoded, undistorted images of a split."""
    from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager

    return FullImageDatamanager._load_images(datamanager, split, cache_images_device=cache_images_device)


def undistort_image(camera, distortion_params, data: dict, image, K):
    """``full_images_datamanager._undistort_image`` (nerfstudio 1.1.5): ``(K, image, mask)`` of one
    image, the per-image step of ``_load_images`` (train and eval images are decoded one at a time,
    :mod:`ns_splat_plus.training.images.decode`)."""
    from nerfstudio.data.datamanagers import full_images_datamanager

    return full_images_datamanager._undistort_image(camera, distortion_params, data, image, K)


def load_colmap_points(dataparser, colmap_path, transform_matrix, scale_factor) -> dict:
    """``ColmapDataParser._load_3D_points`` (nerfstudio 1.1.5): a split's ``points3D_*`` metadata."""
    return dataparser._load_3D_points(colmap_path, transform_matrix, scale_factor)


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


def correct_viewer_port(viewer_state) -> Optional[Tuple[int, int]]:
    """Make the viewer's banner name the port viser actually serves on; returns (asked, used) when they differ.

    nerfstudio 1.1.5's ``ViewerState`` writes the port it asked viser for into ``viewer_info`` (the
    banner); viser 0.2 moves to the next free port when that one is taken, so the banner named another
    program's port. ``viewer_info`` is rewritten in place (nerfstudio's trainer hands that list to its
    ``LocalWriter``, which copies it into ``past_mssgs``, its redrawn lines: rewritten there too)."""
    import re

    from nerfstudio.utils import writer as ns_writer

    server = getattr(viewer_state, "viser_server", None)
    info = getattr(viewer_state, "viewer_info", None)
    if server is None or not hasattr(server, "get_port") or not info:
        return None
    used = int(server.get_port())
    address = re.compile(r"(https?://[^\s/:]+):(\d+)")
    asked = [int(m.group(2)) for message in info for m in address.finditer(message)]
    if not asked or all(port == used for port in asked):
        return None
    fixed = {
        message: address.sub(lambda m: f"{m.group(1)}:{used}", message) + f"; port {asked[0]} was taken"
        for message in info
    }
    info[:] = [fixed[message] for message in info]
    for event_writer in ns_writer.EVENT_WRITERS:
        lines = getattr(event_writer, "past_mssgs", None)
        if isinstance(lines, list):
            lines[:] = [fixed.get(line, line) for line in lines]
    return asked[0], used


def note_running_time(name, duration: float, step: int, update_eta: bool = False) -> None:
    """nerfstudio's ``writer.put_time(name, duration, step, avg_over_steps=True, update_eta)``
    without queueing a scalar for the event writers: the running average (and the ETA) that the
    console line and the viewer read from ``GLOBAL_BUFFER`` is updated, but no TensorBoard / W&B
    point is written. The loop calls ``put_time`` itself on logging steps, so the logged series are
    the same averages, once every ``steps_per_log`` steps instead of every step (each point cost
    about 0.1 ms of host time per step with TensorBoard, far more with W&B). Main process only, as
    ``put_time`` (nerfstudio 1.1.5's buffer layout: ``events[name] = {"buffer", "avg"}``)."""
    from nerfstudio.utils import comms
    from nerfstudio.utils import writer as ns_writer

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


def start_step(trainer) -> int:
    """``Trainer._start_step`` (nerfstudio 1.1.5): the step training starts (or resumes) at; 0 before set-up."""
    return int(getattr(trainer, "_start_step", 0))


def set_start_step(trainer, step: int) -> None:
    """Set ``Trainer._start_step`` (nerfstudio 1.1.5), where a resumed run starts."""
    trainer._start_step = step


def drawn_image_indices(trainer) -> list:
    """The training cameras ``Viewer.init_scene`` draws with a picture (nerfstudio 1.1.5's
    ``_pick_drawn_image_idxs``, up to ``--viewer.max-num-display-images``); none without the viewer (ranks > 0)."""
    viewer_state = getattr(trainer, "viewer_state", None)
    datamanager = trainer.pipeline.datamanager
    if viewer_state is None or getattr(datamanager, "train_dataset", None) is None:
        return []
    return [int(i) for i in viewer_state._pick_drawn_image_idxs(len(datamanager.train_dataset))]


def init_viewer_state(trainer, train_dataset=None) -> None:
    """``Trainer._init_viewer_state()`` (nerfstudio 1.1.5; a no-op without the viewer, and on ranks > 0), with
    ``train_dataset`` (default: the datamanager's) as the one whose photos ``init_scene`` draws at the
    training cameras. ``init_scene`` reads of it only ``len``, ``cameras`` and ``[i]["image"]``."""
    if train_dataset is None:
        trainer._init_viewer_state()
        return
    from nerfstudio.utils import comms

    config = trainer.config  # nerfstudio's check_viewer_enabled, which decorates _init_viewer_state
    if (config.is_viewer_enabled() or config.is_viewer_legacy_enabled()) and comms.is_main_process():
        assert trainer.viewer_state is not None  # as nerfstudio's _init_viewer_state asserts
        trainer.viewer_state.init_scene(
            train_dataset=train_dataset,
            train_state=trainer.training_state,
            eval_dataset=trainer.pipeline.datamanager.eval_dataset,
        )


def update_viewer_state(trainer, step: int) -> None:
    """``Trainer._update_viewer_state(step)`` (nerfstudio 1.1.5; SplatPlusTrainer overrides it)."""
    trainer._update_viewer_state(step)


def after_train(trainer) -> None:
    """``Trainer._after_train()`` (nerfstudio 1.1.5): the last checkpoint, writers out, the viewer's end."""
    trainer._after_train()


def downscale_factor(model) -> int:
    """``SplatfactoModel._get_downscale_factor()`` (nerfstudio 1.1.5): this step's resolution-schedule divisor."""
    return model._get_downscale_factor()


def downscale_mask(model, mask: torch.Tensor) -> torch.Tensor:
    """``SplatfactoModel._downscale_if_required(mask)`` (nerfstudio 1.1.5): [H, W, 1] at this step's size."""
    return model._downscale_if_required(mask)


def background(model) -> torch.Tensor:
    """``SplatfactoModel._get_background_color()`` (nerfstudio 1.1.5): [3] on the model's device."""
    return model._get_background_color()


def apply_bilateral_grid(model, rgb: torch.Tensor, cam_idx, height: int, width: int) -> torch.Tensor:
    """``SplatfactoModel._apply_bilateral_grid`` (nerfstudio 1.1.5): the camera's bilateral grid on [H, W, 3]."""
    return model._apply_bilateral_grid(rgb, cam_idx, height, width)


def dataparser_outputs(dataset):
    """``InputDataset._dataparser_outputs`` (nerfstudio 1.1.5): a dataset's parser outputs (file names, cameras)."""
    return dataset._dataparser_outputs


def writer_event_count() -> int:
    """How many events nerfstudio's writer holds (``writer.EVENT_STORAGE``, nerfstudio 1.1.5) but has not written."""
    from nerfstudio.utils import writer as ns_writer

    return len(ns_writer.EVENT_STORAGE)


def drop_writer_events(keep: int) -> None:
    """Drop the writer's pending events after the first ``keep`` (:func:`writer_event_count`)."""
    from nerfstudio.utils import writer as ns_writer

    del ns_writer.EVENT_STORAGE[keep:]


def announce_gaussian_splat_export() -> bool:
    """Make ``ns-export gaussian-splat`` of a splat-plus run fast and say what it wrote: nerfstudio 1.1.5's
    ``ExportGaussianSplat.write_ply(filename, count, map_to_tensors)`` writes one value at a time from Python
    (0.89 s for 20,000 Gaussians on the development machine: about 45 s at 1M) and prints neither the file
    nor the count. Its static method is replaced by :func:`write_ply`, the same bytes from one array, then
    one line. Only in an ns-export process (the exporter module is loaded), which calls it after loading a
    splat-plus checkpoint; returns whether the replacement is in place."""
    import sys

    exporter = sys.modules.get("nerfstudio.scripts.exporter")
    if exporter is None or not hasattr(exporter, "ExportGaussianSplat"):
        return False
    if getattr(exporter.ExportGaussianSplat.write_ply, "_splat_plus_announces", False):
        return True

    def write_and_announce(filename, count, map_to_tensors):
        if int(count) == 0:  # nerfstudio's writer: a ValueError traceback ("... and not empty")
            with exit_on_user_error():
                raise nothing_to_export(filename)
        import os

        replaced = os.path.exists(filename)  # nerfstudio overwrites it unsaid, another run's export too
        write_ply(filename, count, map_to_tensors)
        from nerfstudio.utils.rich_utils import CONSOLE

        note = " (the file that was there is replaced)" if replaced else ""
        CONSOLE.print(f"Exported {int(count)} Gaussians to {filename}{note}", soft_wrap=True)

    write_and_announce.__dict__["_splat_plus_announces"] = True  # a function attribute (what getattr reads above)
    exporter.ExportGaussianSplat.write_ply = staticmethod(write_and_announce)
    return True


def nothing_to_export(filename) -> UserInputError:
    """The UserInputError for an ns-export gaussian-splat that has no Gaussian left to write to ``filename``: its crop
    box holds none, or every Gaussian has a non-finite value or an opacity below 1/255 (the exporter drops those)."""
    crop = gaussian_splat_crop()
    if crop is not None:
        return UserInputError(
            f"ns-export gaussian-splat: the crop box {crop} holds none of the run's Gaussians: nothing to write to "
            f"{filename}",
            "enlarge --obb-scale or move --obb-center (in the scene's coordinates, as the viewer's crop shows them), "
            "or leave the --obb-* options out to export every Gaussian",
        )
    return UserInputError(
        f"ns-export gaussian-splat: every Gaussian of the run has a non-finite value or an opacity below 1/255: "
        f"nothing to write to {filename}",
        "export an earlier checkpoint (--load-step in the run's config.yml), or train the run again",
    )


def write_ply(filename, count: int, map_to_tensors) -> None:
    """nerfstudio 1.1.5's ``ExportGaussianSplat.write_ply``, byte for byte (header, its checks and messages,
    float values as little-endian float32, uint8 as bytes, vertex by vertex in the dict's order), with the
    vertices written as one structured array instead of one ``write`` per value.

    Args:
        filename: the PLY to write.
        count: N, the number of vertices.
        map_to_tensors: OrderedDict of property name -> [N] float or uint8 numpy array.
    """
    from importlib.metadata import version

    import numpy as np

    if not all(tensor.size == count for tensor in map_to_tensors.values()):
        raise ValueError("Count does not match the length of all tensors")
    if not all(
        isinstance(tensor, np.ndarray) and (tensor.dtype.kind == "f" or tensor.dtype == np.uint8) and tensor.size > 0
        for tensor in map_to_tensors.values()
    ):
        raise ValueError("All tensors must be numpy arrays of float or uint8 type and not empty")
    columns = [(key, "<f4" if tensor.dtype.kind == "f" else "u1") for key, tensor in map_to_tensors.items()]
    vertices = np.empty(count, dtype=np.dtype(columns))  # packed: no padding between properties, as the loop
    for key, tensor in map_to_tensors.items():
        vertices[key] = tensor.reshape(-1)
    with open(filename, "wb") as ply_file:
        ply_file.write(b"ply\n")
        ply_file.write(b"format binary_little_endian 1.0\n")
        ply_file.write(f"comment Generated by Nerstudio {version('nerfstudio')}\n".encode())
        ply_file.write(b"comment Vertical Axis: z\n")
        ply_file.write(f"element vertex {count}\n".encode())
        for key, dtype in columns:
            ply_file.write(f"property {'float' if dtype == '<f4' else 'uchar'} {key}\n".encode())
        ply_file.write(b"end_header\n")
        ply_file.write(vertices.tobytes())


SCRIPT_OUTPUT_OPTIONS = {
    "output_path": "--output-path",
    "output_dir": "--output-dir",
    "render_output_path": "--render-output-path",
}
"""Output options of nerfstudio 1.1.5's ns-eval (``ComputePSNR.output_path``, ``render_output_path``: a folder it
makes before the evaluation) and ns-export (``Exporter.output_dir``)."""
SCRIPT_OUTPUT_SUFFIXES = {("ComputePSNR", "output_path"): ".json"}
"""The file type a script's output must have: ns-eval asserts ``output_path.suffix == ".json"`` (eval.py), after the
evaluation has run."""
RAY_EXPORTERS = {
    "ExportPointCloud": ("pointcloud", "samples the model along rays"),
    "ExportTSDFMesh": ("tsdf", "renders depth along rays"),
    "ExportPoissonMesh": ("poisson", "samples the model along rays"),
    "ExportMarchingCubesMesh": ("marching-cubes", "reads the model's SDF field"),
}
"""nerfstudio 1.1.5's ns-export subcommands that need a NeRF-type model: (subcommand, what it reads). A Gaussian
model has neither rays nor an SDF field, and each ended in an error deep in the export."""


def running_script() -> Optional[Any]:
    """The nerfstudio script object running this process (ns-eval's ``ComputePSNR``, ns-viewer's ``RunViewer``,
    ns-export's ``Export*``), found as the ``self`` of its ``main`` on the call stack; None outside those scripts
    (or if a later nerfstudio renames them: nothing is checked early)."""
    from types import FrameType

    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        script = frame.f_locals.get("self") if frame.f_code.co_name == "main" else None
        if script is not None and type(script).__module__.startswith("nerfstudio.scripts."):
            return script
        frame = frame.f_back
    return None


def script_output_paths() -> list:
    """[(option, path, suffix)] of the nerfstudio script running this process (ns-eval, ns-export,
    :func:`running_script`): ``eval_setup`` is called before anything is written, so that the outputs can be
    checked before an evaluation or export runs for nothing.
    ``suffix``: the file type the script requires of that output (:data:`SCRIPT_OUTPUT_SUFFIXES`), else None."""
    from pathlib import Path

    script = running_script()
    if script is None:
        return []
    return [
        (option, Path(getattr(script, name)), SCRIPT_OUTPUT_SUFFIXES.get((type(script).__name__, name)))
        for name, option in SCRIPT_OUTPUT_OPTIONS.items()
        if isinstance(getattr(script, name, None), (str, Path))
    ]


def ray_export_subcommand(script: Optional[Any]) -> Optional[Tuple[str, str]]:
    """(subcommand, what it reads) when ``script`` (:func:`running_script`) is an ns-export of
    :data:`RAY_EXPORTERS`, else None."""
    if script is None or type(script).__module__ != "nerfstudio.scripts.exporter":
        return None
    return RAY_EXPORTERS.get(type(script).__name__)


def gaussian_splat_crop() -> Optional[str]:
    """ns-export gaussian-splat's crop box as typed (``--obb-center ... --obb-scale ...``), None without one
    (nerfstudio 1.1.5 crops only when all three are given)."""
    script = running_script()
    names = ("obb_center", "obb_rotation", "obb_scale")
    if script is None or any(getattr(script, name, None) is None for name in names):
        return None
    return " ".join(f"--{name.replace('_', '-')} {' '.join(f'{v:g}' for v in getattr(script, name))}" for name in names)


def list_external_methods_without_inspect_stack() -> None:
    """``ExternalMethodDummyTrainerConfig.__post_init__`` (nerfstudio 1.1.5) tells a listing by
    ``get_external_methods`` (return) from a user's choice of an uninstalled method (offer to install
    it) by ``inspect.stack()[2].function``. ``inspect.stack()`` reads every frame's source and, for each
    frozen importlib frame of the import in progress, scans all of ``sys.modules``: the 26 listings at
    the import of ``method_configs`` took 1.25 s of ns-train's 5.5 s import on the development machine.
    The same test on the same frame through ``sys._getframe(2)`` costs microseconds; every other call
    goes to nerfstudio's own ``__post_init__``. Splat-plus commands only (see below)."""
    from nerfstudio.configs import external_methods

    dummy = external_methods.ExternalMethodDummyTrainerConfig
    offer_to_install = dummy.__post_init__
    if getattr(offer_to_install, "lists_without_inspect_stack", False):
        return

    def __post_init__(self) -> None:
        if sys._getframe(2).f_code.co_name == "get_external_methods":  # [0] here, [1] the dataclass __init__
            return
        offer_to_install(self)

    __post_init__.lists_without_inspect_stack = True  # type: ignore[attr-defined]
    dummy.__post_init__ = __post_init__  # type: ignore[method-assign]


if splat_plus_command():  # nerfstudio imports splat-plus (its entry points) before it lists the external methods
    list_external_methods_without_inspect_stack()


WRITER_FILE = "nerfstudio/utils/writer.py"
"""Where nerfstudio 1.1.5 starts its experiment trackers: ``setup_event_writer`` builds a ``CometWriter`` (comet_ml)
and a ``WandbWriter`` (wandb) in their ``__init__``."""


def experiment_tracker_that_raised(tb) -> Optional[str]:
    """The class name (``CometWriter``, ``WandbWriter``) of nerfstudio's writer whose ``__init__`` is on the traceback
    ``tb``: the tracker that could not start; None where none is."""
    import traceback

    for frame, _ in traceback.walk_tb(tb):
        code = frame.f_code
        if code.co_name == "__init__" and code.co_filename.replace("\\", "/").endswith(WRITER_FILE):
            writer = frame.f_locals.get("self")
            if writer is not None:
                return type(writer).__name__
    return None
