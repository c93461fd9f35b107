# NVIDIA H200, 1 GPU; 2026-11-24; commit 0e15a0a (the code measured, as ../2026-11-24-h200-plush-dog-repeats/notes.md says)
# Notes: ../2026-11-24-h200-plush-dog-repeats/notes.md.
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast --steps 30000 --gpu-busy-steps 50 \
  --gpu-busy-at 0.67 --timeout 1200 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-table
# /tmp/r-fox-table/ -> results.json, results.md, readme_section.md, plots/; its log: fox_table.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
