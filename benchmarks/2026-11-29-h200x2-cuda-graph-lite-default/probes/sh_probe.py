"""The recorded render's SH, forward and backward at degree 3 for 18k Gaussians: gsplat's PyTorch version
(upstream.recordable_spherical_harmonics) against the Triton kernels (branch wip/isect-fill-triton); recorded in a
CUDA graph and replayed, ms per call (the GPU time alone, as --cuda-graph runs it)."""
import json

import torch

from ns_splat_plus import upstream
from ns_splat_plus.kernels.spherical_harmonics import spherical_harmonics_triton

g = torch.Generator().manual_seed(0)
n = 18_000
dirs = (torch.randn(1, n, 3, generator=g) * 3).cuda().requires_grad_()
coeffs = (torch.randn(n, 16, 3, generator=g) * 0.4).cuda().requires_grad_()
masks = (torch.rand(1, n, generator=g) > 0.2).cuda()
weights = torch.randn(1, n, 3, generator=g).cuda()
out = {}
for name, sh in (("torch", upstream.recordable_spherical_harmonics),
                 ("triton", lambda d, dirs, c, masks: spherical_harmonics_triton(d, dirs, c, masks))):
    def step(sh=sh):
        colors = sh(3, dirs, coeffs.expand(1, -1, -1, -1), masks=masks)
        (colors * weights).sum().backward()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    dirs.grad = coeffs.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(200):
        graph.replay()
    b.record()
    b.synchronize()
    out[f"{name}_graph_ms"] = a.elapsed_time(b) / 200
print(json.dumps(out))
