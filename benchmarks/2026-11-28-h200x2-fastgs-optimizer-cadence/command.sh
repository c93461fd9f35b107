# 2 x H200 (nvidia-h200-x2, 32 cores), 2026-11-28, commit 5ca1a65 (the last with --optimizer-cadence). From the
# repository root on the device, after `source .device/setup.sh` and bytecode compiled once (python3 -m compileall;
# PYTHONPYCACHEPREFIX=/tmp/pycache); DOG is ../shared/data/plush-dog copied into .dog/. As run: .gpurun/run.sh's
# job s57, outputs under /tmp/gj/s57/. 3 runs per method, fixed before any run; seeds 1-3 (--seed-per-repeat).
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
Q="--steps 30000 --seed-per-repeat --no-prebuild --launcher torchrun --scene-name plush-dog --gpu-busy-steps 50 --gpu-busy-at 0.5"
# Both at once, one per GPU. Repeat 1 of each method is timed alone on its GPU; repeats 2-3 of both methods then
# train at the same time on that GPU (quality only).
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus-lite lite-fastgs \
  --variant "lite-fastgs=splat-plus-lite --optimizer-cadence fastgs" --gpus 1 --repeats 3 --concurrent-quality $Q \
  --timeout 600 --scene-args "$DOG" --out /tmp/gj/s57/A-lite &   # -> raw/A-lite/
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus sp-fastgs \
  --variant "sp-fastgs=splat-plus --optimizer-cadence fastgs" --gpus 1 --repeats 3 --concurrent-quality $Q \
  --timeout 900 --scene-args "$DOG" --out /tmp/gj/s57/A-sp &     # -> raw/A-sp/
wait
# The merged report at the top (as run: the two files under /tmp/s57/s57/)   -> results.json, results.md, plots/
python3 scripts/benchmark.py --from-json raw/A-lite/results.json raw/A-sp/results.json \
  --out benchmarks/2026-11-28-h200x2-fastgs-optimizer-cadence
# FastGS itself (fastgs/FastGS 44e02a5), built on the same machine afterwards with scripts/peers/fastgs/ (as run:
# .gpurun/fastgs/, the same scripts before they were committed):
#   bash scripts/peers/fastgs/build.sh $OUT/fgs                                   -> raw/fastgs/build_*.log
#   FGS_SPLIT=nerfstudio timeout 230 bash scripts/peers/fastgs/train_one.sh .dog $OUT/fgs/run1
#                                 -> raw/fastgs/train.log, raw/fastgs/train_progress_every_200th_line.log
# The first build failed (raw/fastgs/build_diff-gaussian-rasterization_fastgs.first-attempt.log): see notes.md.
# The logs (raw/*/logs/*.log, raw/*/benchmark.log, raw/fastgs/*.log) are in raw-logs.tar.xz.
