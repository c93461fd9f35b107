"""SSIM kernels side by side on one GPU (issue 47 item 6): the Triton SSIM of ns_splat_plus against fussim
(PyPI wheel), fused-ssim (rahul-goel/fused-ssim built here) and pytorch_msssim (splatfacto's), all with valid
padding (splatfacto's loss). Forward + backward of the training call (gradient to the render, a permuted
[N, H, W, C] view, as the loss passes it), median of CUDA-event timings; error against float64 pytorch_msssim."""
import json, sys, time
import torch
from pytorch_msssim import SSIM
from ns_splat_plus.model.ssim import fused_ssim as triton_ssim

impls = {"triton (ns_splat_plus)": lambda x, y: triton_ssim(x, y)}
ref32 = SSIM(data_range=1.0, size_average=True, channel=3).cuda()
impls["pytorch_msssim"] = lambda x, y: ref32(x, y)
versions = {"torch": torch.__version__}
try:
    import fussim
    impls["fussim"] = lambda x, y: fussim.fused_ssim(x.contiguous(), y.contiguous(), padding="valid")
    versions["fussim"] = fussim.__version__
except Exception as e:
    versions["fussim"] = f"unavailable: {type(e).__name__}: {e}"
try:
    import fused_ssim
    impls["fused-ssim"] = lambda x, y: fused_ssim.fused_ssim(x, y.contiguous(), padding="valid")
    versions["fused-ssim"] = "built from rahul-goel/fused-ssim " + open(sys.argv[1]).read().split()[0][:12] if len(sys.argv) > 1 else "built"
except Exception as e:
    versions["fused-ssim"] = f"unavailable: {type(e).__name__}: {e}"
ref64 = SSIM(data_range=1.0, size_average=True, channel=3).cuda().double()

def timed(fn, x, y, n=100, warm=15):
    for _ in range(warm):
        x.grad = None; fn(x.permute(0, 3, 1, 2), y).backward()
    torch.cuda.synchronize()
    fwd, tot = [], []
    for _ in range(n):
        x.grad = None
        a, b, c = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        a.record(); v = fn(x.permute(0, 3, 1, 2), y); b.record(); v.backward(); c.record()
        torch.cuda.synchronize(); fwd.append(a.elapsed_time(b)); tot.append(a.elapsed_time(c))
    fwd.sort(); tot.sort()
    return fwd[n // 2], tot[n // 2]

rows = []
g = torch.Generator(device="cuda").manual_seed(0)
for (w, h, batch) in [(800, 600, 1), (1500, 1000, 1), (1920, 1080, 1), (1920, 1080, 4)]:
    gt = torch.rand(batch, h, w, 3, device="cuda", generator=g)
    render = (gt + 0.1 * torch.randn(batch, h, w, 3, device="cuda", generator=g)).clamp(0, 1)
    y = gt.permute(0, 3, 1, 2)
    x64 = render.double().clone().requires_grad_(True)
    v64 = ref64(x64.permute(0, 3, 1, 2), y.double()); v64.backward(); g64 = x64.grad
    for name, fn in impls.items():
        x = render.clone().requires_grad_(True)
        try:
            v = fn(x.permute(0, 3, 1, 2), y); v.backward()
            err_v = abs(v.item() - v64.item()); err_g = ((x.grad.double() - g64).abs().max() / g64.abs().max()).item()
            f, t = timed(fn, x, y)
            rows.append(dict(size=f"{w}x{h}", batch=batch, impl=name, fwd_ms=round(f, 4), fwd_bwd_ms=round(t, 4), abs_err_value=err_v, rel_max_err_grad=err_g))
        except Exception as e:
            rows.append(dict(size=f"{w}x{h}", batch=batch, impl=name, error=f"{type(e).__name__}: {e}"[:300]))
        print(json.dumps(rows[-1]), flush=True)
json.dump({"device": torch.cuda.get_device_name(), "versions": versions, "rows": rows}, open(sys.argv[2] if len(sys.argv) > 2 else "ssim_micro.json", "w"), indent=1)
print(json.dumps(versions))
