# NVIDIA H100 80GB HBM3, 1 GPU; 2026-11-23; code commit not recorded (the results were added in 11df8af)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
# The four methods in one command (notes.md). Its log, raw/fox_bench.log, ends in the splat-plus-fast run
# (splat-plus-mcmc did not finish inside the command's time) and no results.json of it was kept:
# raw/probe_splat-plus-1gpu.json and raw/probe_splatfacto-1gpu.json are its first two runs' probe records.
python scripts/benchmark.py --methods splat-plus splatfacto splat-plus-fast splat-plus-mcmc --steps 3000 \
  --eval-every 1000 --gpu-busy-steps 50 --scene-args "$FOX" --scene-name fox --out /tmp/fox
# splat-plus-fast alone
python scripts/benchmark.py --methods splat-plus-fast --steps 3000 --gpu-busy-steps 50 --scene-args "$FOX" \
  --scene-name fox --out /tmp/fast   # -> raw/fast_results.json, raw/fast.log
pytest -m gpu tests   # -> pytest_gpu.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
