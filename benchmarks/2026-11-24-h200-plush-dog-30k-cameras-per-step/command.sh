# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in cb0bfed)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-24-h200-plush-dog-30k-cameras-per-step
# a first command on another H200, cut short when its machine went back -> raw/interrupted_timed_results.json, raw/interrupted-dog-timed.log
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast-0.8 splat-plus-b2 \
  --variant 'splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2' \
  --variant 'splat-plus-fast-0.8=splat-plus-fast --steps-scaler 0.8' --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed
# the timed command -> raw/timed_results.json, raw/dog-timed.log
python scripts/benchmark.py --methods splatfacto splat-plus-fast-0.8 splat-plus splat-plus-b2 \
  --variant 'splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2' \
  --variant 'splat-plus-fast-0.8=splat-plus-fast --steps-scaler 0.8' --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed
# two quality commands at once on the same H200 -> raw/quality_preset08_r2r3_results.json (raw/dog-q-fast.log),
# raw/quality_b2_r2_results.json (raw/dog-q-b2.log)
python scripts/benchmark.py --methods splat-plus-fast-0.8 --variant 'splat-plus-fast-0.8=splat-plus-fast --steps-scaler 0.8' \
  --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --no-prebuild --timeout 575 --scene-args "$DOG" \
  --scene-name plush-dog --out /tmp/r-dog-q-fast &
python scripts/benchmark.py --methods splat-plus-b2 --variant 'splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2' \
  --steps 30000 --repeats 1 --first-repeat 2 --concurrent-quality --no-prebuild --timeout 575 --scene-args "$DOG" \
  --scene-name plush-dog --out /tmp/r-dog-q-b2
wait
# the merged report, with repeats 2 and 3 of splatfacto and splat-plus from ../2026-11-23-h200-plush-dog-30k
# (as run: --from-json /tmp/r-dog-timed/results.json /tmp/r-dog-q-fast/results.json /tmp/r-dog-q-b2/results.json
#  benchmarks/h200-2026-11-23/plush-dog-30k/quality_r2_results.json benchmarks/h200-2026-11-23/plush-dog-30k/quality_r3_results.json
#  --out benchmarks/h200-2026-11-24/plush-dog-30k)
python scripts/benchmark.py --from-json $B/raw/timed_results.json $B/raw/quality_preset08_r2r3_results.json $B/raw/quality_b2_r2_results.json \
  benchmarks/2026-11-23-h200-plush-dog-30k/raw/quality_r2_results.json benchmarks/2026-11-23-h200-plush-dog-30k/raw/quality_r3_results.json \
  --methods splatfacto splat-plus splat-plus-b2 splat-plus-fast-0.8 --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
