# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 3355b16)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-30k-fused-ssim
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-timed   # -> raw/timed_results.json, raw/fox-timed.log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --no-prebuild \
  --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q2   # -> raw/quality_r2r3_results.json, raw/fox-q2.log
# The two merges below are rebuilt from the reports' merged_from lists (the merge commands as run were not recorded):
# splatfacto's runs of ../2026-11-24-h200-fox-30k -> raw/splatfacto_earlier_results.json
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-30k/raw/timed_results.json \
  benchmarks/2026-11-24-h200-fox-30k/raw/quality_r2_results.json --methods splatfacto --out /tmp/sf-earlier
python scripts/benchmark.py --from-json $B/raw/timed_results.json $B/raw/quality_r2r3_results.json $B/raw/splatfacto_earlier_results.json \
  --methods splatfacto splat-plus-fast splat-plus --out $B
# the SSIM kernels alone: ../2026-11-24-h200-ssim-kernels/command.sh
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
