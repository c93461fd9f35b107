# 4x H200 (nvidia-h200-x4, 64 cores), 2026-11-28, commit 82e7b14. From the repository root on the device, after
# `source .device/setup.sh` and bytecode compiled once (python3 -m compileall; PYTHONPYCACHEPREFIX=/tmp/pycache);
# DOG is ../shared/data/plush-dog copied into .dog/. As run: .gpurun/run.sh's job s55, outputs under /tmp/gj/s55/.
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
Q="--steps 30000 --seed-per-repeat --no-prebuild --launcher torchrun --scene-name plush-dog"
# A. W = 1, 2, 4 side by side, each run alone on the machine (repeat 1: timed, and the first quality run)   -> raw/A/
python3 scripts/benchmark.py --methods splat-plus --gpus 1 2 4 $Q --gpu-busy-steps 50 --gpu-busy-at 0.5 --timeout 400 \
  --scene-args "$DOG" --out /tmp/gj/s55/A
# B. quality repeats 2 and 3 (timing not used: these ran at the same time, on separate GPUs of the one host)
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus --gpus 1 --first-repeat 2 --repeats 1 --concurrent-quality $Q \
  --timeout 500 --scene-args "$DOG" --out /tmp/gj/s55/B1r2 &   # -> raw/B1r2/
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus --gpus 1 --first-repeat 3 --repeats 1 --concurrent-quality $Q \
  --timeout 500 --scene-args "$DOG" --out /tmp/gj/s55/B1r3 &   # -> raw/B1r3/
CUDA_VISIBLE_DEVICES=2,3 python3 scripts/benchmark.py --methods splat-plus --gpus 2 --first-repeat 2 --repeats 2 --concurrent-quality $Q \
  --timeout 400 --scene-args "$DOG" --out /tmp/gj/s55/B2 &     # -> raw/B2/
wait
# (meanwhile, on the shared machine: fused-ssim rahul-goel 0ac916a built with CUDA_ARCHITECTURES=90 and
#  `python3 -m pytest -m gpu tests/kernels/test_ssim.py` run with it on PYTHONPATH   -> pytest_ssim.log in raw-logs.tar.xz)
# C. splat-plus-fast at W = 1 and 2, each run alone   -> raw/C/
python3 scripts/benchmark.py --methods splat-plus-fast --gpus 1 2 --steps 30000 --no-prebuild --launcher torchrun \
  --gpu-busy-steps 50 --gpu-busy-at 0.5 --timeout 400 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/s55/C
# The merged report at the top (as run: the four files under /tmp/s55/s55/)   -> results.json, results.md, plots/
python3 scripts/benchmark.py --from-json raw/A/results.json raw/B1r2/results.json raw/B1r3/results.json raw/B2/results.json \
  --out benchmarks/2026-11-28-h200x4-w2-quality-and-torchrun-scaling
# The logs (raw/*/logs/*.log, raw/*/benchmark.log, raw/pytest_ssim.log, raw/build_fused_ssim.log) are in raw-logs.tar.xz.
