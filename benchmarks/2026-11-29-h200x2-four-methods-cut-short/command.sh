# 2x H200 (32 cores), 2026-11-29, commit 88929d9 (raw/commit.txt). Two machines of the same kind, one after the
# other: the first was given back mid-run (notes.md), the second ran section 3. One background job per GPU
# (CUDA_VISIBLE_DEVICES), from the repository root after `source .device/setup.sh`; plush-dog (../shared/data/plush-dog)
# copied to /tmp/dog, fox (../shared/data/fox) to /tmp/fox in two halves (one call's carry holds at most 64 MiB).
# Job logs and every run's logs: raw-logs.tar.xz (s78dog.log: GPU 0 of the first machine; dog.log, fox.log: the second).
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'

# 1) first machine, GPU 0: the GPU tests of the fixed-capacity intersections (the slimmer slot buffers of 88929d9)
#    and of the recorded step, then plush-dog's methods, each alone on its GPU, one after the other, caches warmed
#    first, 50 steps profiled at 0.9 of each run (GPU busy). splatfacto and splat-plus finished; the machine went
#    back during splat-plus-fast (splat-plus-lite and sp-graph never started)
CUDA_VISIBLE_DEVICES=0 python3 -m pytest -m gpu -q -p no:cacheprovider tests/kernels/test_isect_fill.py \
  tests/raster/test_fixed_capacity_isect.py tests/training/test_graphed_step_gpu.py  # -> raw/gpu-tests.txt
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite \
  sp-graph --variant "sp-graph=splat-plus --cuda-graph True" --reference splatfacto --steps 30000 --seed-per-repeat \
  --no-prebuild --warm-caches --timeout 900 --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$DOG" \
  --scene-name plush-dog --out /tmp/res/dog/timed  # -> raw/dog_timed_results.json (the report as it was when the machine went)
# 2) first machine, GPU 1, at the same time: the same on fox (four methods). splatfacto finished; the machine went
#    back at step 23,990 of splat-plus
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite \
  --reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 \
  --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$FOX" --scene-name fox --out /tmp/res/fox/timed  # -> raw/fox_timed_results.json
# 3) second machine, both GPUs at the same time (the device time left: 274 s): splat-plus-lite alone on each GPU,
#    caches warmed first, 50 steps profiled at 0.9
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --seed-per-repeat \
  --no-prebuild --warm-caches --timeout 400 --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$DOG" \
  --scene-name plush-dog --out /tmp/res/dog/lite  # -> raw/dog_lite_results.json
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --seed-per-repeat \
  --no-prebuild --warm-caches --timeout 400 --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$FOX" \
  --scene-name fox --out /tmp/res/fox/lite  # -> raw/fox_lite_results.json
# the merged reports (here, on the development machine): each scene's runs of both machines side by side
H=benchmarks/2026-11-29-h200x2-four-methods-cut-short
python scripts/benchmark.py --from-json $H/raw/dog_timed_results.json $H/raw/dog_lite_results.json \
  --reference splatfacto --out $H/plush-dog
python scripts/benchmark.py --from-json $H/raw/fox_timed_results.json $H/raw/fox_lite_results.json \
  --reference splatfacto --out $H/fox
