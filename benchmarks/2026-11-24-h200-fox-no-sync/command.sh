# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 4427cf2)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-no-sync
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus-b2 \
  --variant "splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2" --steps 30000 --gpu-busy-steps 50 \
  --gpu-busy-at 0.67 --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-timed   # -> raw/fox_timed_results.json, .md, raw/fox_timed.log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast   # -> raw/fox_quality_preset_r2r3_results.json, .md, raw/fox_quality.log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality \
  --no-prebuild --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast45   # -> raw/fox_quality_preset_r4r5_results.json, .md, raw/fox_quality_r4r5.log
# raw/fox_splatfacto_tight_tiles_command_as_r4_results.json: splatfacto's run 1 of ../2026-11-24-h200-fox-tight-tiles
# (raw/fox_timed_results.json there) numbered 4, its timing left out ("renumbered" in the file; how it was written is not recorded)
# the merged report (as run, in benchmarks/h200-2026-11-24/no-sync/: --from-json fox_timed_results.json
#  fox_quality_preset_r2r3_results.json fox_quality_preset_r4r5_results.json ../fox-30k-fused-ssim/splatfacto_earlier_results.json
#  fox_splatfacto_tight_tiles_command_as_r4_results.json --methods splatfacto splat-plus-fast splat-plus-b2 --out fox)
python scripts/benchmark.py --from-json $B/raw/fox_timed_results.json $B/raw/fox_quality_preset_r2r3_results.json \
  $B/raw/fox_quality_preset_r4r5_results.json benchmarks/2026-11-24-h200-fox-30k-fused-ssim/raw/splatfacto_earlier_results.json \
  $B/raw/fox_splatfacto_tight_tiles_command_as_r4_results.json --methods splatfacto splat-plus-fast splat-plus-b2 --out $B
# GPU tests: pytest -m gpu tests/test_host_sync.py (gpu_test_host_sync.txt; on the previous commit's camera path:
# gpu_test_host_sync_previous_commit.txt) and pytest -m gpu tests (gpu_tests_all.txt)
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
