# 2x NVIDIA H200 (one host, NVLink), torchrun; 2026-11-21; commit 4eb83f1 (the step without host-device syncs, added with these results)
# Notes: ../2026-11-21-h200-fox-3k/notes.md. Run from the repository root; the fox scene was at /work/main/.fox
# (the README quoted --data ../shared/data/fox and the output folder results/scaling).
python scripts/scaling_check.py /tmp/scaling --gpus 1 2 --launchers torchrun \
  --scene-args '--data /work/main/.fox instant-ngp-data --eval-mode interval --eval-interval 8'
# scaling_check.py runs the benchmark (the command recorded in results.json):
#   python scripts/benchmark.py --methods splat-plus --gpus 1 2 --steps 3000 \
#     --scene-args '--data /work/main/.fox instant-ngp-data --eval-mode interval --eval-interval 8' --launcher torchrun --out /tmp/scaling/torchrun
# /tmp/scaling/scaling.md -> scaling.md; /tmp/scaling/torchrun/ -> results.json, results.md, readme_section.md, plots/
