"""Evaluation that never needs more memory than training.

nerfstudio 1.1.5 evaluates with autograd enabled (``VanillaPipeline.get_average_eval_image_metrics``,
``get_eval_image_metrics_and_images``, ``get_eval_loss_dict``) and ``FullImageDatamanager`` puts
every eval image on the device at once (``cached_eval`` with ``cache_images="gpu"``, and
``fixed_indices_eval_dataloader``). Here every evaluation path runs under ``torch.no_grad``, eval
images stay in host memory and move to the device one at a time, metrics come from the held-out
split only (and the split is described), LPIPS is ``None`` when unavailable (never 0), and the
peak device memory of training and of evaluation is tracked separately.

On several ranks each rank renders and scores only its share of the eval images (the ones its
datamanager holds, ``eval_indices``) and the per-image records are gathered, so every rank has the
whole report: one evaluation per run, not W, with the numbers of a one-process evaluation.

Entry points: :func:`evaluate_all_images` (ns-eval and the in-training "all images" evaluation),
:func:`evaluate_one_image` (the in-training single image); the eval images themselves are loaded by
:func:`ns_splat_plus.training.images.load.load_eval_images` (the datamanager's eval cache). Peak memory: :mod:`.memory`; the split: :mod:`.split`; the report: :mod:`.report`.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from ns_splat_plus.evaluation.memory import memory_tracker
from ns_splat_plus.evaluation.report import COMPUTED_ON, EvalReport, scalar_metrics
from ns_splat_plus.evaluation.split import describe_split
from ns_splat_plus.parallel import collectives

# --- eval images: host memory, one at a time to the device -----------------------------------------


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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _limit_to_training_peak(pipeline, tracker) -> None:
    """The device memory evaluation may use, for the model's metrics (row strips, or the host, above
    it): the training peak, the larger of this process's (``tracker``) and the one the loaded
    checkpoint recorded. Under ns-eval this process has not trained: its peak is only the load's."""
    saved = (getattr(pipeline, "run_info", None) or {}).get("train_peak_memory_bytes")
    peaks = [int(peak) for peak in (tracker.train_peak_bytes, saved) if peak]
    pipeline.model.eval_memory_limit_bytes = max(peaks) if peaks else None


def _computed_on(model) -> Dict[str, Any]:
    """``{"computed_on": {"ssim": "whole" | "strips" | "host", ...}}`` of the image just scored, where the
    model's metrics say (``model.metric_places``, set by splat-plus's metrics); nothing otherwise."""
    places = getattr(model, "metric_places", None)
    return {COMPUTED_ON: dict(places)} if places else {}


def _image_metrics(model, outputs, batch) -> Tuple[Dict[str, Optional[float]], Dict[str, torch.Tensor]]:
    metrics, images = model.get_image_metrics_and_images(outputs, batch)
    return {k: (float(v) if isinstance(v, (int, float, torch.Tensor)) else v) for k, v in metrics.items()}, images


def evaluate_all_images(pipeline, output_path: Optional[Path] = None, image_prefix: str = "eval") -> EvalReport:
    """Render and score every image of the eval split, one at a time, without autograd.

    Only one eval image, its render and its metric inputs are on the device at any moment. On W ranks
    every rank must call this (a collective): each scores its share, and the report holds every image.
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
        with (
            tracker.evaluating(),
            torch.no_grad(),
            Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                MofNCompleteColumn(),
                transient=True,
            ) as progress,
        ):
            _limit_to_training_peak(pipeline, tracker)
            indices = _held_eval_indices(datamanager, split["num_images"])
            task = progress.add_task("[green]Evaluating all images...", total=len(indices))
            for index in indices:
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
                        **_computed_on(model),
                    }
                )
                del outputs, images, batch, camera  # free this image before the next one
                progress.advance(task)
    finally:
        pipeline.train(was_training)
    scored = len(per_image)
    per_image = gather_per_image(per_image)
    num_gaussians = getattr(model, "num_points", None)
    return EvalReport(
        scored_here=scored,
        per_image=per_image,
        split=split,
        num_gaussians=int(num_gaussians) if num_gaussians is not None else None,
        memory=tracker.as_dict(),
    )


def _held_eval_indices(datamanager, num_images: int) -> List[int]:
    """The eval images this rank holds (its datamanager's share; every image without one)."""
    held = getattr(datamanager, "eval_indices", None)
    return list(held()) if callable(held) else list(range(num_images))


def gather_per_image(per_image: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every rank's per-image records, in eval-index order (this rank's alone in one process)."""
    gathered = collectives.all_gather_object(per_image)
    return sorted((record for part in gathered for record in part), key=lambda record: record["index"])


def next_eval_index(datamanager) -> int:
    """The next eval image (of this rank's share), drawn as nerfstudio's ``next_eval_image`` does (each once per round)."""
    unseen = datamanager.eval_unseen_cameras
    index = unseen.pop(random.randint(0, len(unseen) - 1))
    if len(unseen) == 0:
        datamanager.eval_unseen_cameras = _held_eval_indices(datamanager, len(datamanager.eval_dataset))
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
        with memory_tracker(device).evaluating() as tracker, torch.no_grad():
            _limit_to_training_peak(pipeline, tracker)
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
