# 2x NVIDIA H200 (one host), torchrun; 2026-11-24; commit 1121f6c (as ../2026-11-24-h200-fox-b1-ab/notes.md says)
# Notes: ../2026-11-24-h200-fox-b1-ab/notes.md ("2 GPUs").
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
# From the device script as run (x2.sh, removed): splat-plus on 1 and on 2 GPUs, each alone, one command.
nvidia-smi --query-gpu=index,name --format=csv,noheader
python scripts/benchmark.py --methods splat-plus --gpus 1 2 --steps 3000 --gpu-busy-steps 50 --timeout 400 \
  --scene-args "$FOX" --scene-name fox --out /tmp/r-x2 > /tmp/x2.blog 2>&1   # -> results.json, results.md; its log: benchmark.log
find /tmp/r-x2 -name "rank*.json"   # the two ranks' checksums -> rank0.json, rank1.json
grep -h "splat-plus: using" -r /tmp/r-x2 | head -3
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
