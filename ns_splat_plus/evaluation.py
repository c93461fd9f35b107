"""Evaluation that never needs more memory than training.

nerfstudio 1.1.5 evaluates with autograd enabled (``VanillaPipeline.get_average_eval_image_metrics``,
``get_eval_image_metrics_and_images``, ``get_eval_loss_dict``) and ``FullImageDatamanager`` puts
every eval image on the device at once (``cached_eval`` with ``cache_images="gpu"``, and
``fixed_indices_eval_dataloader``). Here every evaluation path runs under ``torch.no_grad``, eval
images stay in host memory and move to the device one at a time, metrics come from the held-out
split only (and the split is described), LPIPS is ``None`` when unavailable (never 0), and the
peak device memory of training and of evaluation is tracked separately.

Entry points: :func:`evaluate_all_images` (ns-eval and the in-training "all images" evaluation),
:func:`evaluate_one_image` (the in-training single image), :func:`memory_tracker`,
:func:`describe_split`, :func:`load_eval_images_on_host` (the datamanager's eval cache).
"""

from __future__ import annotations

import math
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from nerfstudio.utils import writer

# Metrics nerfstudio's ns-eval reports (mean and, with get_std, <name>_std), in its order.
NS_EVAL_METRICS = ("psnr", "ssim", "lpips", "num_rays_per_sec", "fps")
MIB = 1024**2


# --- eval images: host memory, one at a time to the device -----------------------------------------


def load_eval_images_on_host(datamanager) -> List[Dict[str, torch.Tensor]]:
    """The eval images, undistorted and cached in host memory (pinned when CUDA is available).

    Replaces ``FullImageDatamanager.cached_eval``, which with ``cache_images="gpu"`` keeps every eval
    image on the device for the rest of the run. Undistortion rewrites the eval cameras' intrinsics,
    so this must run exactly once per datamanager (it backs a cached property).
    """
    from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager

    train_cameras = datamanager.__dict__.get("train_cameras")  # _load_images overwrites it
    # "cpu" pins memory, which needs a CUDA driver; on a machine without one "gpu" with a CPU
    # datamanager device is a plain host cache.
    host_mode = "cpu" if torch.cuda.is_available() else "gpu"
    if host_mode == "gpu" and torch.device(datamanager.device).type != "cpu":
        host_mode = "cpu"
    images = FullImageDatamanager._load_images(datamanager, "eval", cache_images_device=host_mode)
    if train_cameras is not None:
        datamanager.train_cameras = train_cameras
    return images


def eval_camera_and_batch(datamanager, index: int, device: torch.device) -> Tuple[Any, Dict[str, Any]]:
    """Eval camera ``index`` and its batch, with only this image's tensors moved to ``device``."""
    cameras = datamanager.eval_dataset.cameras
    if len(cameras.shape) != 1:
        raise ValueError("splat-plus evaluation assumes one batch dimension of eval cameras")
    batch = dict(datamanager.cached_eval[index])  # shallow copy: never mutate the cache
    for key in ("image", "mask"):
        if isinstance(batch.get(key), torch.Tensor):
            batch[key] = batch[key].to(device, non_blocking=True)
    camera = cameras[index : index + 1].to(device)
    return camera, batch


# --- the split --------------------------------------------------------------------------------------


def describe_split(datamanager) -> Dict[str, Any]:
    """How the evaluated images were chosen: split name, counts, dataparser eval settings, file names.

    ``held_out`` is False when an eval image is also a training image (``eval_mode all``), in
    which case the metrics are not held-out metrics.
    """
    dataparser_config = datamanager.config.dataparser
    eval_outputs = datamanager.eval_dataset._dataparser_outputs
    train_outputs = datamanager.train_dataset._dataparser_outputs
    eval_names = [Path(p).name for p in eval_outputs.image_filenames]
    train_paths = {str(p) for p in train_outputs.image_filenames}
    overlap = sum(1 for p in eval_outputs.image_filenames if str(p) in train_paths)
    eval_mode = getattr(dataparser_config, "eval_mode", None)
    how = {"eval_mode": eval_mode}
    if eval_mode == "interval":
        how["eval_interval"] = getattr(dataparser_config, "eval_interval", None)
    elif eval_mode == "fraction":
        how["train_split_fraction"] = getattr(dataparser_config, "train_split_fraction", None)
    return {
        "split": getattr(datamanager, "test_split", None),
        "dataparser": type(dataparser_config).__name__,
        **how,
        "num_images": len(eval_names),
        "num_train_images": len(train_outputs.image_filenames),
        "held_out": overlap == 0,
        "num_eval_images_also_in_train": overlap,
        "image_filenames": eval_names,
    }


def split_summary(split: Dict[str, Any]) -> str:
    """One line for the console, e.g. '7 held-out images (val split, eval_mode interval, every 8th)'."""
    how = f"eval_mode {split['eval_mode']}"
    if split.get("eval_interval") is not None:
        how += f", every {split['eval_interval']}th"
    if split.get("train_split_fraction") is not None:
        how += f", train fraction {split['train_split_fraction']}"
    kind = "held-out" if split["held_out"] else "NOT held-out (also used for training)"
    return f"{split['num_images']} {kind} images ({split['split']} split, {how}; {split['num_train_images']} train)"


# --- peak memory ------------------------------------------------------------------------------------


class PeakMemoryTracker:
    """Peak device memory of training and of evaluation, kept apart.

    torch keeps one peak counter per device. Entering evaluation folds the counter into the
    training peak and resets it; leaving it reads the evaluation peak; the first training
    iteration after an evaluation resets it again (``start_training_window``, a pipeline
    callback). Not resetting on the way out leaves the eval peak readable by an outer harness
    that reads the counter after ``eval_iteration`` (scripts/measure_eval_memory.py, bench_probe).
    Nested ``evaluating()`` blocks count once, at the outermost level. Off the GPU all values are None.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.enabled = device.type == "cuda" and torch.cuda.is_available()
        self.train_peak_bytes: Optional[int] = None
        self.eval_peak_bytes: Optional[int] = None  # max over all evaluations
        self.last_eval_peak_bytes: Optional[int] = None
        self.num_evaluations = 0
        self._depth = 0
        self._counter_has_eval = False  # the counter still holds an evaluation's peak

    def observe_training(self) -> Optional[int]:
        """Fold the counter into the training peak, unless it holds an evaluation's peak."""
        if not self.enabled or self._depth > 0 or self._counter_has_eval:
            return self.train_peak_bytes
        peak = torch.cuda.max_memory_allocated(self.device)
        self.train_peak_bytes = max(self.train_peak_bytes or 0, peak)
        return self.train_peak_bytes

    def start_training_window(self, step: Optional[int] = None) -> None:
        """Before a training iteration: drop an evaluation's peak from the counter (cheap otherwise)."""
        if self._counter_has_eval and self._depth == 0:
            torch.cuda.reset_peak_memory_stats(self.device)
            self._counter_has_eval = False

    @contextmanager
    def evaluating(self) -> Iterator["PeakMemoryTracker"]:
        if not self.enabled or self._depth > 0:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        torch.cuda.synchronize(self.device)
        self.observe_training()
        torch.cuda.reset_peak_memory_stats(self.device)
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            self.last_eval_peak_bytes = peak
            self.eval_peak_bytes = max(self.eval_peak_bytes or 0, peak)
            self.num_evaluations += 1
            self._counter_has_eval = True

    def as_dict(self, train_peak_bytes: Optional[int] = None) -> Dict[str, Any]:
        """JSON-ready summary; ``train_peak_bytes`` overrides (e.g. the value a checkpoint recorded)."""
        train = train_peak_bytes if train_peak_bytes is not None else self.train_peak_bytes
        return {
            "device": str(self.device),
            "train_peak_bytes": train,
            "eval_peak_bytes": self.eval_peak_bytes,
            "train_peak_mib": round(train / MIB, 1) if train is not None else None,
            "eval_peak_mib": round(self.eval_peak_bytes / MIB, 1) if self.eval_peak_bytes is not None else None,
            "eval_peak_le_train_peak": (self.eval_peak_bytes <= train)
            if (train is not None and self.eval_peak_bytes is not None)
            else None,
            "num_evaluations": self.num_evaluations,
            "measure": "torch.cuda.max_memory_allocated, reset at every train/eval boundary" if self.enabled else None,
        }

    def log(self, step: int) -> None:
        """Write both peaks through nerfstudio's writer (tensorboard / wandb / comet)."""
        if not self.enabled:
            return
        if self.train_peak_bytes is not None:
            writer.put_scalar(name="Memory/train_peak_MiB", scalar=self.train_peak_bytes / MIB, step=step)
        if self.last_eval_peak_bytes is not None:
            writer.put_scalar(name="Memory/eval_peak_MiB", scalar=self.last_eval_peak_bytes / MIB, step=step)


_TRACKERS: Dict[str, PeakMemoryTracker] = {}


def memory_tracker(device) -> PeakMemoryTracker:
    """The tracker of ``device`` (one per device, as torch's peak counter is)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = str(device)
    if key not in _TRACKERS:
        _TRACKERS[key] = PeakMemoryTracker(device)
    return _TRACKERS[key]


# --- metrics ----------------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mean_and_std(values: Sequence[Optional[float]]) -> Tuple[Optional[float], Optional[float]]:
    """Mean and (unbiased, as nerfstudio's torch.std_mean) std of the non-None values.

    None when no value is available (LPIPS offline) or, for the std, fewer than two values:
    never 0 and never NaN (NaN is not valid JSON).
    """
    present = [float(v) for v in values if v is not None]
    if not present:
        return None, None
    mean = sum(present) / len(present)
    if len(present) < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in present) / (len(present) - 1)
    return mean, math.sqrt(var)


def scalar_metrics(metrics: Dict[str, Any]) -> Dict[str, float]:
    """The entries a writer can log: numbers only (LPIPS None is left out, not logged as 0)."""
    out = {}
    for key, value in metrics.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
            out[key] = float(value)
    return out


@dataclass
class EvalReport:
    """Per-image metrics of one pass over the eval split, and what they were computed on."""

    per_image: List[Dict[str, Any]]
    split: Dict[str, Any]
    num_gaussians: Optional[int]
    memory: Dict[str, Any] = field(default_factory=dict)

    def averages(self, get_std: bool) -> Dict[str, Optional[float]]:
        """nerfstudio's shape: psnr, ssim, lpips, num_rays_per_sec, fps (+ ``_std`` with get_std)."""
        keys = [k for k in NS_EVAL_METRICS if any(k in m for m in self.per_image)]
        keys += sorted({k for m in self.per_image for k in m} - set(keys) - {"image", "index"})
        out: Dict[str, Optional[float]] = {}
        for key in keys:
            mean, std = mean_and_std([m.get(key) for m in self.per_image])
            out[key] = mean
            if get_std:
                out[f"{key}_std"] = std
        return out

    def ns_eval_results(self) -> Dict[str, Any]:
        """``results`` of ns-eval's JSON: nerfstudio's keys, then what splat-plus adds."""
        return {
            **self.averages(get_std=True),
            "lpips_available": any(m.get("lpips") is not None for m in self.per_image),
            "num_images": len(self.per_image),
            "num_gaussians": self.num_gaussians,
            "split": self.split,
            "memory": self.memory,
            "per_image": self.per_image,
        }


def _image_metrics(model, outputs, batch) -> Tuple[Dict[str, Optional[float]], Dict[str, torch.Tensor]]:
    metrics, images = model.get_image_metrics_and_images(outputs, batch)
    return {k: (float(v) if isinstance(v, (int, float, torch.Tensor)) else v) for k, v in metrics.items()}, images


def evaluate_all_images(pipeline, output_path: Optional[Path] = None, image_prefix: str = "eval") -> EvalReport:
    """Render and score every image of the eval split, one at a time, without autograd.

    Only one eval image, its render and its metric inputs are on the device at any moment.
    ``output_path``: also save each image of ``get_image_metrics_and_images`` as PNG (as ns-eval's
    ``--render-output-path`` does).
    """
    import torchvision.utils as vutils
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    datamanager = pipeline.datamanager
    model = pipeline.model
    device = torch.device(pipeline.device)
    split = describe_split(datamanager)
    tracker = memory_tracker(device)
    if output_path is not None:
        output_path.mkdir(parents=True, exist_ok=True)
    was_training = pipeline.training
    per_image: List[Dict[str, Any]] = []
    pipeline.eval()
    try:
        with tracker.evaluating(), torch.no_grad(), Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            MofNCompleteColumn(),
            transient=True,
        ) as progress:
            task = progress.add_task("[green]Evaluating all images...", total=split["num_images"])
            for index in range(split["num_images"]):
                camera, batch = eval_camera_and_batch(datamanager, index, device)
                _sync(device)
                start = time.perf_counter()
                outputs = model.get_outputs_for_camera(camera=camera)
                metrics, images = _image_metrics(model, outputs, batch)
                _sync(device)
                # render + metrics, as nerfstudio times it (so fps compares with splatfacto's ns-eval)
                seconds = max(time.perf_counter() - start, 1e-9)
                num_rays = int(camera.height.item() * camera.width.item())
                if output_path is not None:
                    for key, image in images.items():  # [H, W, C]
                        vutils.save_image(
                            image.permute(2, 0, 1).cpu(), output_path / f"{image_prefix}_{key}_{index:04d}.png"
                        )
                per_image.append(
                    {
                        "index": index,
                        "image": split["image_filenames"][index],
                        **metrics,
                        "num_rays_per_sec": num_rays / seconds,
                        "fps": 1.0 / seconds,
                    }
                )
                del outputs, images, batch, camera  # free this image before the next one
                progress.advance(task)
    finally:
        pipeline.train(was_training)
    num_gaussians = getattr(model, "num_points", None)
    return EvalReport(
        per_image=per_image,
        split=split,
        num_gaussians=int(num_gaussians) if num_gaussians is not None else None,
        memory=tracker.as_dict(),
    )


def next_eval_index(datamanager) -> int:
    """The next eval image, drawn as nerfstudio's ``next_eval_image`` does (each once per round)."""
    unseen = datamanager.eval_unseen_cameras
    index = unseen.pop(random.randint(0, len(unseen) - 1))
    if len(unseen) == 0:
        datamanager.eval_unseen_cameras = list(range(len(datamanager.eval_dataset)))
    return index


def evaluate_one_image(pipeline, with_loss: bool = False):
    """One random eval image, without autograd. Returns (outputs, camera, batch, metrics, images, losses).

    ``metrics`` hold only numbers (LPIPS left out when unavailable) so nerfstudio's writer can log them.
    """
    datamanager = pipeline.datamanager
    model = pipeline.model
    device = torch.device(pipeline.device)
    was_training = pipeline.training
    pipeline.eval()
    try:
        with memory_tracker(device).evaluating(), torch.no_grad():
            camera, batch = eval_camera_and_batch(datamanager, next_eval_index(datamanager), device)
            if with_loss:
                outputs = model(camera)
                metrics = model.get_metrics_dict(outputs, batch)
                losses = model.get_loss_dict(outputs, batch, metrics)
                return outputs, camera, batch, scalar_metrics(metrics), {}, losses
            outputs = model.get_outputs_for_camera(camera)
            metrics, images = _image_metrics(model, outputs, batch)
            metrics = scalar_metrics(metrics)
            metrics["num_rays"] = int(camera.height.item() * camera.width.item() * camera.size)
            return outputs, camera, batch, metrics, images, {}
    finally:
        pipeline.train(was_training)

