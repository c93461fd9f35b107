# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 478bc56)
# Notes: ../2026-11-24-h200-fox-30k/notes.md (the kernel-group table).
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox ../shared/data/plush-dog .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast --steps 1200 --no-eval --no-prebuild --gpu-busy-steps 20 \
  --train-args '--pipeline.model.num-downscales 0' --timeout 140 --scene-args "$FOX" --scene-name fox-fullres --out /tmp/k-fox   # -> raw/fox_results.json, raw/fox_results.md
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast --steps 1200 --no-eval --no-prebuild --gpu-busy-steps 20 \
  --train-args '--pipeline.model.num-downscales 0' --timeout 140 --scene-args "$DOG" --scene-name dog-fullres --out /tmp/k-dog   # -> raw/dog_results.json, raw/dog_results.md
