# NVIDIA H200 (runs of earlier folders); 2026-11-24; merges only (added in 49cfe32)
# Notes: ../2026-11-24-h200-fox-b1-ab/notes.md ("Two earlier timed splatfacto runs"). Run from the repository root.
B=benchmarks/2026-11-24-h200-fox-pooled-all-splatfacto
# splatfacto's timed fox runs of ../2026-11-24-h200-fox-30k-fused-ssim and ../2026-11-24-h200-fused-loss, renumbered -> raw/splatfacto-earlier-timed/
# (as run: --from-json benchmarks/h200-2026-11-24/fox-30k-fused-ssim/timed_results.json
#  benchmarks/h200-2026-11-24/fused-loss/fox_timed_results.json ... --out benchmarks/h200-2026-11-24/settle/splatfacto-earlier-timed)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-30k-fused-ssim/raw/timed_results.json \
  benchmarks/2026-11-24-h200-fused-loss/raw/fox_timed_results.json --methods splatfacto --renumber-repeats \
  --out $B/raw/splatfacto-earlier-timed
# (as run: --from-json benchmarks/h200-2026-11-24/settle/fox-pooled/results.json
#  benchmarks/h200-2026-11-24/settle/splatfacto-earlier-timed/results.json ... --out benchmarks/h200-2026-11-24/settle/fox-pooled-all-splatfacto)
python scripts/benchmark.py --from-json benchmarks/2026-11-24-h200-fox-pooled-settle/results.json $B/raw/splatfacto-earlier-timed/results.json \
  --methods splatfacto splat-plus-fast --renumber-repeats --out $B
