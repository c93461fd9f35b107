# 1x H200 (16 cores), 2026-11-29, commit 46b9864 (raw/commit.txt); plush-dog copied into .dog/ (../shared/data/plush-dog),
# run from the repository root after `source .device/setup.sh`, as one background job (raw/s67.log).
# The number of runs was fixed before any ran: 5 of splat-plus-lite and 5 of splatfacto (seeds 1-5), repeat 1 of each
# timed alone. splatfacto's repeats 4-5 did not fit in that session's device time; they ran in the next session
# (step 4), at the same commit: from an archive of 46b9864 (`git archive 46b9864`) carried to /tmp/wt-old.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data .dog colmap --colmap-path sparse/0 --downscale-factor 2'
# the bytecode, compiled once, as a pip install does (the device's Python writes none)
python3 -m compileall -q -j 16 /usr/lib/python3.12 $(python3 -c "import site; print(' '.join(site.getsitepackages()))") /tmp/site
# 0) the GPU tier's training paths, with the later-size warmup's test (ff8b86d)
timeout 400 python3 -m pytest -m gpu tests/training/test_gpu_paths.py -q -p no:cacheprovider  # -> raw/gpu-tests.log (its last 30 lines)
# 1) repeat 1 of each (seed 1), each alone on the GPU, one after the other
python3 scripts/benchmark.py --methods splat-plus-lite splatfacto \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/dog-timed  # -> raw/timed/
# 2) repeats 2-3 of both (seeds 2-3), all four trained at the same time (quality only)
python3 scripts/benchmark.py --methods splat-plus-lite splatfacto \
  --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 900 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-quality-a  # -> raw/quality-a/
# 3) splat-plus-lite's repeats 4-5 (seeds 4-5), together (quality only)
python3 scripts/benchmark.py --methods splat-plus-lite \
  --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 600 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-quality-b  # -> raw/quality-b/
# 4) the next session (2026-11-29, 08:29 UTC, 1x H200): splatfacto's repeats 4-5 (seeds 4-5), together, quality
#    only, beside other quality runs on the same GPU (fox, benchmarks/2026-11-29-h200-fox-lite-budget-growth/);
#    plush-dog copied to /tmp/dog, hence --data-copies below (raw/s69b.log in raw-logs.tar.xz)
(cd /tmp/wt-old && PYTHONPATH=/tmp/wt-old:/tmp/wt-old/splatbench:$PYTHONPATH python3 scripts/benchmark.py --methods splatfacto \
  --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1500 \
  --scene-args '--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2' --scene-name plush-dog \
  --out /tmp/res/dog-quality-c)  # -> raw/quality-c/
# the merged report, on the development machine
python scripts/benchmark.py --from-json benchmarks/2026-11-29-h200-plush-dog-lite-against-splatfacto/raw/timed/results.json \
  benchmarks/2026-11-29-h200-plush-dog-lite-against-splatfacto/raw/quality-a/results.json \
  benchmarks/2026-11-29-h200-plush-dog-lite-against-splatfacto/raw/quality-b/results.json \
  benchmarks/2026-11-29-h200-plush-dog-lite-against-splatfacto/raw/quality-c/results.json --data-copies \
  --reference splatfacto --out benchmarks/2026-11-29-h200-plush-dog-lite-against-splatfacto
