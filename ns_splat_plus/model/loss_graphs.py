"""The photometric loss of an eager CUDA step replayed from CUDA graphs: :class:`LossGraphs`.

Why: in an eager training step the loss (the background composite, the uint8 conversion, L1, the SSIM's
kernels, the weighting) is some twenty operators forward and as many backward, each a Python dispatch and
a kernel launch. splat-plus's eager step is set by the host, not the GPU (about 5 ms of host work per
step against 3.9 ms of GPU work on plush-dog, 1.0 ms of it in the loss's forward alone:
benchmarks/2026-12-02-h200-splat-plus-graph-against-eager-divergence-and-host-sections/). The loss's
shapes depend only on the image size, and its kernels read nothing back to the host and add with no
atomics, so its forward and backward are recorded once per image size (:class:`Recording`) and replayed:
the same kernels on the same inputs, so the same loss and gradients, bit for bit (tests/model/test_loss_graphs.py
compares them on the GPU). On plush-dog splat-plus took 153.3 s against 218.4 s
without it, and 190.8 s against 214.7 s in a second pair of runs
(benchmarks/2026-12-02-h200-splat-plus-loss-graph-at-7de557a/).

Where a graph is not used (the loss runs as before, operator by operator): the CPU; no gradient; a mask,
the bilateral grid or the fused loss (other paths of :func:`~ns_splat_plus.model.loss.photometric_loss`);
autocast; fused-ssim as the SSIM (it launches on CUDA's legacy stream, which a graph does not record); a
recording of its own in progress (``--cuda-graph``'s whole step records the loss with it). A dataset of
many image sizes stops recording after :data:`MAX_RECORDINGS` recordings; the recorded graphs of at
most :data:`MAX_GRAPHS` sizes are kept (the least recently used goes first), each holding its
intermediate images in its own memory pool. Each recording is checked once against the operators run one by
one, on its own inputs and on others (:func:`replay_agrees`), before a step uses it.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Callable, Hashable, Optional, Tuple

import torch

from ns_splat_plus.model.images import TrainingOutputs
from ns_splat_plus.model.ssim import TrainingSSIM
from ns_splat_plus.parallel import collectives

MAX_GRAPHS = 4
"""Image sizes whose graphs are kept: the resolution schedule's three, plus one."""
MAX_RECORDINGS = 16
"""Recordings in one run before the loss runs eagerly for good (a dataset of many image sizes)."""


class LossGraphs:
    """splatfacto's photometric loss of the training composite, replayed from CUDA graphs.

    Args:
        ssim: the loss's SSIM (:class:`~ns_splat_plus.model.ssim.TrainingSSIM`).
        ssim_lambda: the SSIM term's weight (splatfacto's ``ssim_lambda``).
        loss: the loss of ``(rgb, gt, ssim, ssim_lambda)`` that is recorded
            (:func:`~ns_splat_plus.model.loss.reference_photometric_loss`).
    """

    recorder: Callable[..., "Recording"]
    """What records a loss (:class:`Recording`; the tests' stand-in replays on the CPU)."""

    def __init__(self, ssim: TrainingSSIM, ssim_lambda: float, loss: Callable[..., torch.Tensor]) -> None:
        self.recorder = Recording
        self.ssim = ssim
        self.ssim_lambda = ssim_lambda
        self.loss = loss
        self.graphs: "collections.OrderedDict[Hashable, Recording]" = collections.OrderedDict()
        self.recordings = 0
        self.replays = 0
        self.failure: Optional[str] = None
        """Why recording stopped for this run (a failed recording, too many image sizes), else None."""

    def __call__(
        self,
        colors: torch.Tensor,
        alphas: torch.Tensor,
        background: torch.Tensor,
        gt: torch.Tensor,
        batched: bool,
        ssim: TrainingSSIM,
        ssim_lambda: float,
    ) -> Optional[torch.Tensor]:
        """The loss of ``composite(colors, alphas, background)`` against ``gt`` from this size's graph,
        recorded on the first call; None where a graph does not apply (the caller runs the loss itself).

        Args:
            colors: [B, H, W, 3] the rasterizer's colors (gradient). alphas: [B, H, W, 1] (gradient).
            background: [3]. gt: [B, H, W, 3] (batched) or [H, W, 3], uint8 or float32, on their device.
            batched: the loss sees the [B, H, W, 3] composite (else its [H, W, 3] squeeze, one camera).
            ssim, ssim_lambda: the caller's; declined unless they are the ones these graphs record.

        Returns:
            [] float32, differentiable in ``colors`` and ``alphas``, or None.
        """
        if ssim is not self.ssim or ssim_lambda != self.ssim_lambda:
            return None
        if not self._applies(colors, alphas, background, gt, batched):
            return None
        key = _key(colors, alphas, background, gt, batched)
        graphed = self.graphs.get(key)
        if graphed is None:
            graphed = self._record(key, colors, alphas, background, gt, batched)
            if graphed is None:
                return None
        self.graphs.move_to_end(key)
        self.replays += 1
        return graphed(colors, alphas, background, gt)

    def _applies(self, colors, alphas, background, gt, batched: bool) -> bool:
        if self.failure is not None or not colors.is_cuda or not torch.is_grad_enabled():
            return False
        if not (colors.requires_grad or alphas.requires_grad) or background.requires_grad or gt.requires_grad:
            return False
        if torch.cuda.is_current_stream_capturing() or torch.is_autocast_enabled("cuda"):
            return False
        if self.ssim.backend(colors.device) == "fused-ssim" and not self.ssim.recordable:
            return False  # the eager loss runs fused-ssim, which a recording would replace by other kernels
        rgb_shape = colors.shape if batched else colors.shape[1:]
        return (
            colors.dim() == 4
            and (batched or colors.shape[0] == 1)
            and alphas.shape == (*colors.shape[:-1], 1)
            and background.shape == (3,)
            and gt.shape == rgb_shape
            and gt.dtype in (torch.uint8, torch.float32)
            and alphas.device == background.device == gt.device == colors.device
        )

    def _record(self, key: Hashable, colors, alphas, background, gt, batched: bool):
        if self.recordings >= MAX_RECORDINGS:
            self._stop(f"{MAX_RECORDINGS} recordings: the dataset's images have many sizes")
            return None
        while len(self.graphs) >= MAX_GRAPHS:
            self.graphs.popitem(last=False)
        self.recordings += 1

        def loss_of(colors, alphas, background, gt):
            # the eager step's composite, from its one definition
            outputs = TrainingOutputs(
                render_colors=colors, render_alphas=alphas, background=background, batched=batched
            )
            return self.loss(outputs["rgb"], gt, self.ssim, self.ssim_lambda)

        try:
            samples = tuple(_like(t) for t in (colors, alphas, background, gt))
            with torch.cuda.device(colors.device) if colors.is_cuda else contextlib.nullcontext():
                recording = self.recorder(loss_of, samples)
                # on its own inputs and on others: a kernel the recording missed left its result there only
                agrees = all(replay_agrees(loss_of, recording, inputs) for inputs in (samples, _others(samples)))
        except Exception as err:  # e.g. a kernel that cannot be recorded: the loss runs eagerly from here on
            self._stop(f"recording its CUDA graph failed: {type(err).__name__}: {err}")
            return None
        if not agrees:
            self._stop(
                "a replay of its CUDA graph did not give the loss and gradients of its eager operators, bit for bit "
                "(or they were not finite)"
            )
            return None
        self.graphs[key] = recording
        return recording

    def _stop(self, reason: str) -> None:
        from nerfstudio.utils.rich_utils import CONSOLE

        self.failure = reason
        self.graphs.clear()
        if collectives.is_main_process():  # one line per run
            CONSOLE.print(f"splat-plus: the loss runs eagerly from here on: {reason}", soft_wrap=True)


class Recording:
    """``fn(*samples)`` (one differentiable tensor out) and its backward recorded as two CUDA graphs; calling it
    replays them on new inputs of the samples' shapes and strides, as an autograd function.

    torch.cuda.make_graphed_callables does this too, but torch 2.11's records in the CUDA runtime's "global" capture
    mode (pytorch/pytorch#188832 later made it a parameter): a CUDA call that may synchronise, made on any other
    thread during a recording, then fails in that thread, e.g. nerfstudio's viewer thread copying a render to the
    host outside the trainer's lock, whose thread would end. Recorded here in "thread_local" mode, as the whole-step
    graph (training/graphed_step.py) is; the steps are make_graphed_callables': three unrecorded runs on a side
    stream, the forward, then the backward through ``torch.autograd.grad``, in one memory pool.

    Args:
        fn: tensors -> a [] tensor; no host read, fixed shapes (recordable).
        samples: its inputs, which the recording keeps and reads: a replay copies new inputs into them.
    """

    def __init__(self, fn: Callable[..., torch.Tensor], samples: Tuple[torch.Tensor, ...]) -> None:
        self.samples = samples
        self.forward_replays = 0
        differentiable = tuple(t for t in samples if t.requires_grad)
        stream, current = torch.cuda.Stream(), torch.cuda.current_stream()
        torch.cuda.synchronize()
        try:
            with torch.cuda.stream(stream):
                for _ in range(3):  # lazy initialisation (cuBLAS handles, Triton's first launch) outside the recording
                    out = fn(*samples)
                    torch.autograd.grad(out, differentiable, torch.empty_like(out))
            torch.cuda.synchronize()
            pool = torch.cuda.graph_pool_handle()
            self.forward_graph, self.backward_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.forward_graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                self.out = fn(*samples)
            self.grad_out = torch.empty_like(self.out)
            with torch.cuda.graph(self.backward_graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                self.grads = torch.autograd.grad(self.out, differentiable, self.grad_out)
        finally:  # a recording that raised leaves its side stream current (torch's graph context skips restoring it)
            torch.cuda.set_stream(current)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        return _Replay.apply(self, *inputs)


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, recording: Recording, *inputs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for static, given in zip(recording.samples, inputs):
            static.copy_(given)
        recording.forward_graph.replay()
        recording.forward_replays += 1
        ctx.recording, ctx.replay = recording, recording.forward_replays
        return recording.out.clone()  # the graph's own output is overwritten by the next replay

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        recording: Recording = ctx.recording
        if recording.forward_replays != ctx.replay:  # its saved intermediates are now another forward's
            raise RuntimeError("a recorded loss was replayed again before the backward of an earlier replay")
        recording.grad_out.copy_(grad)
        recording.backward_graph.replay()
        grads = iter(recording.grads)
        return (None,) + tuple(next(grads).detach() if t.requires_grad else None for t in recording.samples)


def replay_agrees(fn: Callable[..., torch.Tensor], recording: Callable[..., torch.Tensor], samples) -> bool:
    """Whether ``recording`` replays ``fn``'s value and gradients on ``samples`` bit for bit (each recording is checked
    before any step uses it, on its own inputs and on others: a replay that computed something else would train on
    wrong gradients silently)."""

    def value_and_grads(run: Callable[..., torch.Tensor]):
        inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in samples]
        out = run(*inputs)
        return (out.detach().clone(),) + torch.autograd.grad(out, [t for t in inputs if t.requires_grad])

    eager, replayed = value_and_grads(fn), value_and_grads(recording)
    return len(eager) == len(replayed) and all(torch.equal(a, b) for a, b in zip(eager, replayed))


def _key(colors, alphas, background, gt, batched: bool) -> Tuple[Hashable, ...]:
    """What a recording bakes in: every input's shape, strides, type, device and whether it takes a gradient."""
    return (batched,) + tuple(
        (tuple(t.shape), t.stride(), t.dtype, t.device, t.requires_grad) for t in (colors, alphas, background, gt)
    )


def _others(samples: Tuple[torch.Tensor, ...]) -> Tuple[torch.Tensor, ...]:
    """Inputs of the samples' shapes with other values (each rolled by one along its last dimension)."""
    return tuple(t.detach().roll(1, -1).requires_grad_(t.requires_grad) for t in samples)


def _like(t: torch.Tensor) -> torch.Tensor:
    """A recording's own input: ``t``'s values in a tensor of its shape and strides (so the recorded kernels
    read the same layout as the eager ones), requiring a gradient where ``t`` does."""
    static = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    static.copy_(t.detach())
    return static.requires_grad_(t.requires_grad)
