"""Run one of FastGS's scripts (train.py / render.py) unmodified, with two optional run-time tweaks.

usage: python scripts/peers/fastgs/fgs_run.py SRC_DIR SCRIPT.py [script args...]
env:
  FGS_SEED=N             after FastGS's safe_state() (which seeds random/numpy/torch with 0), reseed all three with N
  FGS_SPLIT=nerfstudio   with --eval, hold out every 8th image in COLMAP image-id order (nerfstudio 1.1.5's colmap
                         dataparser default, eval_mode=interval, eval_interval=8) instead of FastGS's every 8th in
                         image-name order (its default; FGS_SPLIT=fastgs or unset)
Neither tweak edits FastGS's files: both are monkeypatches applied before the script runs.
"""

import os
import runpy
import sys

src, script, args = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
sys.path.insert(0, src)
os.chdir(src)

seed = os.environ.get("FGS_SEED", "").strip()
if seed:
    import utils.general_utils as gu

    _orig_safe_state = gu.safe_state

    def safe_state(silent):
        _orig_safe_state(silent)
        import random

        import numpy as np
        import torch

        random.seed(int(seed))
        np.random.seed(int(seed))
        torch.manual_seed(int(seed))
        print(f"[fgs_run] reseeded random/numpy/torch with {seed}")

    gu.safe_state = safe_state

split = os.environ.get("FGS_SPLIT", "fastgs").strip() or "fastgs"
if split not in ("fastgs", "nerfstudio"):
    sys.exit(f"FGS_SPLIT must be fastgs or nerfstudio, not {split!r}")
import scene.dataset_readers as dr  # noqa: E402  (needs the CUDA extensions importable)

_orig_read = dr.readColmapSceneInfo


def readColmapSceneInfo(path, images, eval, llffhold=8):
    if split == "fastgs" or not eval:
        info = _orig_read(path, images, eval, llffhold)
    else:
        info = _orig_read(path, images, False)  # all cameras, name-sorted, ply written as usual
        try:
            ext = dr.read_extrinsics_binary(os.path.join(path, "sparse/0", "images.bin"))
        except Exception:
            ext = dr.read_extrinsics_text(os.path.join(path, "sparse/0", "images.txt"))
        name2id = {os.path.basename(e.name).split(".")[0]: k for k, e in ext.items()}
        cams = sorted(info.train_cameras, key=lambda c: name2id[c.image_name])
        train = [c for i, c in enumerate(cams) if i % llffhold != 0]
        test = [c for i, c in enumerate(cams) if i % llffhold == 0]
        info = info._replace(train_cameras=train, test_cameras=test, nerf_normalization=dr.getNerfppNorm(train))
    print(
        f"\n[fgs_run] split={split}: {len(info.train_cameras)} train, {len(info.test_cameras)} test:",
        " ".join(c.image_name for c in info.test_cameras),
    )
    return info


dr.readColmapSceneInfo = readColmapSceneInfo
dr.sceneLoadTypeCallbacks["Colmap"] = readColmapSceneInfo

sys.argv = [os.path.join(src, script)] + args
runpy.run_path(sys.argv[0], run_name="__main__")
