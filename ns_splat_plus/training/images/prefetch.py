"""The images of a step on the device, copied one step ahead: :class:`DevicePrefetcher`.

On CUDA the next step's copy starts one step ahead on a side stream, its completion an event the
compute stream waits on; the images come from either store of :mod:`.stores`.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple

import torch


class DevicePrefetcher:
    """The images of a step on ``device``, copied one step ahead.

    :meth:`get` returns image ``idx`` (the prefetched copy when :meth:`prefetch` named it, else a
    copy made now); :meth:`prefetch` starts the copies of the next step's images (B of them with
    several cameras per step). On CUDA the copies run on a side stream (``non_blocking`` from pinned
    memory, so they overlap the current step's kernels) and the compute stream waits on their
    events; on the CPU only the store is asked to prepare the images. Only ``image`` moves, as in
    nerfstudio's ``next_train``.
    """

    def __init__(self, store, device) -> None:
        self.store = store
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(device=self.device) if self._cuda else None
        # idx -> (data on the device, event, host data kept referenced until the copy is consumed)
        self._pending: Dict[int, Tuple[Dict[str, torch.Tensor], Optional[torch.cuda.Event], Dict[str, torch.Tensor]]]
        self._pending = {}
        self.hits = 0
        self.misses = 0

    def _copy(self, idx: int):
        host = self.store[idx]
        data = dict(host)
        if not self._cuda:
            data["image"] = host["image"].to(self.device)
            return data, None, host
        with torch.cuda.stream(self._stream):
            data["image"] = host["image"].to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self._stream)
        return data, event, host  # host: kept referenced until the copy is consumed

    def get(self, idx: int) -> Dict[str, torch.Tensor]:
        pending = self._pending.pop(idx, None)
        if pending is not None:
            data, event, _host = pending
            self.hits += 1
        else:
            data, event, _host = self._copy(idx)
            self.misses += 1
        if event is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(event)
            # allocated on the side stream, used on the compute stream: keep the allocator from
            # reusing it before the compute stream is done with it
            data["image"].record_stream(compute)
        return data

    def prefetch(self, upcoming: Iterable[int], count: int = 1) -> None:
        """``upcoming``: the image indices of the next steps, the next step's ``count`` first."""
        upcoming = list(upcoming)
        for idx in upcoming:
            self.store.request(idx)  # streaming: decode ahead in the background
        if not self._cuda:
            return
        nxt = upcoming[:count]
        for idx in [i for i in self._pending if i not in nxt]:  # a guess that was not taken (e.g. after warmup)
            del self._pending[idx]
        for idx in nxt:
            if idx not in self._pending and self.store.ready(idx):  # never block this step on the next's decode
                self._pending[idx] = self._copy(idx)

    def clear(self) -> None:
        """Drop the prefetched copies (after an out-of-memory error)."""
        self._pending.clear()
