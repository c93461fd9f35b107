# NVIDIA H200, 1 GPU; 2026-11-24; commit 0e15a0a (the code of the runs added here, as ../2026-11-24-h200-plush-dog-repeats/notes.md says)
# Notes: ../2026-11-24-h200-plush-dog-repeats/notes.md. A merge only; run from the repository root.
B=benchmarks/2026-11-24-h200-fox-pooled-late-night
# raw/fox_table_as_r5r6_quality_results.json: the runs of ../2026-11-24-h200-fox-30k-table renumbered (splatfacto 1 -> 5,
# splat-plus-fast 1 -> 6) for quality, timing discarded ("renumbered" in the file; how it was written is not recorded)
# (as run: --from-json benchmarks/h200-2026-11-24/no-sync/fox/results.json
#  benchmarks/h200-2026-11-24/repeats/fox_table_as_r5r6_quality_results.json ... --out benchmarks/h200-2026-11-24/repeats/fox-pooled)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-no-sync/results.json $B/raw/fox_table_as_r5r6_quality_results.json \
  --methods splatfacto splat-plus splat-plus-b2 splat-plus-fast --out $B
