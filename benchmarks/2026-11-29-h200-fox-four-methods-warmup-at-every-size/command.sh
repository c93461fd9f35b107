# 1x H200 (16 cores), 2026-11-29, commit 3416c67 (raw/commit.txt); fox (../shared/data/fox) copied to /tmp/fox on the
# device in two halves (one call's carry holds at most 64 MiB), run from the repository root after
# `source .device/setup.sh`. The number of runs (5 of splat-plus-lite, seeds 1-5; 1 of the others; 1 profiled lite
# run) was fixed before any ran.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
NOEVAL='--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0'
# the device's Python writes no bytecode (PYTHONDONTWRITEBYTECODE=1): compile it once, as a pip install does
python3 -m compileall -q -j 16 /usr/lib/python3.12 $(python3 -c "import site; print(' '.join(site.getsitepackages()))") /tmp/site
# 0) the first process on the fresh machine (Triton compiles the loss's kernels in its warmup): 100 lite steps, the
#    resolution schedule shortened so that the run, and so its warmup, reaches every size
{ time ns-train splat-plus-lite --vis tensorboard $NOEVAL --max-num-iterations 300 --pipeline.model.resolution-schedule 90 \
    --output-dir /tmp/cold-fox $FOX ; } > raw/cold/cold-fox.log 2>&1  # -> raw/cold/cold-fox.log
# 1) the four methods, repeat 1 (seed 1), each alone on the GPU, one after the other
python3 scripts/benchmark.py --methods splat-plus-lite splatfacto splat-plus splat-plus-fast \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/fox-timed  # -> raw/timed/
# 2) splat-plus-lite repeats 2-5 (seeds 2-5), trained at the same time (quality only)
python3 scripts/benchmark.py --methods splat-plus-lite \
  --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 700 \
  --scene-args "$FOX" --scene-name fox --out /tmp/res/fox-quality  # -> raw/quality/
# 3) one more lite run, alone, with 200 steps profiled from half-way (GPU busy per step; the profiler slows its run)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --no-prebuild --timeout 600 --gpu-busy-steps 200 \
  --gpu-busy-at 0.5 --scene-args "$FOX" --scene-name fox --out /tmp/res/fox-busy  # -> raw/busy/
# the merged report (here, on the development machine)
python scripts/benchmark.py --from-json benchmarks/2026-11-29-h200-fox-four-methods-warmup-at-every-size/raw/timed/results.json \
  benchmarks/2026-11-29-h200-fox-four-methods-warmup-at-every-size/raw/quality/results.json --reference splatfacto \
  --out benchmarks/2026-11-29-h200-fox-four-methods-warmup-at-every-size
