# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 3b8d9ff)
# host_sections_dog_h100.txt and preset_kernels_fox_h100_before.json: NVIDIA H100, before this change.
# The runs had --pipeline.model.fused-loss on by default (notes.md).
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox ../shared/data/plush-dog .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
# fox: one timed command, then two preset quality repeats side by side
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-timed   # -> raw/fox_timed_results.json, .md
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --no-prebuild \
  --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q2   # -> raw/fox_quality_r2r3_results.json, .md
# plush-dog: splat-plus B = 1 timed alone, then three preset quality repeats side by side
python scripts/benchmark.py --methods splat-plus --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 --timeout 1200 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed   # -> raw/dog_timed_results.json, .md
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 3 --first-repeat 2 --concurrent-quality --no-prebuild \
  --timeout 1500 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-q   # -> raw/dog_quality_r2r4_results.json, .md
# Before the change, on an H100 (the exact arguments were not recorded):
# - host_sections_dog_h100.txt: python scripts/profile_step.py --out P -- splat-plus ... $DOG (plush-dog, late phase, B = 1)
# - preset_kernels_fox_h100_before.json: splat-plus-fast on fox at commit 6881f4e, 8000-step schedule (2000 steps of
#   4 cameras), every kernel of steps 1500-1520 (its "note" field)
