# NVIDIA H200, 1 GPU (the low-resolution A/B on a fresh H200); 2026-11-24; code commit not recorded (the results were added
# in 37ba6fa)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-tight-tiles
# the preset with and without tight tiles, 3,000 steps of 4 cameras -> raw/ab_fox_preset_3000_results.json, .md, raw/ab_fox.log
python scripts/benchmark.py --methods splat-plus-fast fast-gsplat-tiles \
  --variant "fast-gsplat-tiles=splat-plus-fast --pipeline.model.tight-tiles False" --steps 12000 --no-eval \
  --gpu-busy-steps 30 --gpu-busy-at 0.67 --timeout 600 --scene-args "$FOX" --scene-name fox --out /tmp/r-ab-fox
# the low-resolution phase only, interleaved, on a fresh H200 -> raw/ab_fox_preset_lowres_interleaved_results.json, .md, raw/ab_fox_lowres.log
python scripts/benchmark.py --methods splat-plus-fast fast-gsplat-tiles \
  --variant 'fast-gsplat-tiles=splat-plus-fast --pipeline.model.tight-tiles False' --steps 2800 --repeats 2 --no-eval \
  --timeout 300 --scene-args "$FOX" --scene-name fox --out /tmp/r-ab-low
# fox on splatfacto's 30k schedule -> raw/fox_timed_results.json, .md, raw/fox_timed.log
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-b2 splat-plus-fast \
  --variant "splat-plus-b2=splat-plus --pipeline.datamanager.cameras-per-step 2" --steps 30000 --gpu-busy-steps 50 \
  --gpu-busy-at 0.67 --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-timed
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast   # -> raw/fox_quality_preset_r2r3_results.json, .md, raw/fox_quality.log
# the merged report; splatfacto's repeats 2 and 3 from ../2026-11-24-h200-fox-30k-fused-ssim
# (as run: --from-json /tmp/r-fox-timed/results.json /tmp/r-fox-q-fast/results.json
#  benchmarks/h200-2026-11-24/fox-30k-fused-ssim/splatfacto_earlier_results.json ... --out benchmarks/h200-2026-11-24/tight-tiles/fox)
python scripts/benchmark.py --from-json $B/raw/fox_timed_results.json $B/raw/fox_quality_preset_r2r3_results.json \
  benchmarks/2026-11-24-h200-fox-30k-fused-ssim/raw/splatfacto_earlier_results.json \
  --methods splatfacto splat-plus splat-plus-b2 splat-plus-fast --out $B
# GPU tests: pytest -m gpu tests/test_raster.py (gpu_tests_first.txt: the first run; gpu_tests_raster_after_fix.txt: after
# the tolerance change). tile_kernel_time.txt: the tile-bounds kernel's host and GPU time; its command was not kept.
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
