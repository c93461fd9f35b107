# NVIDIA H200, 1 GPU each (two H200s, one after the other); 2026-11-24; commit 1121f6c (as ../2026-11-24-h200-fox-b1-ab/notes.md says)
# Notes: ../2026-11-24-h200-fox-b1-ab/notes.md ("Fox quality, more repeats").
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-pooled-settle
# From the device script as run (fox_quality.sh, removed).
# First H200, after ../2026-11-24-h200-fox-b1-ab on the same machine: preset r7, r8 side by side
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 7 --concurrent-quality --no-prebuild \
  --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast78   # -> raw/fox_quality_preset_r7r8_results.json, raw/fox_quality_preset_r7r8.log
# Second H200: splatfacto r8 and preset r9, both at once
python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 8 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf8 > /tmp/fox_q_sf8.blog 2>&1 &   # -> raw/fox_quality_splatfacto_r8_results.json, .md, .log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 1 --first-repeat 9 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast9 > /tmp/fox_q_fast9.blog 2>&1 &   # -> raw/fox_quality_preset_r9_results.json, .md, .log
wait
# the merged report (as run: --from-json benchmarks/h200-2026-11-24/repeats/fox-pooled/results.json
#  benchmarks/h200-2026-11-24/settle/b1_ab_head_results.json benchmarks/h200-2026-11-24/settle/fox_quality_preset_r7r8_results.json
#  benchmarks/h200-2026-11-24/settle/fox_quality_preset_r9_results.json benchmarks/h200-2026-11-24/settle/fox_quality_splatfacto_r8_results.json
#  ... --out benchmarks/h200-2026-11-24/settle/fox-pooled)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-pooled-late-night/results.json \
  benchmarks/2026-11-24-h200-fox-b1-ab/raw/b1_ab_head_results.json $B/raw/fox_quality_preset_r7r8_results.json \
  $B/raw/fox_quality_preset_r9_results.json $B/raw/fox_quality_splatfacto_r8_results.json \
  --methods splatfacto splat-plus splat-plus-b2 splat-plus-fast --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
