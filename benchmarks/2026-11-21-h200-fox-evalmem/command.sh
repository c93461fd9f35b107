# NVIDIA H200, 1 GPU; 2026-11-21; code commit not recorded (the results were added in 923b64e)
# The command of ../2026-11-21-h200-fox-3k with --methods splat-plus, run after the evaluation-memory change
# (notes: ../2026-11-21-h200-fox-3k/notes.md). Run from the repository root; the fox scene was at /work/main/.fox.
python scripts/benchmark.py --methods splat-plus --steps 3000 --eval-every 1000 --timeout 200 \
  --scene-args '--data /work/main/.fox instant-ngp-data --eval-mode interval --eval-interval 8' --scene-name fox --out /tmp/evmem
# /tmp/evmem/results.json -> results.json
