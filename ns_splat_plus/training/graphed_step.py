"""The training step's forward and backward replayed from a CUDA graph (``--cuda-graph True``):
:func:`graphed_step_for`, which the trainer calls once before its loop, and the :class:`GraphedForwardBackward`
it returns.

splat-plus-lite's step is set by the host: about a hundred kernel launches and their Python, against
1.2-2.8 ms of GPU work on plush-dog (``benchmarks/2026-11-29-h200-host-work/``). A CUDA graph launches
the recorded forward (projection, spherical harmonics, tiles, pixels, the loss) and backward at once.
Recording needs a step with no host read and fixed shapes, so the tiles are listed in buffers of a
fixed capacity (:mod:`ns_splat_plus.raster.fixed_capacity_isect`) instead of gsplat's, which reads
their count on the host. Per step:

1. the datamanager's camera and photo, as in the eager step;
2. the previous replay's overflow flag, copied to the host after it: the host waits for that replay
   alone, so it prepares this step while the GPU still runs the last one's update. Tiles that did not
   fit are recorded again, now, with room for 1.5x their count;
3. their view matrix, camera centre, ``K`` and photo copied into the graph's inputs; the replay, and
   its overflow flag queued for the host;
4. the PSNR on logging steps, the optimizer update, the schedulers, all eager, as in
   :func:`~ns_splat_plus.training.step.optimize`.

A replay whose tiles did not fit dropped some entries of its render: the graph then zeroes its
gradients, so the update of that step (rare: one in the 10,000 steps of plush-dog) moves the
Parameters by the optimizer's momentum alone and densification does not count it
(:func:`drop_step_on_overflow`).

The graph is recorded again when what it baked in changes: the Parameters (a refine replaces them),
their gradients (an eager step resets them), the image size or the downscale, the SH degree, the
photo's shape or type, the capacity. Where the graph cannot reproduce the eager step, the trainer
says why once and steps eagerly (:func:`unavailable_reason`); so does a recording that fails.

A recording's backward accumulates into each Parameter's gradient through autograd's per-Parameter
accumulator node, which runs on the stream it was created on (torch >= 2.9 warns of a mismatch). One
created by an earlier, eager step on the default stream, and kept alive by that step's loss or
``model.info``, makes the recording depend on the default stream, which CUDA refuses. So nothing of
an earlier step's autograd graph is kept: the step returns its loss detached, and a recording first
drops ``model.info`` and its own outputs.

The background's random colour is drawn inside the graph, from the device's default generator: a replay
draws at the generator's offset of the moment and moves it on, as an eager step's draw does. A recording
leaves the generator where it found it (:func:`generator_kept`; its unrecorded runs draw too), so a run
with the graph draws the eager run's colours, step for step, and the two differ only by the order of
the backward's atomic additions.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from nerfstudio.utils.rich_utils import CONSOLE

from ns_splat_plus import upstream
from ns_splat_plus.model import cameras as model_cameras
from ns_splat_plus.model.images import TrainingOutputs
from ns_splat_plus.parallel import collectives
from ns_splat_plus.parallel.schedule import cameras_per_step_of
from ns_splat_plus.training.step import detached, optimize, step_schedulers, total_loss
from ns_splat_plus.upstream import TrainerLike

CAPACITY_MARGIN = 1.5
"""Room for this many times the largest tile count seen: cameras of one scene differ in their counts."""
CAPACITY_SLACK = 4096
"""And this many slots more, so that a small scene's first captures do not overflow one by one."""


def drop_step_on_overflow(info: Dict[str, Any], parameters) -> None:
    """Where ``info["isect_overflow"]`` ([] bool) is set, zero this step's gradients and what densification reads.

    The Parameters' gradients, ``means2d``'s ``grad`` and ``absgrad``, and ``radii`` ([C, N] int): a strategy
    counts a step for each Gaussian with a positive radius, so a dropped step kept visible would count a zero
    gradient against its Gaussians and lower their mean (gsplat's default strategy: ``count += 1``,
    ``grad2d += 0``). In-place multiplications, with no host read: recorded in the graph after the backward.
    """
    overflow = info.get("isect_overflow")
    if overflow is None:
        return
    kept = ~overflow
    keep = kept.to(torch.float32)
    means2d = info.get("means2d")
    grads = [p.grad for p in parameters if p.grad is not None]
    grads += [getattr(means2d, name, None) for name in ("grad", "absgrad")]
    for grad in grads:
        if grad is not None:
            grad.mul_(keep)
    radii = info.get("radii")
    if isinstance(radii, torch.Tensor):
        radii.mul_(kept.to(radii.dtype))


@contextlib.contextmanager
def generator_kept(device: torch.device) -> Iterator[None]:
    """The default generator of ``device`` (CUDA or the CPU) set back, after the block, to its state before it:
    the block's random draws leave no trace on the numbers drawn after it."""
    cuda = device.type == "cuda"
    state = torch.cuda.get_rng_state(device) if cuda else torch.get_rng_state()
    try:
        yield
    finally:
        if cuda:
            torch.cuda.set_rng_state(state, device)
        else:
            torch.set_rng_state(state)


def unavailable_reason(trainer: TrainerLike) -> Optional[str]:
    """Why this run's step cannot be replayed from a graph, or None."""
    config = trainer.config
    model = trainer.pipeline.model
    model_config = model.config
    reasons = [
        (not str(trainer.device).startswith("cuda"), "it needs a CUDA GPU"),
        (collectives.get_world_size() > 1, "one process only (the gradient all-reduce starts inside the backward)"),
        (cameras_per_step_of(config.pipeline.datamanager, trainer.world_size) > 1, "one camera per step only"),
        (getattr(model_config, "rasterizer", "auto") == "reference", "it records gsplat's kernels, not the reference"),
        (model_config.camera_optimizer.mode != "off", "the camera optimizer changes the view on the host"),
        (getattr(model_config, "use_bilateral_grid", False), "the bilateral grid indexes by camera on the host"),
        (getattr(model_config, "use_scale_regularization", False), "the scale regulariser runs every 10th step"),
        (_has_masks(trainer), "the dataset's masks take another loss"),
        (trainer.mixed_precision, "no mixed precision"),
        (any(steps != 1 for steps in trainer.gradient_accumulation_steps.values()), "no gradient accumulation"),
        (config.log_gradients, "--log-gradients reads every gradient's norm"),
    ]
    return next((why for bad, why in reasons if bad), None)


def _has_masks(trainer: TrainerLike) -> bool:
    dataset = trainer.pipeline.datamanager.train_dataset
    return dataset is not None and upstream.dataparser_outputs(dataset).mask_filenames is not None


def graphed_step_for(trainer: TrainerLike) -> Optional["GraphedForwardBackward"]:
    """The trainer's graphed step where ``--cuda-graph`` asks for it and it applies; else None (and one
    console line saying why not)."""
    if not getattr(trainer.config, "cuda_graph", False):
        return None
    reason = unavailable_reason(trainer)
    if reason is not None:
        if collectives.is_main_process():
            CONSOLE.print(f"--cuda-graph: the step runs eagerly: {reason}")
        return None
    model = trainer.pipeline.model
    fused_ssim = model.loss_ssim.backend(torch.device(trainer.device)) == "fused-ssim"
    if fused_ssim and not model.ssim_in_fused_loss() and collectives.is_main_process():
        CONSOLE.print(
            "--cuda-graph: the loss's SSIM runs the fused Triton kernels, not fused-ssim: fused-ssim launches its "
            "kernels on CUDA's legacy stream, which a CUDA graph does not record",
            soft_wrap=True,
        )
    if getattr(model, "loss_graphs", None) is not None:  # the whole step is recorded, its loss with it: the loss's
        model.loss_graphs = None  # own graphs (the warmup's) would only hold memory
    return GraphedForwardBackward(trainer)


class GraphedForwardBackward:
    """One training step with its forward and backward replayed from a CUDA graph (see the module).

    Call it as the trainer's ``train_iteration``: ``(loss, loss_dict, metrics_dict)`` of ``step``, detached.
    ``recordings`` counts the recordings by why they were made (:data:`RECORDING_REASONS`);
    ``captures`` is their sum; ``overflows`` counts the replays whose tiles did not fit. ``failure``
    names a recording that failed, after which every step is eager.
    """

    def __init__(self, trainer: TrainerLike) -> None:
        self.trainer = trainer
        self.capacity = 0
        self.largest_count = 0
        self.recordings: Dict[str, int] = collections.Counter()
        self.failure: Optional[str] = None
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self._key: Optional[Tuple[Any, ...]] = None
        self._params: List[torch.nn.Parameter] = []
        self._grads: List[Optional[torch.Tensor]] = []
        self._storages: List[int] = []  # the Parameters' data pointers: ``p.data = ...`` keeps p, not its memory
        self._inputs: Dict[str, torch.Tensor] = {}
        self._camera: Any = None
        self._batch: Dict[str, Any] = {}
        self._outputs: Any = None
        self._loss: Optional[torch.Tensor] = None
        self._loss_dict: Dict[str, torch.Tensor] = {}
        self._info: Dict[str, Any] = {}
        self._eager_sums: Optional[torch.Tensor] = None
        self.overflows = 0
        self._overflow_read: Optional[Tuple[torch.cuda.Event, torch.Tensor, torch.Tensor]] = None  # pinned
        self._overflow_pending = False  # a replay's flag queued and not yet read

    @property
    def captures(self) -> int:
        return sum(self.recordings.values())

    def summary(self) -> str:
        """One line for the end of training: how often the step was recorded, and why."""
        if self.failure is not None:
            return f"--cuda-graph: {self.failure}"
        reasons = ", ".join(f"{self.recordings[why]} {why}" for why in RECORDING_REASONS if self.recordings[why])
        dropped = f"; {self.overflows} replays' tiles did not fit (no gradient)" if self.overflows else ""
        return (
            f"--cuda-graph: {self.captures} recordings of the step ({reasons}){dropped}; "
            f"{self.capacity:,} tile slots at the end"
        )

    # --- the step --------------------------------------------------------------------------------

    def __call__(self, step: int) -> Tuple[torch.Tensor, Dict[str, Any], Dict[str, Any]]:
        trainer = self.trainer
        if self.failure is not None:
            return optimize(trainer, step)
        model = trainer.pipeline.model
        camera, batch = trainer.pipeline.datamanager.next_train(step)
        viewmat, camtoworlds, K, width, height = self._camera_inputs(camera)
        overflowed = self._previous_replay_overflowed()
        why = self._why_record(self._baked_in(step, width, height, batch["image"]))
        why = "tiles" if why is None and overflowed else why
        if why is not None and not self._record(step, camera, batch, why):
            return optimize(trainer, step)  # the datamanager gives the next camera: this step's is skipped
        self.replay(viewmat, camtoworlds, K, batch["image"])
        self._queue_overflow_read()
        if isinstance(self._outputs, TrainingOutputs):  # its composite, made and kept by an earlier step's reads
            self._outputs.pop("rgb", None)
        if self._eager_sums is not None:  # the first replay of a recording, on the recording's camera
            mismatch = replay_mismatch(self._eager_sums, render_sums(self._outputs))
            self._eager_sums = None
            if mismatch is None:
                mismatch = loss_mismatch(self._eager_loss(), self._loss)
                what = "computed another loss than its own render and photo give eagerly"
            else:
                what = "rendered other pixels than the same step run eagerly"
            if mismatch is not None:
                self._give_up(f"the replayed step {what} at step {step} ({mismatch})")
                return optimize(trainer, step)  # its gradients replace the replay's; nothing was updated
        model.info = self._info  # an evaluation or viewer render between steps replaced it
        metrics_dict = model.get_metrics_dict(self._outputs, self._batch)
        assert self._loss is not None
        trainer.optimizers.optimizer_scaler_step_some(trainer.grad_scaler, list(trainer.optimizers.parameters))
        step_schedulers(trainer, step)
        # detached: a caller that keeps them would keep this recording's autograd graph (see the module)
        return self._loss.detach(), detached(self._loss_dict), detached(metrics_dict)

    def _eager_loss(self) -> torch.Tensor:
        """[] the replay's losses summed again outside the graph, from its own render, background and photo: a loss
        kernel that the recording did not capture (one launched on another stream) left the replay's loss stale.
        Without autograd, as an evaluation's loss: no memory beyond the step's (the fused loss keeps no
        derivatives), nothing kept."""
        model = self.trainer.pipeline.model
        with torch.no_grad():
            return sum(model.get_loss_dict(self._outputs, self._batch, {}).values())  # type: ignore[return-value]

    def replay(self, viewmat: torch.Tensor, camtoworlds: torch.Tensor, K: torch.Tensor, image: torch.Tensor) -> None:
        """Queue the recorded forward and backward of the camera (``viewmat`` [1, 4, 4], its inverse
        ``camtoworlds``, ``K`` [1, 3, 3]) and its photo ``image`` [H, W, C]: the gradients and
        ``model.info`` of this step, zero gradients where ``info["isect_overflow"]`` says the tiles did not fit."""
        self._inputs["viewmat"].copy_(viewmat)
        self._inputs["camtoworlds"].copy_(camtoworlds)
        self._inputs["K"].copy_(K)
        self._inputs["image"].copy_(image)
        assert self.graph is not None
        self.graph.replay()

    def _queue_overflow_read(self) -> None:
        """Copy the replay's overflow flag and tile count to the host behind it, for the next step to read."""
        if self._overflow_read is None:
            event = torch.cuda.Event()
            flag = torch.zeros((), dtype=torch.bool, pin_memory=True)
            count = torch.zeros((), dtype=torch.int64, pin_memory=True)
        else:
            event, flag, count = self._overflow_read
        flag.copy_(self._info["isect_overflow"], non_blocking=True)
        count.copy_(self._info["isect_count"], non_blocking=True)
        event.record()
        self._overflow_read = (event, flag, count)
        self._overflow_pending = True

    def _previous_replay_overflowed(self) -> bool:
        """Whether the last replay's tiles did not fit; waits for that replay only (see the module)."""
        if not self._overflow_pending or self._overflow_read is None:
            return False
        event, flag, count = self._overflow_read
        self._overflow_pending = False
        event.synchronize()
        if not bool(flag):
            return False
        self.overflows += 1
        self.largest_count = max(self.largest_count, int(count))
        return True

    # --- recording -------------------------------------------------------------------------------

    def _camera_inputs(self, camera) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int]:
        """The camera's view matrix, camera-to-world, K and render size at this step's downscale (from its
        render cache: the same tensors the eager step renders from)."""
        model = self.trainer.pipeline.model
        viewmat, camtoworlds = model_cameras.view_matrices(camera)
        K, width, height = model_cameras.camera_intrinsics(camera, 1.0 / upstream.downscale_factor(model))
        return viewmat, camtoworlds, K, width, height

    def _baked_in(self, step: int, width: int, height: int, image: torch.Tensor) -> Tuple[Any, ...]:
        """What the recording depends on, besides the Parameters and their gradients."""
        model = self.trainer.pipeline.model
        sh_degree = min(step // model.config.sh_degree_interval, model.config.sh_degree)
        return (width, height, upstream.downscale_factor(model), sh_degree, tuple(image.shape), image.dtype,
                self.capacity, model.training)  # fmt: skip

    def _why_record(self, baked_in: Tuple[Any, ...]) -> Optional[str]:
        """Why the step must be recorded (again), one of :data:`RECORDING_REASONS`; None to replay."""
        if self.graph is None or self._key is None:
            return "first"
        params = [p for p in self.trainer.pipeline.model.parameters() if p.requires_grad]
        if len(params) != len(self._params) or any(
            p is not q or p.data_ptr() != ptr for p, q, ptr in zip(params, self._params, self._storages)
        ):
            return "new Parameters"
        if any(p.grad is not g for p, g in zip(params, self._grads)):
            return "gradients reset"
        return next((name for name, old, new in zip(_BAKED_IN_NAMES, self._key, baked_in) if old != new), None)

    def _forward_backward(self, step: int) -> None:
        model = self.trainer.pipeline.model
        self._outputs = model(self._camera)
        self._loss_dict = model.get_loss_dict(self._outputs, self._batch, {})
        self._loss = total_loss(self._loss_dict, step)  # the recording camera sees no Gaussian: as eagerly
        self._loss.backward()
        self._info = model.info
        drop_step_on_overflow(self._info, model.parameters())  # recorded after the backward (see the module)

    def _run_unrecorded(self, params: List[torch.nn.Parameter], step: int) -> None:
        """The forward and backward once, on a side stream (lazy initialisations happen outside the
        recording, as torch's CUDA-graph recipe asks); the gradients are dropped after."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for p in params:
                p.grad = None
            self._forward_backward(step)
        torch.cuda.current_stream().wait_stream(side)
        for p in params:
            p.grad = None

    def _drop_autograd_graphs(self) -> None:
        """Release every autograd graph this step and the model hold (see the module: a recording
        needs its own accumulator nodes); the previous recording's memory goes with it."""
        self.graph = self._outputs = self._loss = None
        self._loss_dict, self._info = {}, {}
        self.trainer.pipeline.model.info = {}

    def _record(self, step: int, camera, batch, why: str) -> bool:
        """Record the step; False, with one console line and every later step eager, where CUDA refuses."""
        try:
            self._capture(step, camera, batch)
        except (RuntimeError, torch.AcceleratorError) as err:
            if not _is_capture_error(err):
                raise
            torch.cuda.synchronize()
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            self._give_up(f"recording the step failed at step {step} ({first})")
            return False
        self.recordings[why] += 1
        return True

    def _give_up(self, why: str) -> None:
        """Step eagerly from now on, saying ``why`` once; the recording and its memory go."""
        self._drop_autograd_graphs()
        self._eager_sums = None
        self.failure = f"{why}; the steps from it on ran eagerly"
        if collectives.is_main_process():
            CONSOLE.print(f"--cuda-graph: {self.failure}")

    def _capture(self, step: int, camera, batch) -> None:
        # the unrecorded runs draw backgrounds: without this, every recording would shift the run's colours by one
        with generator_kept(torch.device(self.trainer.device)):
            self._capture_with_generator(step, camera, batch)

    def _capture_with_generator(self, step: int, camera, batch) -> None:
        model = self.trainer.pipeline.model
        # the loss's SSIM in kernels a graph records, in every step from here, eager ones too: the unrecorded run
        # below compiles and loads them before the recording (fused-ssim's launch on the legacy stream)
        model.loss_ssim.recordable = True
        viewmat, camtoworlds, K, width, height = self._camera_inputs(camera)
        self._drop_autograd_graphs()
        self._inputs = {"viewmat": viewmat.clone(), "camtoworlds": camtoworlds.clone(), "K": K.clone(),
                        "image": batch["image"].clone()}  # fmt: skip
        # a camera whose render cache holds the graph's inputs: the model renders from them
        static = camera[0:1]
        static.metadata = dict(camera.metadata or {})
        static.metadata[model_cameras.RENDER_CACHE] = {
            "viewmat": self._inputs["viewmat"],
            "camtoworlds": self._inputs["camtoworlds"],
            ("intrinsics", 1.0 / upstream.downscale_factor(model)): (self._inputs["K"], width, height),
        }
        self._camera = static
        self._batch = dict(batch, image=self._inputs["image"])
        params = [p for p in model.parameters() if p.requires_grad]
        self.capacity = max(self.capacity, int(self.largest_count * CAPACITY_MARGIN) + CAPACITY_SLACK, 1)
        model.isect_capacity = self.capacity
        try:
            self._run_unrecorded(params, step)
            count = int(self._info["isect_count"])  # this camera's count, read once per recording
            if count > self.capacity:
                self.largest_count = max(self.largest_count, count)
                self.capacity = max(int(count * CAPACITY_MARGIN) + CAPACITY_SLACK, 1)
                model.isect_capacity = self.capacity
                self._drop_autograd_graphs()
                self._run_unrecorded(params, step)
            self._eager_sums = render_sums(self._outputs)  # what the first replay, on this camera, must render
            self._drop_autograd_graphs()
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.current_stream()
            try:
                # thread_local: the viewer's thread may copy a finished render while this one records
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    self._forward_backward(step)
            finally:
                # torch's graph context leaves its recording stream current where the recording fails
                # (its __exit__ returns at the failed capture_end before restoring the stream): the eager
                # steps after would then race gsplat's kernels that launch on the legacy default stream
                torch.cuda.set_stream(stream)
        finally:
            model.isect_capacity = None  # eager renders (evaluation, the viewer, warmup) list tiles as gsplat does
        self.graph = graph
        self._params = params
        self._storages = [p.data_ptr() for p in params]
        self._grads = [p.grad for p in params]
        self._key = self._baked_in(step, width, height, batch["image"])


RECORDING_REASONS = ("first", "new Parameters", "gradients reset", "image size", "downscale", "SH degree", "photo shape",
                     "photo type", "capacity", "train mode", "tiles")  # fmt: skip
"""Why the step was recorded: the first step; new Parameters or new memory under them (a refine, an opacity
reset, a restored snapshot); gradients an eager step reset; a change of what
:meth:`GraphedForwardBackward._baked_in` lists; tiles that did not fit the capacity."""
_BAKED_IN_NAMES = ("image size", "image size", "downscale", "SH degree", "photo shape", "photo type", "capacity",
                   "train mode")  # fmt: skip


def _is_capture_error(err: BaseException) -> bool:
    """A CUDA error of stream capture (an operation CUDA does not allow while recording), not another failure."""
    return "captur" in str(err).lower()  # "... during capture", "... a capturing stream", cudaErrorStreamCapture*


REPLAY_TOLERANCE = 1e-4
"""Relative difference allowed between a replay's render sums and the eager run's: the same kernels on the same
inputs (the forward has no atomics), so only the float64 sums' order of additions differs."""


def render_sums(outputs: Dict[str, Any]) -> torch.Tensor:
    """[2] float64: the sums of a training render's colours and alphas (before the background, which a replay draws
    at random again): what :func:`replay_mismatch` compares."""
    return torch.stack(
        [
            outputs["render_colors"].detach().sum(dtype=torch.float64),
            outputs["render_alphas"].detach().sum(dtype=torch.float64),
        ]
    )


def loss_mismatch(eager: torch.Tensor, replayed: Optional[torch.Tensor]) -> Optional[str]:
    """None where the replayed loss matches the loss computed eagerly from the replay's render within
    :data:`REPLAY_TOLERANCE`; else both, for the console (one host read)."""
    assert replayed is not None
    want, got = torch.stack((eager.detach().double(), replayed.detach().double())).tolist()
    if abs(got - want) <= REPLAY_TOLERANCE * max(abs(want), 1e-12):  # NaN counts as off
        return None
    return f"loss {got:.6g} against {want:.6g}"


def replay_mismatch(eager: torch.Tensor, replayed: torch.Tensor) -> Optional[str]:
    """None where the replayed render sums (:func:`render_sums`) match the eager run's within
    :data:`REPLAY_TOLERANCE`; else what differs, for the console (one host read)."""
    (eager_colors, eager_alphas), (colors, alphas) = eager.tolist(), replayed.tolist()
    pairs = (("colours", eager_colors, colors), ("alphas", eager_alphas, alphas))
    off = [
        f"{name} summed {got:.6g} against {want:.6g}"
        for name, want, got in pairs
        if not abs(got - want) <= REPLAY_TOLERANCE * max(abs(want), 1e-12)  # NaN counts as off
    ]
    return "; ".join(off) if off else None
