"""The divergence check's table: each arm's Gaussians against A's at every saved step (relative L2 of the difference)."""
import sys
from pathlib import Path

import torch

root = Path(sys.argv[1])
arms = ["A", "A2", "B"]


def params(arm):
    out = {}
    for ck in sorted((root / arm).glob("splat-plus/t/nerfstudio_models/step-*.ckpt")):
        sd = torch.load(ck, map_location="cpu", weights_only=False)["pipeline"]
        out[int(ck.stem.split("-")[1])] = {k.split(".")[-1]: v.float() for k, v in sd.items() if "gauss_params" in k}
    return out


p = {a: params(a) for a in arms}
steps = sorted(set.intersection(*[set(v) for v in p.values() if v])) if any(p.values()) else []
print("arms with checkpoints:", {a: len(v) for a, v in p.items()})
pairs = [("A", "A2"), ("A", "B"), ("A2", "B")]
print("relative L2 |X - Y| / |X| of the means (and of all parameters together)")
print("step " + " ".join(f"{x}-{y:>3}".rjust(20) for x, y in pairs))
for s in steps:
    row = []
    for x, y in pairs:
        if s not in p[x] or s not in p[y] or p[x][s]["means"].shape != p[y][s]["means"].shape:
            row.append("n/a".rjust(20))
            continue
        m = (p[x][s]["means"] - p[y][s]["means"]).norm() / p[x][s]["means"].norm()
        num = sum(float((p[x][s][k] - p[y][s][k]).norm() ** 2) for k in p[x][s])
        den = sum(float(p[x][s][k].norm() ** 2) for k in p[x][s])
        row.append(f"{m:.2e} ({(num / den) ** 0.5:.2e})".rjust(20))
    print(f"{s:4d} " + " ".join(row))
