"""ns-train with splat-plus's recordable kernels run eagerly: a diagnostic, not a feature.

splat-plus lost 0.78 dB with --cuda-graph (benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality). The graph
renders with the fixed-capacity tile lists and the Triton SH kernels; the eager step with gsplat's. Setting the
model's isect_capacity for every training render runs those same kernels without a graph: if this arm loses too, the
kernels are the cause; if not, the graph's mechanics are. EAGER_ISECT_CAPACITY slots (no overflow expected at 2**25);
overflowed renders are counted on the device and printed at exit (such a step is NOT dropped here)."""

import atexit
import os
import sys

import torch

from ns_splat_plus.model.model import SplatPlusModel

SplatPlusModel.isect_capacity = int(os.environ.get("EAGER_ISECT_CAPACITY", str(2**25)))
_overflows = []
_get_outputs = SplatPlusModel.get_outputs


def get_outputs(self, camera):
    outputs = _get_outputs(self, camera)
    flag = self.info.get("isect_overflow") if self.training else None
    if flag is not None:
        if not _overflows:
            _overflows.append(torch.zeros((), dtype=torch.int64, device=flag.device))
        _overflows[0] += flag.to(torch.int64)
    return outputs


SplatPlusModel.get_outputs = get_outputs
atexit.register(lambda: print(f"eager_recordable: capacity {SplatPlusModel.isect_capacity}, overflowed training "
                              f"renders {int(_overflows[0]) if _overflows else 'none seen'}", flush=True))

from nerfstudio.scripts.train import entrypoint  # noqa: E402

sys.argv = ["ns-train", *sys.argv[1:]]
entrypoint()
