"""isect_tiles_fixed with the PyTorch slot keys against the Triton kernel's (branch wip/isect-fill-triton), at
plush-dog's sizes: 18k Gaussians, 1500x1000 (94x63 tiles), 2.9M slots; CUDA-event time per call, median of 200,
and whether the outputs are equal."""
import json
import statistics
import sys

import torch

from ns_splat_plus.raster import fixed_capacity_isect as isect
from ns_splat_plus.raster.tile_bounds import tile_radii  # noqa: F401  (imports as the trainer does)

g = torch.Generator().manual_seed(0)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 18_000
means2d = (torch.rand(1, n, 2, generator=g) * torch.tensor([1500.0, 1000.0])).cuda()
radii = torch.randint(0, 60, (1, n), generator=g, dtype=torch.int32).cuda()
depths = (torch.rand(1, n, generator=g) * 5 + 0.1).cuda()
capacity = 2_900_000
out = {}
results = {}
for path in ("torch", "triton", "torch", "triton"):
    isect.SLOT_KEYS = path
    for _ in range(10):
        results[path] = isect.isect_tiles_fixed(means2d, radii, depths, 16, 94, 63, capacity)
    times = []
    for _ in range(200):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        isect.isect_tiles_fixed(means2d, radii, depths, 16, 94, 63, capacity)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    out[path] = statistics.median(times)
for path in ("torch", "triton"):  # recorded, as --cuda-graph runs it: the GPU time alone, no launch cost
    isect.SLOT_KEYS = path
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        isect.isect_tiles_fixed(means2d, radii, depths, 16, 94, 63, capacity)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        isect.isect_tiles_fixed(means2d, radii, depths, 16, 94, 63, capacity)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    a.record()
    for _ in range(200):
        graph.replay()
    b.record()
    b.synchronize()
    out[f"{path}_graph"] = a.elapsed_time(b) / 200
a, b = results["torch"], results["triton"]
out["equal"] = all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("isect_ids", "flatten_ids", "isect_offsets"))
out["n_isects"] = int(a.n_isects)
print(json.dumps(out))
