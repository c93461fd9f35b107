# 1x H200 (16 cores), 2026-11-29, commit 00ba1e5 (raw/commit.txt); plush-dog copied into .dog/ (../shared/data/plush-dog),
# run from the repository root after `source .device/setup.sh` (no compileall: the device runs Python with
# PYTHONDONTWRITEBYTECODE=1, so every process here compiled nerfstudio's bytecode at its start; notes.md).
# The number of runs (5 of splat-plus-lite and of lite-fused, seeds 1-5; 1 of the others) was fixed before any ran.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data .dog colmap --colmap-path sparse/0 --downscale-factor 2'
NOEVAL='--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0'
FUSED='lite-fused=splat-plus-lite --pipeline.model.fused-loss True'
# 0) the first processes on the fresh machine (Triton compiles the loss's kernels in their warmup), 100 steps each
for f in False True; do
  { time ns-train splat-plus-lite --vis tensorboard $NOEVAL --max-num-iterations 300 --pipeline.model.fused-loss $f \
      --output-dir /tmp/cold-$f $DOG ; } > raw/cold/cold-fused-$f.log 2>&1  # -> raw/cold/cold-fused-$f.log
done
# 1) the four methods and lite with the fused loss, repeat 1 (seed 1), each alone on the GPU, one after the other
python3 scripts/benchmark.py --methods splat-plus-lite splatfacto splat-plus splat-plus-fast lite-fused --variant "$FUSED" \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/timed  # -> raw/timed/
# 2) splat-plus-lite and lite-fused repeats 2-5 (seeds 2-5), all 8 trained at the same time (quality only)
python3 scripts/benchmark.py --methods splat-plus-lite lite-fused --variant "$FUSED" \
  --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 700 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/quality  # -> raw/quality/
# the merged report (here, on the development machine) and the Welch intervals of lite-fused - splat-plus-lite
python scripts/benchmark.py --from-json benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite/raw/timed/results.json \
  benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite/raw/quality/results.json --reference splatfacto \
  --out benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite
PYTHONPATH=splatbench python -c "
import json; from splatbench import stats
runs = json.load(open('benchmarks/2026-11-29-h200-plush-dog-four-methods-and-fused-lite/results.json'))['runs']
for k in ('psnr', 'ssim'):
    v = {m: [r[k] for r in runs if r['method'] == m] for m in ('splat-plus-lite', 'lite-fused')}
    print(k, stats.welch_interval(v['splat-plus-lite'], v['lite-fused']))"
