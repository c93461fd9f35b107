# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 3355b16)
# Notes: ../2026-11-24-h200-fox-30k-fused-ssim/notes.md.
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-24-h200-plush-dog-30k-fused-ssim
python scripts/benchmark.py --methods splatfacto splat-plus-fast splat-plus --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed   # -> raw/timed_results.json, raw/dog-timed.log
# The two merges below are rebuilt from the reports' merged_from lists (the merge commands as run were not recorded):
# splatfacto's runs of ../2026-11-24-h200-plush-dog-30k-cameras-per-step and ../2026-11-23-h200-plush-dog-30k -> raw/splatfacto_earlier_results.json
C=benchmarks/2026-11-24-h200-plush-dog-30k-cameras-per-step/raw
python scripts/benchmark.py --from-json $C/timed_results.json $C/quality_preset08_r2r3_results.json $C/quality_b2_r2_results.json \
  benchmarks/2026-11-23-h200-plush-dog-30k/raw/quality_r2_results.json benchmarks/2026-11-23-h200-plush-dog-30k/raw/quality_r3_results.json \
  --methods splatfacto --out /tmp/sf-earlier
python scripts/benchmark.py --from-json $B/raw/timed_results.json $B/raw/splatfacto_earlier_results.json \
  --methods splatfacto splat-plus-fast splat-plus --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
