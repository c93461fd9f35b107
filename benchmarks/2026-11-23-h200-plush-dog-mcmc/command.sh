# NVIDIA H200, 1 GPU; 2026-11-23; code commit not recorded (the results were added in 608d3ea)
# Notes: ../2026-11-23-h200-plush-dog-30k/notes.md ("MCMC").
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
python scripts/benchmark.py --methods splat-plus-mcmc splatfacto --repeats 3 --concurrent-quality --steps 3000 \
  --gpu-busy-steps 50 --timeout 250 --scene-args "$DOG" --scene-name plush-dog --out /tmp/dog-mcmc
# /tmp/dog-mcmc/ -> results.json, results.md, plots/summary.png; its log: benchmark.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
