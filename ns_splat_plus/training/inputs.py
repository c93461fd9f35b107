"""Checks of what the user handed us, before any work starts: one clear message, never a traceback.

Entry points: :func:`check_options` (the command line, at launch), :func:`preflight` (the dataset
the run points to: path, images and their layout, SfM points; before the dataparser runs) and
:func:`dataparser_errors` (errors nerfstudio's dataparsers raise about the data become one
:class:`~ns_splat_plus.errors.UserInputError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import shlex
import sys
import traceback
from pathlib import Path
from typing import Iterable, Iterator, List, Optional

from ns_splat_plus.errors import UserInputError
from ns_splat_plus.model.options import check_model_options, flag
from ns_splat_plus.parallel.schedule import cameras_per_step_of
from ns_splat_plus.training import checkpoint, colmap_checks, dataset_checks, viewer_address
from ns_splat_plus.upstream.command_line import option_value

MAX_WARMUP_STEPS = 1000
"""--warmup-steps above this is refused: warmup's steps are undone, and a billion of them ran silently for days."""

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".exr", ".tif", ".tiff", ".bmp", ".webp"}


def check_options(config) -> None:
    """Options that cannot work, refused before anything starts (``config``: SplatPlusTrainerConfig)."""
    if config.max_num_iterations <= 0:
        raise UserInputError(f"--max-num-iterations must be at least 1, got {config.max_num_iterations}")
    steps_scaler = getattr(config, "steps_scaler", 1.0)
    if not (isinstance(steps_scaler, (int, float)) and math.isfinite(steps_scaler) and steps_scaler > 0):
        raise UserInputError(
            f"--steps-scaler must be a positive number (0.5: the schedule in half the steps), got {steps_scaler}"
        )
    if config.max_num_iterations * steps_scaler < 1:
        # the scaler may be a preset's (splat-plus-lite's 1/3), not typed: offer both ways out
        raise UserInputError(
            f"--steps-scaler {steps_scaler:g} turns the {config.max_num_iterations}-step schedule into "
            f"{config.max_num_iterations * steps_scaler:.2g} steps (it would train 1 step)",
            f"pass --max-num-iterations {math.ceil(1 / steps_scaler - 1e-9)} or more, or a --steps-scaler of at least "
            f"{1 / config.max_num_iterations:.2g} (0.5: the schedule in half the steps)",
        )
    check_resume_options(config)
    steps_per_log = getattr(config.logging, "steps_per_log", 1)
    if steps_per_log < 1:  # nerfstudio's writer takes the step modulo it: a ZeroDivisionError at the first log
        raise UserInputError(f"--logging.steps-per-log must be a positive number of steps, got {steps_per_log}")
    if getattr(config, "warmup_steps", 0) < 0:
        raise UserInputError(f"--warmup-steps must be 0 (off) or more, got {config.warmup_steps}")
    if getattr(config, "warmup_steps", 0) > MAX_WARMUP_STEPS:
        raise UserInputError(
            f"--warmup-steps {config.warmup_steps} is more than the {MAX_WARMUP_STEPS} warmup allows: its steps only "
            "warm kernels, allocator and caches before step 0, and are undone (no training happens in them)",
            f"pass --warmup-steps {MAX_WARMUP_STEPS} or less (the default 5 is enough; 0 turns warmup off)",
        )
    model = config.pipeline.model
    for name in ("refine_every", "sh_degree_interval"):
        value = getattr(model, name, 1)
        if value <= 0:
            raise UserInputError(
                f"--pipeline.model.{name.replace('_', '-')} must be a positive number of steps, got {value}"
            )
    check_cameras_per_step(config)
    check_model_options(model)  # every strategy option in its range (model/options.py: beside its definition)
    check_densify_callbacks(model)
    viewer_address.check_viewer_ports(config)
    if getattr(model, "rasterizer", "auto") == "gsplat" and config.machine.device_type != "cuda":
        raise UserInputError(
            f"--pipeline.model.rasterizer gsplat needs CUDA, but --machine.device-type is {config.machine.device_type}: "
            "use --pipeline.model.rasterizer auto (the PyTorch reference on the CPU)"
        )


def check_resume_options(config) -> None:
    """One thing to resume from: --load-dir and --load-checkpoint together resumed from --load-dir's newest checkpoint
    without a word about the file named. --load-step picks a step of --load-dir's checkpoints: nerfstudio ignores it
    without one, and the run then trained from scratch while its user believed it resumed."""
    load_dir, load_step = getattr(config, "load_dir", None), getattr(config, "load_step", None)
    load_checkpoint = getattr(config, "load_checkpoint", None)
    if load_dir is not None and load_checkpoint is not None:
        raise UserInputError(
            f"--load-dir {load_dir} and --load-checkpoint {load_checkpoint} both name what to resume from, and only "
            "one is used",
            "pass one of them: --load-checkpoint <file>, or --load-dir <run>/nerfstudio_models (--load-step N for "
            "another step than the newest)",
        )
    if load_step is not None and load_dir is None:
        if load_checkpoint is not None:
            raise UserInputError(
                f"--load-step {load_step} does not apply to --load-checkpoint, which names one checkpoint file",
                "drop --load-step, or pass --load-dir <run>/nerfstudio_models --load-step N instead of --load-checkpoint",
            )
        raise UserInputError(
            f"--load-step {load_step} needs --load-dir, the folder of the checkpoints to take the step from",
            f"pass --load-dir <run>/nerfstudio_models --load-step {load_step} to resume a run",
        )
    # the file to resume from exists: said at launch, not after the whole set-up
    checkpoint.resolve_checkpoint_path(load_dir, load_step, load_checkpoint)


def check_densify_callbacks(model) -> None:
    """Every --pipeline.model.densify-callbacks 'pkg.module:function' imports and is callable: checked at
    launch (before the run directory is written), where it used to stop set-up with a ValueError traceback."""
    from ns_splat_plus.strategy.records import load_callback

    for path in getattr(model, "densify_callbacks", None) or ():
        try:
            load_callback(path)
        except ValueError as err:
            raise UserInputError(
                f"--pipeline.model.densify-callbacks: {err}",
                "name a function as 'pkg.module:function' that imports from here (PYTHONPATH), or leave the option out",
            ) from None


def check_strategy_options(model, given: Iterable[str]) -> None:
    """Refuse options of one strategy given on the command line (``given``: model-config field names) when this run
    densifies with another (``model``: a SplatPlusModelConfig): the efficient strategy's ``efficient-*`` options and
    MCMC's (:data:`~ns_splat_plus.strategy.build.MCMC_OPTIONS`) would do nothing."""
    from ns_splat_plus.strategy.build import STRATEGY_PRESETS, owning_strategy

    strategy = getattr(model, "strategy", "default")
    owners = {name: owner for name in given if (owner := owning_strategy(name)) is not None and owner != strategy}
    if not owners:
        return
    owner = owners[min(owners)]
    unused = sorted(name for name in owners if owners[name] == owner)  # one strategy's options per message
    options = " and ".join(flag(name) for name in unused)
    raise UserInputError(
        f"{options} {'is an option' if len(unused) == 1 else 'are options'} of --pipeline.model.strategy {owner}, "
        f"but this run densifies with --pipeline.model.strategy {strategy}: "
        f"{'it' if len(unused) == 1 else 'they'} would do nothing",
        f"add --pipeline.model.strategy {owner} ({STRATEGY_PRESETS[owner]}'s), or leave "
        f"{'it' if len(unused) == 1 else 'them'} out",
    )


def check_cameras_per_step(config) -> None:
    """--pipeline.datamanager.cameras-per-step B: at least 1; B > 1 renders B cameras in one call,
    which the per-camera pose correction and bilateral grid do not support (refused here, at start)."""
    per_step = getattr(config.pipeline.datamanager, "cameras_per_step", 1)
    if per_step == "auto":  # a number at launch (parallel/schedule.py), checked again then
        return
    if per_step < 1:
        raise UserInputError(f"--pipeline.datamanager.cameras-per-step must be at least 1, got {per_step}")
    if per_step == 1:
        return
    model = config.pipeline.model
    unsupported = []
    if model.camera_optimizer.mode != "off":
        unsupported.append(f"--pipeline.model.camera-optimizer.mode {model.camera_optimizer.mode}")
    if getattr(model, "use_bilateral_grid", False):
        unsupported.append("--pipeline.model.use-bilateral-grid True")
    if unsupported:
        raise UserInputError(
            f"--pipeline.datamanager.cameras-per-step {per_step} does not work with "
            + " and ".join(unsupported)
            + ": use --pipeline.datamanager.cameras-per-step 1, or turn those off"
        )


def check_cameras_per_step_fits(config, train_images: int, world_size: int) -> None:
    """B cameras per step on W ranks are W x B distinct draws of the training photos: refused when
    there are fewer photos (each would be rendered several times in one step, and the schedule,
    scaled for W x B cameras per step, would shrink for draws that are not there)."""
    per_step = cameras_per_step_of(config.pipeline.datamanager, world_size)
    if per_step * world_size <= train_images:
        return
    ranks = f" on {world_size} ranks ({per_step * world_size} per step)" if world_size > 1 else ""
    typed = option_value(sys.argv, "--pipeline.datamanager.cameras-per-step")  # the launch resolved auto already
    if typed is None:
        shown = f"{per_step} ({getattr(config, 'method_name', None) or 'the method'}'s default)"
    else:
        shown = f"auto ({per_step} here)" if typed == "auto" else str(per_step)
    raise UserInputError(
        f"--pipeline.datamanager.cameras-per-step {shown}{ranks} asks for more distinct cameras per step than "
        f"the {train_images} training photos",
        f"pass --pipeline.datamanager.cameras-per-step {max(1, train_images // world_size)} or less",
    )


def dataset_path(config) -> Optional[Path]:
    """The dataset a trainer config points to (the datamanager's or the dataparser's ``data``)."""
    datamanager = config.pipeline.datamanager
    data = getattr(datamanager, "data", None) or getattr(datamanager.dataparser, "data", None)
    return Path(data) if data is not None else None


DEFAULT_COLMAP_PATH = Path("colmap") / "sparse" / "0"
"""nerfstudio's ``colmap --colmap-path`` default (ns-process-data's layout)."""
TOP_LEVEL_COLMAP_PATH = Path("sparse") / "0"
"""The COLMAP / 3DGS / Mip-NeRF 360 layout: ``images/`` and ``sparse/0/`` at the top of the scene folder."""


def _holds_colmap_model(folder: Path) -> bool:
    return any((folder / f"cameras.{ext}").is_file() for ext in ("bin", "txt"))


def find_colmap_model(data: Path) -> Optional[Path]:
    """A folder under ``data`` (at most three levels down) that holds a COLMAP model: the usual
    places first (``colmap/sparse/0``, ``sparse/0``, ``sparse``), then any other; None if there is none."""
    for rel in (DEFAULT_COLMAP_PATH, TOP_LEVEL_COLMAP_PATH, Path("sparse")):
        if _holds_colmap_model(data / rel):
            return data / rel
    for pattern in ("*/cameras.*", "*/*/cameras.*", "*/*/*/cameras.*"):
        for found in sorted(data.glob(pattern)):
            if found.suffix in (".bin", ".txt") and _holds_colmap_model(found.parent):
                return found.parent
    return None


def colmap_command(config, data: Path, model: Optional[Path]) -> str:
    """The ns-train command that trains ``data`` with the COLMAP model in ``model``."""
    method = getattr(config, "method_name", None) or "splat-plus"
    command = f"ns-train {method} --data {shlex.quote(str(data))} colmap"
    if model is not None:
        rel = model.relative_to(data)
        if rel not in (DEFAULT_COLMAP_PATH, TOP_LEVEL_COLMAP_PATH):  # sparse/0 is found by itself
            command += f" --colmap-path {shlex.quote(rel.as_posix())}"
    return command + " (other options before `colmap`)"


def use_top_level_colmap_model(config) -> Optional[str]:
    """``colmap`` with its default ``--colmap-path colmap/sparse/0`` on a scene that has ``sparse/0/`` at
    the top instead (COLMAP's own, 3DGS's and Mip-NeRF 360's layout): point the dataparser there. Called
    before config.yml is written, so that ns-eval and ns-viewer find the same model. Returns the one
    line that says so, or None when nothing changed."""
    parser = config.pipeline.datamanager.dataparser
    data = dataset_path(config)
    if type(parser).__name__ != "ColmapDataParserConfig" or data is None:
        return None
    if Path(parser.colmap_path) != DEFAULT_COLMAP_PATH or (data / DEFAULT_COLMAP_PATH).exists():
        return None
    if not (data / TOP_LEVEL_COLMAP_PATH).is_dir():
        return None
    parser.colmap_path = TOP_LEVEL_COLMAP_PATH
    return (
        f"colmap: no {DEFAULT_COLMAP_PATH.as_posix()}/ in {data}, so the COLMAP model in "
        f"{data / TOP_LEVEL_COLMAP_PATH} is used (as `colmap --colmap-path sparse/0`)"
    )


def _count_images(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


NO_DATASET = "no dataset given: pass --data PATH (a COLMAP, nerfstudio or instant-ngp scene)"


def data_was_given(config) -> bool:
    """Whether ``--data`` was passed: the datamanager's is set, or the dataparser's differs from its default
    (nerfstudio's colmap and nerfstudio-data parsers default to the current folder, blender-data to
    data/blender/lego)."""
    datamanager = config.pipeline.datamanager
    if getattr(datamanager, "data", None) is not None:
        return True
    parser = datamanager.dataparser
    default = next((f.default for f in dataclasses.fields(parser) if f.name == "data"), None)
    if not isinstance(default, (str, Path)) or getattr(parser, "data", None) is None:
        return True
    return Path(parser.data) != Path(default)


def preflight(config) -> None:
    """Raise UserInputError if the dataset the run points to cannot work."""
    try:
        _preflight(config)
    except UserInputError as err:
        data = dataset_path(config)
        if data is None or data_was_given(config):
            raise
        # the message named what was missing in the dataparser's default folder ("no COLMAP model at
        # colmap/sparse/0"), where what is missing is --data
        raise UserInputError(f"{NO_DATASET}; the default, {data.resolve()}, holds no usable scene") from err


def _preflight(config) -> None:
    data = dataset_path(config)
    if data is None:
        raise UserInputError(NO_DATASET)
    if not data.exists():
        raise UserInputError(f"dataset path {data} does not exist: check --data")
    parser = config.pipeline.datamanager.dataparser
    kind = type(parser).__name__
    factor = getattr(parser, "downscale_factor", None)
    if factor is not None and factor < 1:  # else "needs images_0, which has no images", or a ZeroDivisionError
        subcommand = {"ColmapDataParserConfig": "colmap ", "NerfstudioDataParserConfig": "nerfstudio-data "}
        raise UserInputError(
            f"`{subcommand.get(kind, '')}--downscale-factor {factor}`: the factor must be at least 1",
            "pass 1 for the photos as they are, 2 for half their size (images_2/), ..., or leave it out",
        )
    model = config.pipeline.model
    wants_points = getattr(parser, "load_3D_points", False) and not getattr(model, "random_init", False)
    if (
        getattr(model, "random_init", False)
        and getattr(parser, "load_3D_points", False)
        and kind == "ColmapDataParserConfig"
    ):
        colmap_dir = data / parser.colmap_path
        points = colmap_checks.points_file(colmap_dir)
        if points is None or colmap_checks.count_points(points) == 0:
            # nerfstudio's colmap parser reads points3D whenever load_3D_points is on, whatever the model wants
            # (and fails on an empty one with a matrix-shape error)
            parser.load_3D_points = False
    if kind == "ColmapDataParserConfig":
        root = data
        colmap_dir = root / parser.colmap_path
        if not colmap_dir.is_dir():
            found = find_colmap_model(root)
            if found is not None:
                raise UserInputError(
                    f"no COLMAP model at {colmap_dir}, but {found} holds one",
                    f"train with it: {colmap_command(config, root, found)}",
                )
            photos_of = find_colmap_model(root.parent) if root.name.startswith("images") else None
            raise UserInputError(
                f"no COLMAP model at {colmap_dir} (nor in {root / TOP_LEVEL_COLMAP_PATH})",
                colmap_checks.other_layout(root, photos_of)
                or f"make one with `ns-process-data images --data <photos> --output-dir {root}` (it runs COLMAP), "
                f"then: {colmap_command(config, root, None)}",
            )
        check_image_layout(root / parser.images_path, parser.downscale_factor)
        has_points = any((colmap_dir / f"points3D.{ext}").exists() for ext in ("bin", "txt"))
        if wants_points and not has_points:
            raise UserInputError(
                f"the COLMAP model at {colmap_dir} has no points3D.bin/points3D.txt, but SfM initialization "
                "is requested: re-run COLMAP with points, or start from random Gaussians with "
                "--pipeline.model.random-init True (or pass `colmap --load-3D-points False`)"
            )
        points = colmap_checks.points_file(colmap_dir) if has_points else None
        if wants_points and points is not None and colmap_checks.count_points(points) == 0:
            raise UserInputError(
                f"the COLMAP model's {points} holds no points, but SfM initialization is requested",
                "re-run COLMAP's mapper so that it triangulates points, or start from random Gaussians with "
                "--pipeline.model.random-init True (or pass `colmap --load-3D-points False`)",
            )
        # the model files and every photo's header, each problem naming the file (colmap_checks.py)
        colmap_checks.check_colmap_scene(
            colmap_dir,
            root / parser.images_path,
            parser,
            read_points=getattr(parser, "load_3D_points", False),
            batch_job=is_batch_job(),
        )
    elif kind in ("NerfstudioDataParserConfig", "InstantNGPDataParserConfig"):
        transforms = data if data.suffix == ".json" else data / "transforms.json"
        if not transforms.is_file():
            colmap_model = find_colmap_model(data) if data.is_dir() else None
            if colmap_model is not None:
                raise UserInputError(
                    f"no transforms.json at {transforms}, but {data} holds a COLMAP model ({colmap_model})",
                    f"add the `colmap` subcommand after the splat-plus options: {colmap_command(config, data, colmap_model)}",
                )
            raise UserInputError(f"no transforms.json at {transforms}: is --data the scene folder?")
        import json

        try:
            frames = json.loads(transforms.read_text()).get("frames", [])
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{transforms} is not valid JSON ({exc})") from None
        if not frames:
            raise UserInputError(f"{transforms} lists no frames: the scene has no images")
        check_frame_poses(transforms, frames)


def check_frame_poses(transforms: Path, frames: list) -> None:
    """Every frame of a transforms.json has a finite 4x4 (or 3x4) ``transform_matrix``: nerfstudio's
    parsers centre and scale the scene by the mean of all poses, so one NaN pose made every pose and
    SfM point NaN, and the point cloud was blamed for it. The first bad frame is named by its file_path."""
    import numpy as np

    bad = []
    for index, frame in enumerate(frames):
        name = frame.get("file_path", f"number {index}") if isinstance(frame, dict) else f"number {index}"
        matrix = frame.get("transform_matrix") if isinstance(frame, dict) else None
        try:
            pose = np.asarray(matrix, dtype=float)
        except (TypeError, ValueError):
            pose = None
        if pose is None or pose.shape not in ((4, 4), (3, 4)):
            bad.append((name, f"no 4x4 transform_matrix (it has {str(matrix)[:60]})"))
        elif not np.isfinite(pose).all():
            bad.append((name, f"a transform_matrix with {int((~np.isfinite(pose)).sum())} NaN or infinite entries"))
    if bad:
        name, problem = bad[0]
        more = f" (and {len(bad) - 1} more frame(s))" if len(bad) > 1 else ""
        raise UserInputError(
            f"frame {name} in {transforms} has {problem}{more}: one bad pose would turn every pose and point NaN",
            f"fix that frame's transform_matrix in {transforms} (re-run ns-process-data), or remove the frame",
        )


def downscaled_folders(images_dir: Path) -> List[int]:
    """Factors N of the ``<images>_N`` folders beside ``images_dir`` that hold images (``images_2`` -> 2)."""
    parent, name = images_dir.parent, images_dir.name
    if not parent.is_dir():
        return []
    factors = []
    for entry in parent.iterdir():
        match = re.fullmatch(re.escape(name) + r"_(\d+)", entry.name)
        if match and _count_images(entry) > 0:
            factors.append(int(match.group(1)))
    return sorted(factors)


def is_batch_job() -> bool:
    """No terminal to answer a prompt (sbatch, nohup, CI, a subprocess)."""
    try:
        return not sys.stdin.isatty()
    except (ValueError, OSError):
        return True


def check_image_layout(images_dir: Path, downscale_factor: Optional[int]) -> None:
    """Accept every layout nerfstudio's colmap parser reads: ``images/`` and/or ``images_N/``.

    nerfstudio opens ``images/<name>`` to pick a factor when none is given, and asks on the
    terminal whether to create a missing ``images_N/`` (a batch job then hangs or dies): both
    become one message here.
    """
    full = _count_images(images_dir)
    factors = downscaled_folders(images_dir)
    if full == 0 and not factors:
        raise UserInputError(
            f"no images found in {images_dir} (nor in {images_dir.name}_2, _4, ...): the scene needs its photos there",
            f"put the photos the COLMAP model lists into {images_dir} (or pass --data the scene folder that holds them)",
        )
    if downscale_factor is None or downscale_factor == 1:
        if full == 0:
            options = " or ".join(f"`colmap --downscale-factor {f}`" for f in factors)
            raise UserInputError(
                f"{images_dir} has no images, only the downscaled folder(s) "
                + ", ".join(f"{images_dir.name}_{f}/" for f in factors)
                + f": pass {options} to train on them"
            )
        return
    if downscale_factor not in factors and (full == 0 or is_batch_job()):
        have = ", ".join(f"{images_dir.name}_{f}/" for f in factors) or "none"
        fix = f"pass a factor that exists (downscaled folders: {have})"
        if full > 0:
            fix += f", or create {images_dir.name}_{downscale_factor}/ first (run ns-train once from a terminal, which offers it)"
        raise UserInputError(
            f"--downscale-factor {downscale_factor} needs {images_dir.parent / f'{images_dir.name}_{downscale_factor}'}, which has no images: {fix}"
        )


_DATAPARSER_DIRS = ("nerfstudio/data/dataparsers", "nerfstudio/data/utils")


@contextlib.contextmanager
def dataparser_errors() -> Iterator[None]:
    """Errors nerfstudio's dataparsers raise about the data (bare asserts, ValueErrors, missing files)
    become one UserInputError naming what they said; a photo that a dataparser opens (nerfstudio-data and
    blender read their first photo's size) and that is missing or damaged is named as such."""
    try:
        yield
    except UserInputError:
        raise
    except (AssertionError, ValueError, OSError) as exc:  # PIL's UnidentifiedImageError, PyAV's errors among them
        frames = traceback.extract_tb(exc.__traceback__)
        if frames and _in_dataparser(frames[-1].filename):
            raise UserInputError(f"the dataset could not be loaded: {exc or type(exc).__name__}") from None
        photo = photo_opened_by_dataparser(exc)
        if photo is not None:
            raise dataset_checks.unreadable_photo(photo, exc) from None
        if isinstance(exc, FileNotFoundError) and exc.filename and any(_in_dataparser(f.filename) for f in frames):
            raise UserInputError(f"the dataset could not be loaded: {exc.filename} does not exist") from None
        raise


def _in_dataparser(filename: str) -> bool:
    return any(d in filename.replace("\\", "/") for d in _DATAPARSER_DIRS)


def photo_opened_by_dataparser(exc: BaseException) -> Optional[Path]:
    """The photo whose reading raised ``exc`` inside a dataparser: the image path among the arguments and locals of
    the call the dataparser's last frame made (``Image.open(fp)``, ``imageio.imread(uri)``); None if there is none."""
    tb = exc.__traceback__
    callee = None
    while tb is not None:
        if _in_dataparser(tb.tb_frame.f_code.co_filename):
            callee = tb.tb_next.tb_frame if tb.tb_next is not None else None
        tb = tb.tb_next
    if callee is None:
        return None
    for value in callee.f_locals.values():  # arguments first; PIL's open() has replaced its fp by the file by then
        if isinstance(value, (str, Path)) and Path(value).suffix.lower() in IMAGE_SUFFIXES:
            return Path(value)
    return None
