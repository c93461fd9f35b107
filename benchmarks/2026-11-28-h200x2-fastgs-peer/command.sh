# 2 x H200 (nvidia-h200-x2, 32 cores), 2026-11-28, commit ec45523. From the repository root on the device, after
# `source .device/setup.sh` and bytecode compiled once (python3 -m compileall; PYTHONPYCACHEPREFIX=/tmp/pycache);
# .dog is ../shared/data/plush-dog copied into a git-ignored folder; .gpurun/fastgs/src is FastGS (fastgs/FastGS
# 44e02a5) exported and patched by `bash scripts/peers/fastgs/prepare.sh <FastGS git dir>`. As run: .gpurun/run.sh's
# job s58, outputs under /tmp/gj/s58/. 3 runs per method, fixed before any run; seeds 1-3 (--seed-per-repeat).
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
# 1. FastGS's three CUDA extensions, nothing else running (57-60 s each, in parallel)     -> logs in raw-logs.tar.xz
bash scripts/peers/fastgs/build.sh /tmp/gj/s58/fgs-build
# FastGS held out nerfstudio's 11 test views (scripts/peers/fastgs/fgs_run.py), so all three score the same images
export FGS_SPLIT=nerfstudio
Q="--methods splatfacto splat-plus-lite fastgs --gpus 1 --steps 30000 --seed-per-repeat --no-prebuild --scene-name plush-dog"
P="fastgs=bash scripts/peers/fastgs/train_one.sh {data} {run_dir} {seed}"
# 2. Repeat 1 of each method, one after another, each alone on the machine (GPU 0; GPU 1 idle)   -> raw/timed/
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py $Q --peer "$P" --repeats 1 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --timeout 900 --scene-args "$DOG" --out /tmp/gj/s58/timed
# 3. Repeats 2 (GPU 0) and 3 (GPU 1) at once; the three methods of a repeat train together on their GPU (quality only)
for k in 2 3; do
  CUDA_VISIBLE_DEVICES=$((k - 2)) python3 scripts/benchmark.py $Q --peer "$P" --first-repeat $k --repeats 1 \
    --concurrent-quality --timeout 1100 --scene-args "$DOG" --out /tmp/gj/s58/quality-r$k &   # -> raw/quality-r2/, raw/quality-r3/
done
wait
# 4. The merged report at the top (results.json, results.md, plots/), made here from the copies under raw/
python3 scripts/benchmark.py --from-json benchmarks/2026-11-28-h200x2-fastgs-peer/raw/timed/results.json \
  benchmarks/2026-11-28-h200x2-fastgs-peer/raw/quality-r2/results.json \
  benchmarks/2026-11-28-h200x2-fastgs-peer/raw/quality-r3/results.json --out benchmarks/2026-11-28-h200x2-fastgs-peer
# lite's refine records (densification.jsonl of each run) -> raw/densification/ in raw-logs.tar.xz
# The logs (raw/*/logs/*.log, raw/*/benchmark.log, raw/fastgs-build/*.log) are in raw-logs.tar.xz.
# lite - FastGS intervals (the report compares each method with splatfacto only):
python3 -c "
import json; from splatbench import stats
runs = json.load(open('benchmarks/2026-11-28-h200x2-fastgs-peer/results.json'))['runs']
for k in ('psnr', 'ssim', 'num_gaussians'):
    v = {m: [r[k] for r in runs if r['method'] == m] for m in ('splat-plus-lite', 'fastgs')}
    print(k, stats.welch_interval(v['fastgs'], v['splat-plus-lite']))"
# Operators per lite step at this commit and at c27cab3 (2026-11-26's 4.37 ms H100 step), on the CPU (a 2-core
# machine, no GPU), the tests' 32x24 synthetic scene, steps 600-619        -> raw/cpu-op-counts/{ec45523,c27cab3}.ops.json
python scripts/make_synthetic_scene.py /tmp/scene --views 24 --width 32 --height 24
mkdir /tmp/old && git archive c27cab3 ns_splat_plus | tar -x -C /tmp/old
NOEVAL="--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0"
for v in ec45523 c27cab3; do PP=; [ $v = c27cab3 ] && PP=/tmp/old
  PYTHONPATH=$PP HP_OUT=benchmarks/2026-11-28-h200x2-fastgs-peer/raw/cpu-op-counts/$v \
    python benchmarks/2026-11-28-h200x2-fastgs-peer/op_counts.py splat-plus-lite --machine.device-type cpu \
    --vis tensorboard $NOEVAL --max-num-iterations 3000 --output-dir /tmp/o-$v --data /tmp/scene colmap
done
