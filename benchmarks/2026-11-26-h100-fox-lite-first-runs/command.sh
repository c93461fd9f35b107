# H100, 2026-11-26 (5ab0a5f, the efficient strategy with gsplat's pruning order); raw/before-fix-h200: H200, the same day, 0775b91.
# Run from the repository root on the device, with fox copied to /tmp/data/fox and `source .device/setup.sh` (DEVELOPERS.md).
# The first splat-plus-lite runs on a GPU: one run each, alone on the GPU; splatfacto's 30k schedule (the preset runs 2,500 steps of 4 cameras).
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
FOX='--data /tmp/data/fox instant-ngp-data --eval-mode interval --eval-interval 8'
# 0775b91 on an H200 -> raw/before-fix-h200/ (results.json, the train and eval logs, densification.jsonl)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --timeout 400 --no-prebuild --scene-args "$FOX" --scene-name fox --out /tmp/res/lite0
# 5ab0a5f on an H100 -> results.json, results.md, logs/
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --timeout 400 --no-prebuild --scene-args "$FOX" --scene-name fox --out /tmp/res/litefix
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
