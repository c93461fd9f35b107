# NVIDIA H200, 1 GPU; 2026-11-24; commits 2e8a736 (bench_ssim_one_row.json) and ebb103f (bench_ssim_tiles.json), as README.md says
# Notes: README.md here and ../2026-11-24-h200-fox-30k-fused-ssim/notes.md. Run from the repository root.
python scripts/bench_ssim.py --out /tmp/ssim   # on 2e8a736 -> bench_ssim_one_row.json
python scripts/bench_ssim.py --sizes 1x1080x1920 4x1080x1920 1x1000x1500 4x1000x1500 \
  --column-tiles 1x256 4x128 16x64 8x256 4x256 --out /tmp/ssim-tiles   # on ebb103f -> bench_ssim_tiles.json
# tiles.txt and check_default_tile.txt came from a standalone copy of ns_splat_plus/model/ssim.py that sets COLUMN_TILE
# (README.md); that copy and its command were not kept.
