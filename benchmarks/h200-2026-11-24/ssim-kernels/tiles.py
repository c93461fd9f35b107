# standalone: tile shapes of the fused SSIM's column passes, interleaved, two rounds (no nerfstudio needed)
import importlib.util, statistics, sys, torch
spec = importlib.util.spec_from_file_location("ssim_standalone", "ns_splat_plus/model/ssim.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
torch.backends.cudnn.benchmark = True
tiles = [(1, 256), (2, 128), (4, 128), (4, 64), (8, 64), (8, 128), (2, 256), (1, 512)]
def bench(B, H, W, reps=100):
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(4):
        gt = torch.rand((B, H, W, 3), device="cuda", generator=g)
        sets.append((gt, (gt + 0.1 * torch.randn(gt.shape, device="cuda", generator=g)).clamp(0, 1).requires_grad_()))
    res = {t: [] for t in tiles}
    for rnd in range(2):
        for t in tiles:
            m.COLUMN_TILE = t
            ts = []
            for i in range(10 + reps):
                gt, p = sets[i % 4]
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); (1 - m.fused_ssim(p.permute(0, 3, 1, 2), gt.permute(0, 3, 1, 2))).backward(); e.record()
                p.grad = None; e.synchronize()
                if i >= 10: ts.append(s.elapsed_time(e))
            res[t].append(statistics.median(ts))
    print(f"{B}x{H}x{W}: " + "  ".join(f"{a}x{b} {r[0]:.3f}/{r[1]:.3f}" for (a, b), r in res.items()), flush=True)
for size in [(1, 1080, 1920), (4, 1080, 1920), (1, 1000, 1500), (4, 1000, 1500), (1, 540, 960)]:
    bench(*size)
