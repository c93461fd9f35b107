"""Whole training steps with another SSIM in the loss: SSIM_IMPL=triton (the default path) | fussim | fused-ssim
(| pytorch-msssim via --pipeline.model.ssim-kernel). Writes the wall per step over steps [START-300, START) to OUT."""
import json, os, sys, time
import torch
from nerfstudio.scripts.train import entrypoint
import ns_splat_plus.training.loop as L
import ns_splat_plus.model.ssim as S

impl = os.environ.get("SSIM_IMPL", "triton")
if impl == "fussim":
    import fussim
    S.fused_ssim = lambda x, y: fussim.fused_ssim(x.contiguous(), y.contiguous(), padding="valid")
elif impl == "fused-ssim":
    import fused_ssim
    S.fused_ssim = lambda x, y: fused_ssim.fused_ssim(x, y.contiguous(), padding="valid")
START = int(os.environ.get("HP_START", "1500")); OUT = os.environ["HP_OUT"]
orig = L.run_training_step; ts = {}
calls = {"n": 0}
orig_ssim = S.fused_ssim
def counted(x, y):
    calls["n"] += 1
    return orig_ssim(x, y)
S.fused_ssim = counted

def wrapped(trainer, step):
    ts[step] = time.perf_counter()
    if step == START:
        walls = sorted(ts[s + 1] - ts[s] for s in range(START - 300, START - 1) if s in ts and s + 1 in ts)
        json.dump({"impl": impl, "median_step_ms": 1000 * walls[len(walls) // 2], "mean_step_ms": 1000 * sum(walls) / len(walls),
                   "ssim_calls": calls["n"], "steps": len(walls)}, open(OUT, "w"))
    return orig(trainer, step)

L.run_training_step = wrapped
sys.argv = ["ns-train"] + sys.argv[1:]
entrypoint()
