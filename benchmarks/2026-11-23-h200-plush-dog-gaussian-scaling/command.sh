# NVIDIA H200, 1 GPU; 2026-11-23; code commit not recorded (the results were added in 608d3ea)
# Notes: ../2026-11-23-h200-plush-dog-30k/notes.md ("Memory and time against the Gaussian count").
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
# As recorded in the JSON files (run with /opt/torch/.venv/bin/python3):
python scripts/gaussian_scaling.py --steps 1600 --out /tmp/scaling --busy-every 200 --busy-steps 10 --busy-first 50 \
  --scene-args "$DOG" --scene-name plush-dog --timeout 85 \
  --train-args '--pipeline.model.densify-grad-thresh 0.0001 --pipeline.model.stop-split-at 1300 --pipeline.model.num-downscales 0' \
  --allocators empty-cache expandable   # -> raw/densify-1e-4.json, raw/densify-1e-4.log
python scripts/gaussian_scaling.py --steps 1600 --out /tmp/scaling2 --busy-every 200 --busy-steps 10 --busy-first 50 \
  --scene-args "$DOG" --scene-name plush-dog --timeout 95 \
  --train-args '--pipeline.model.densify-grad-thresh 0.00001 --pipeline.model.stop-split-at 1300 --pipeline.model.num-downscales 0' \
  --allocators empty-cache expandable   # -> raw/densify-1e-5.json, raw/densify-1e-5.log
python scripts/gaussian_scaling.py --steps 1000 --out /tmp/scaling3 --busy-every 200 --busy-steps 10 --busy-first 50 \
  --scene-args "$DOG" --scene-name plush-dog --timeout 120 \
  --train-args '--pipeline.model.random-init True --pipeline.model.num-random 3000000 --pipeline.model.num-downscales 0 --pipeline.model.warmup-length 200 --pipeline.model.refine-every 100' \
  --allocators empty-cache   # -> raw/random-init-3M.json, raw/random-init-3M.log
# scaling.json holds the runs of the three commands together (how it was put together is not recorded);
# the report (scaling.md, plots/scaling.png) is re-rendered from it with:
python scripts/gaussian_scaling.py --from-json benchmarks/2026-11-23-h200-plush-dog-gaussian-scaling/scaling.json --out /tmp/scaling-report
# raw/mcmc-refine-every-10-failed.log: splat-plus-mcmc with --pipeline.model.refine-every 10 on plush-dog at full size,
# 2000 steps, allocators empty-cache and expandable; its exact command is not recorded.
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
