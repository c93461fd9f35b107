# 2x H200 (32 cores), 2026-12-01, commit 3eb4228 (raw/commit.txt), the same session as
# ../2026-12-01-h200x2-lite-late-prunes-at-their-steps/ on a second, fresh machine (the first had gone back), using
# 150 s of the device time left. A first attempt (plush-dog on GPU 0 and fox on GPU 1) found no set-up on the fresh
# machine and stopped at once (ModuleNotFoundError: ns_splat_plus; its dog.log and fox.log are in raw-logs.tar.xz).
# Then:
source .device/setup.sh > /tmp/setup.txt 2>&1   # (call 2's exports, written out:)
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH
export PYTHONPATH=$PWD/splatbench:/tmp/site
# fox (../shared/data/fox) carried as .gpurun/fox and copied to /tmp/fox. The default splat-plus-lite alone on GPU 0
# (GPU 1 idle), one timed run after a cache-warming start; 50 steps profiled at 0.9 of the run
# -> results.{md,json}; its start-up record -> raw/startup_fox_splat-plus-lite.json
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --seed-per-repeat \
  --no-prebuild --warm-caches --timeout 300 --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$FOX" \
  --scene-name fox --out /tmp/lite80/fox
