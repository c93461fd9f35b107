# NVIDIA H200 (runs of earlier folders and of ../2026-11-24-h200-fox-per-image); 2026-11-24 to 2026-11-25; a merge only
# (added in 5ab58a4). Notes: ../2026-11-24-h200-fox-per-image/notes.md. Run from the repository root.
P=benchmarks/2026-11-24-h200-fox-per-image/raw
# (as run: --from-json benchmarks/h200-2026-11-24/settle/fox-pooled-all-splatfacto/results.json
#  benchmarks/h200-2026-11-24/per-image/fox_quality_sf10_results.json ... --out benchmarks/h200-2026-11-24/per-image/fox-pooled)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-pooled-all-splatfacto/results.json \
  $P/fox_quality_sf10_results.json $P/fox_quality_sf11_results.json $P/fox_quality_fast10_results.json \
  $P/fox_quality_fast13_results.json $P/fox_quality_fast15_results.json \
  --methods splatfacto splat-plus-fast --renumber-repeats --out benchmarks/2026-11-24-h200-fox-pooled-all-runs
