# NVIDIA H200, 1 GPU; 2026-11-21; code commit not recorded (the results were added in 923b64e)
# Run from the repository root. As run, the fox scene was at /work/main/.fox (the README quoted --data ../shared/data/fox).
python scripts/benchmark.py --steps 3000 --eval-every 1000 --timeout 280 \
  --scene-args '--data /work/main/.fox instant-ngp-data --eval-mode interval --eval-interval 8' --scene-name fox \
  --out benchmarks/2026-11-21-h200-fox-3k
# (as run: --out benchmarks/fox-h200)
