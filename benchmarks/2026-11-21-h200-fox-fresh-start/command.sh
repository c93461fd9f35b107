# NVIDIA H200, 1 GPU, the first training process on a fresh machine; 2026-11-21; code commit not recorded (the results were added in 923b64e)
# Run from the repository root. The scene is warmup_check.py's default, fox 3000 steps:
#   --data ../shared/data/fox instant-ngp-data --eval-mode interval --eval-interval 8
# (--out as in the run folders recorded in fresh.json)
python scripts/warmup_check.py fresh --runs 3 --out /tmp/wc   # /tmp/wc/fresh.json -> fresh.json
