# NVIDIA H200, 1 GPU each (two H200s, one after the other); 2026-11-24 to 2026-11-25; commit 4be8614 (as notes.md says)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-per-image
# From the device scripts as run (foxq2.sh, foxq3.sh, removed).
# First H200 (foxq2.sh with R=10): splatfacto r10 and preset r10-r12, all at once
python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 10 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf10 > /tmp/fox_q_sf10.blog 2>&1 &   # -> raw/fox_quality_sf10_results.json, .log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 3 --first-repeat 10 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast10 > /tmp/fox_q_fast10.blog 2>&1 &   # -> raw/fox_quality_fast10_results.json, .md, .log
wait
# then preset r13-r14
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 13 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast13   # -> raw/fox_quality_fast13_results.json, .md, .log
# Second H200 (foxq3.sh): splatfacto r11-r12 and preset r15-r16, all at once
python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 2 --first-repeat 11 --concurrent-quality \
  --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf11 > /tmp/fox_q_sf11.blog 2>&1 &   # -> raw/fox_quality_sf11_results.json, .md, .log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 15 --concurrent-quality \
  --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast15 > /tmp/fox_q_fast15.blog 2>&1 &   # -> raw/fox_quality_fast15_results.json, .md, .log
wait
# the merged report (as run: --from-json benchmarks/h200-2026-11-24/per-image/fox_quality_sf10_results.json ... --out
#  benchmarks/h200-2026-11-24/per-image/fox-per-image)
python scripts/benchmark.py --from-json $B/raw/fox_quality_sf10_results.json $B/raw/fox_quality_sf11_results.json \
  $B/raw/fox_quality_fast10_results.json $B/raw/fox_quality_fast13_results.json $B/raw/fox_quality_fast15_results.json --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
