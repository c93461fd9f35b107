# NVIDIA H200, 1 GPU (repeat 3 on a second H200); 2026-11-23; code commit not recorded (the results were added in e8e0943)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-23-h200-plush-dog-30k
python scripts/benchmark.py --methods splat-plus splatfacto splat-plus-fast --steps 30000 --gpu-busy-steps 50 \
  --gpu-busy-at 0.67 --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/dog30k-timed   # -> raw/timed_results.json, raw/timed.log
python scripts/benchmark.py --methods splat-plus splatfacto splat-plus-fast --steps 30000 --repeats 1 --first-repeat 2 \
  --concurrent-quality --no-prebuild --timeout 1500 --scene-args "$DOG" --scene-name plush-dog --out /tmp/dog30k-q2   # -> raw/quality_r2_results.json, raw/quality.log
# on a second H200
python scripts/benchmark.py --methods splat-plus splatfacto splat-plus-fast --steps 30000 --repeats 1 --first-repeat 3 \
  --concurrent-quality --no-prebuild --timeout 1500 --scene-args "$DOG" --scene-name plush-dog --out /tmp/dog30k-q3   # -> raw/quality_r3_results.json
# the merged report (as run: --from-json /tmp/dog30k-timed/results.json /tmp/dog30k-q2/results.json /tmp/dog30k-q3/results.json
# --out benchmarks/h200-2026-11-23/plush-dog-30k)
python scripts/benchmark.py --from-json $B/raw/timed_results.json $B/raw/quality_r2_results.json $B/raw/quality_r3_results.json --out $B
# this session's GPU tests on the first H200
pytest -m gpu tests/   # -> pytest_gpu.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
