# NVIDIA H200, 1 GPU (repeat 2 on another H200); 2026-11-24; code commit not recorded (the results were added in 478bc56)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-30k
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-timed   # -> raw/timed_results.json, raw/fox-timed.log
# on another H200
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus --steps 30000 --repeats 1 --first-repeat 2 \
  --concurrent-quality --no-prebuild --timeout 1300 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q2   # -> raw/quality_r2_results.json, raw/fox-q2.log
# the merged report (as run: --from-json /tmp/r-fox-timed/results.json /tmp/r-fox-q2/results.json --out benchmarks/h200-2026-11-24/fox-30k)
python scripts/benchmark.py --from-json $B/raw/timed_results.json $B/raw/quality_r2_results.json --out $B
# the GPU time by kernel group at full size: ../2026-11-24-h200-kernels-fullres/command.sh
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
