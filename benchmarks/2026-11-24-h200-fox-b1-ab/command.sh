# NVIDIA H200, 1 GPU; 2026-11-24; commit 1121f6c against 3b8d9ff (as notes.md says)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/fox .data/
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
B=benchmarks/2026-11-24-h200-fox-b1-ab
# From the device script as run (b1_ab.sh, removed): 2 runs of this code and 2 of 3b8d9ff, all four at once on one GPU.
# 3b8d9ff's tree (git archive 3b8d9ff | tar -x -C .old) was carried to the device; PYTHONPATH puts it before the installed
# checkout, so the second benchmark and its ns-train children import the old code (its runs' config.yml has no tight_tiles).
# /tmp/site held the installed packages on the device.
rm -rf /tmp/repo-old && cp -r .old /tmp/repo-old && ln -s "$PWD/.data" /tmp/repo-old/.data
PYTHONPATH=/tmp/repo-old:/tmp/site python -c "import ns_splat_plus; print('old code from', ns_splat_plus.__file__)"
python -c "import ns_splat_plus; print('head code from', ns_splat_plus.__file__)"
python scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat 2 \
  --concurrent-quality --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-b1-head \
  > /tmp/b1_head.blog 2>&1 &   # -> raw/b1_ab_head_results.json, .md, raw/b1_ab_head.log
(cd /tmp/repo-old && PYTHONPATH=/tmp/repo-old:/tmp/site python scripts/benchmark.py --methods b1-3b8d9ff --variant "b1-3b8d9ff=splat-plus" \
  --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --no-prebuild --timeout 1700 --scene-args "$FOX" \
  --scene-name fox --out /tmp/r-b1-old > /tmp/b1_old.blog 2>&1) &   # -> raw/b1_ab_3b8d9ff_results.json, .md, raw/b1_ab_3b8d9ff.log
wait
# the merged report (as run: --from-json benchmarks/h200-2026-11-24/settle/b1_ab_head_results.json
#  benchmarks/h200-2026-11-24/settle/b1_ab_3b8d9ff_results.json --out benchmarks/h200-2026-11-24/settle/b1-ab)
python scripts/benchmark.py --from-json $B/raw/b1_ab_head_results.json $B/raw/b1_ab_3b8d9ff_results.json --out $B
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
