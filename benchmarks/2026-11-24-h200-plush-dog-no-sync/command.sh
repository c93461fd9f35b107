# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in 4427cf2)
# Notes: ../2026-11-24-h200-fox-no-sync/notes.md.
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-24-h200-plush-dog-no-sync
python scripts/benchmark.py --methods splatfacto splat-plus-fast --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.67 \
  --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed   # -> raw/plush-dog_timed_results.json, .md, raw/plush-dog_timed.log
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --no-prebuild --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-q-fast   # -> raw/plush-dog_quality_preset_r2r3_results.json, .md, raw/plush-dog_quality.log
# raw/plush-dog_splatfacto_fused_ssim_command_as_r5_results.json: splatfacto's run 1 of ../2026-11-24-h200-plush-dog-30k-fused-ssim
# (raw/timed_results.json there) numbered 5, its timing left out ("renumbered" in the file; how it was written is not recorded)
# the merged report, rebuilt from its merged_from list (the merge command as run was not recorded):
python scripts/benchmark.py --from-json $B/raw/plush-dog_timed_results.json $B/raw/plush-dog_quality_preset_r2r3_results.json \
  benchmarks/2026-11-24-h200-plush-dog-30k-fused-ssim/raw/splatfacto_earlier_results.json \
  $B/raw/plush-dog_splatfacto_fused_ssim_command_as_r5_results.json --methods splatfacto splat-plus-fast --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
