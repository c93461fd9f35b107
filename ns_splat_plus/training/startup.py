"""The start-up report: seconds from process start to the warmup before the first training step
(:func:`report_startup`; the warmup reports its own seconds next)."""

from __future__ import annotations

import time
from typing import Optional

from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import upstream
from ns_splat_plus.parallel import collectives
from ns_splat_plus.upstream import TrainerLike

STARTUP_SCALAR = "Start-up time to warmup (s)"


def process_age_seconds() -> Optional[float]:
    """Seconds since this process started (psutil), None if unknown."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except Exception:  # psutil missing or no permission: the report then counts from the trainer
        return None


def report_startup(trainer: TrainerLike) -> float:
    """Print and write (at the start step) the seconds from process start to the warmup: with several
    ranks, the slowest rank's, on rank 0 (a collective: every rank calls it)."""
    from nerfstudio.utils import writer

    datamanager = trainer.pipeline.datamanager
    if hasattr(type(datamanager), "cached_train"):
        datamanager.cached_train  # noqa: B018 (lazy upstream: the images are part of the start-up)
    seconds = process_age_seconds()
    if seconds is None:
        seconds = time.perf_counter() - getattr(trainer, "_created_at", time.perf_counter())
    images = getattr(datamanager, "_train_images_seconds", None)
    parts, images_of = [], "train images"
    if collectives.is_distributed():  # one line per run: the slowest rank's, once every rank is here
        every_rank = collectives.all_gather_object(float(seconds))
        seconds = max(every_rank)
        parts.append(f"the slowest of {len(every_rank)} ranks; the fastest {min(every_rank):.1f} s")
        images_of = "rank 0's train images"
    if images is not None:
        parts.append(f"{images_of}: {images:.1f} s")
    if collectives.is_main_process():
        detail = f" ({'; '.join(parts)})" if parts else ""
        CONSOLE.print(
            f"Start-up: {seconds:.1f} s from process start to the warmup before the first training step{detail}",
            soft_wrap=True,
        )
    writer.put_scalar(name=STARTUP_SCALAR, scalar=seconds, step=upstream.start_step(trainer))
    return seconds
