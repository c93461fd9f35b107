"""FastGS's metrics.py without LPIPS (its LPIPS downloads VGG + linear weights at run time, which fails offline,
and metrics.py then reports nothing for the scene). Same image reading (PNG -> to_tensor, first 3 channels),
same SSIM (utils.loss_utils.ssim, 11x11 Gaussian window) and PSNR (utils.image_utils.psnr), same averaging.

usage: python scripts/peers/fastgs/fgs_metrics.py SRC_DIR MODEL_DIR
  prints 'TEST <method>: PSNR x SSIM y N n' for each MODEL_DIR/test/<method>/ and writes results_nolpips.json
"""

import json
import os
import sys
from pathlib import Path

src, model = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.abspath(src))
import torch  # noqa: E402
import torchvision.transforms.functional as tf  # noqa: E402
from PIL import Image  # noqa: E402
from utils.image_utils import psnr  # noqa: E402
from utils.loss_utils import ssim  # noqa: E402

dev = "cuda" if torch.cuda.is_available() else "cpu"
results = {}
test_dir = Path(model) / "test"
for method in sorted(os.listdir(test_dir)):
    rd, gd = test_dir / method / "renders", test_dir / method / "gt"
    names = sorted(os.listdir(rd))
    ps, ss = [], []
    with torch.no_grad():
        for f in names:
            r = tf.to_tensor(Image.open(rd / f)).unsqueeze(0)[:, :3].to(dev)
            g = tf.to_tensor(Image.open(gd / f)).unsqueeze(0)[:, :3].to(dev)
            ss.append(ssim(r, g).item())
            ps.append(psnr(r, g).item())
    p, s = torch.tensor(ps).mean().item(), torch.tensor(ss).mean().item()
    results[method] = {
        "PSNR": p,
        "SSIM": s,
        "N": len(names),
        "per_view": {n: {"PSNR": a, "SSIM": b} for n, a, b in zip(names, ps, ss)},
    }
    print(f"TEST {method}: PSNR {p:.4f} SSIM {s:.5f} N {len(names)}")
with open(Path(model) / "results_nolpips.json", "w") as fp:
    json.dump(results, fp, indent=1)
