# NVIDIA H200, 1 GPU; 2026-11-24; commit 0e15a0a (the code measured, as notes.md says)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-24-h200-plush-dog-repeats
# two commands started together, all seven runs at once on one GPU
python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 3 --first-repeat 6 --concurrent-quality \
  --timeout 2400 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-q-sf &   # -> raw/plush-dog_quality_splatfacto_r6r8_results.json, .md, .log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 4 --first-repeat 4 --concurrent-quality \
  --no-prebuild --timeout 2400 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-q-fast   # -> raw/plush-dog_quality_preset_r4r7_results.json, .md, raw/plush-dog_quality_preset.log
wait
# the merged report (as run: --from-json benchmarks/h200-2026-11-24/no-sync/plush-dog/results.json
#  benchmarks/h200-2026-11-24/repeats/plush-dog_quality_splatfacto_r6r8_results.json
#  benchmarks/h200-2026-11-24/repeats/plush-dog_quality_preset_r4r7_results.json ... --out benchmarks/h200-2026-11-24/repeats/plush-dog)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-plush-dog-no-sync/results.json \
  $B/raw/plush-dog_quality_splatfacto_r6r8_results.json $B/raw/plush-dog_quality_preset_r4r7_results.json \
  --methods splatfacto splat-plus-fast --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
