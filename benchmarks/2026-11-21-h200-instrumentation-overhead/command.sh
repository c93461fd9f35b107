# NVIDIA H200, 1 GPU; 2026-11-21; commit 4eb83f1 (it added overhead-interleaved.json and the overhead.json of this folder;
# a first overhead.json, replaced then, came with 923b64e)
# Run from the repository root. The scene is warmup_check.py's default, fox 3000 steps:
#   --data ../shared/data/fox instant-ngp-data --eval-mode interval --eval-interval 8
# (--out as in the run folders recorded in the JSON files)
python scripts/warmup_check.py overhead --pairs 2 --out /tmp/ovh                       # /tmp/ovh/overhead.json -> overhead.json
python scripts/warmup_check.py interleave --runs 2 --toggle-every 100 --out /tmp/ovh   # /tmp/ovh/interleave.json -> overhead-interleaved.json
