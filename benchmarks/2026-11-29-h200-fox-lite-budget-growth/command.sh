# 1x H200 (16 cores), 2026-11-29, commit e369513 (raw/commit.txt); fox (../shared/data/fox) copied to /tmp/fox on the
# device in two halves (one call's carry holds at most 64 MiB), run from the repository root after
# `source .device/setup.sh`, as one background job (raw/s69b.log in raw-logs.tar.xz). The number of runs was fixed
# before any ran: 5 of each (repeats 2-6, seeds 2-6), all ten trained at the same time on one GPU, for quality and
# Gaussian count only (no run timed), beside splatfacto's plush-dog repeats 4-5 of
# ../2026-11-29-h200-plush-dog-lite-against-splatfacto/ (its command.sh, step 4).
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
python3 scripts/benchmark.py --methods splat-plus-lite lite-g06 \
  --variant "lite-g06=splat-plus-lite --pipeline.model.efficient-budget-growth 0.6" \
  --steps 30000 --repeats 5 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1500 \
  --scene-args "$FOX" --scene-name fox --out /tmp/res/fox-growth  # -> results.json, results.md, readme_section.md, plots/
