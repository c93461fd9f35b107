# 1x H200 (16 cores), 2026-11-30, commit aa93637 (raw/commit.txt), two leases of one session. From the repository root
# after `source .device/setup.sh`; plush-dog (../shared/data/plush-dog) copied into the git-ignored .gpurun/dog, carried
# and copied to /tmp/dog. Every log (the benchmark's runs, the probe's two runs, the job logs): raw-logs.tar.xz.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'

# Lease 1, call 1: the graphed step's and the preload's GPU tests (the random-background test of 41c8c52 and the SH-3
# every-Parameter test of 1aecc5a for the first time on a GPU) -> raw/gpu-tests.txt (9 passed)
PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu tests/training/test_graphed_step_gpu.py \
  tests/training/test_gpu_preload.py -p no:cacheprovider -q --timeout=400 -W ignore

# Lease 1, call 2: lite's budget growth 5 (the preset) against 0.6 on plush-dog, 5 runs each (seeds 2-6), all ten at
# once on the GPU (quality and count only), plan and rule fixed before (notes.md) -> raw/dog_growth_results.json
PYTHONPATH=$PWD/splatbench:/tmp/site python3 scripts/benchmark.py --methods splat-plus-lite lite-g06 \
  --variant "lite-g06=splat-plus-lite --pipeline.model.efficient-budget-growth 0.6" --reference splat-plus-lite \
  --steps 30000 --repeats 5 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1500 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-growth

# Lease 2 (a fresh machine, no bytecode: start-up figures mean nothing here): splat-plus's eager step (A) against the
# same with the recordable kernels run eagerly (C: raw/eager_recordable.py, 2**23 tile slots, no host read), one run
# each alone on the GPU, A first, seed 2 -> raw/probe_{A,C}_eval.json, raw/probe_{A,C}_startup.json
one() {  # arm: A or C
  local cmd=(/tmp/site/bin/ns-train); [ $1 = C ] && cmd=(python3 raw/eager_recordable.py)
  EAGER_ISECT_CAPACITY=8388608 PYTHONPATH=/tmp/site "${cmd[@]}" splat-plus --output-dir /tmp/res2 --experiment-name $1 \
    --timestamp t --vis tensorboard --viewer.quit-on-train-completion True --steps-per-eval-image 0 \
    --steps-per-eval-batch 0 --steps-per-eval-all-images 0 --machine.seed 2 \
    --pipeline.datamanager.train-cameras-sampling-seed 2 $DOG > /tmp/res2/$1.train.log 2>&1 < /dev/null
  PYTHONPATH=/tmp/site ns-eval --load-config /tmp/res2/$1/splat-plus/t/config.yml --output-path /tmp/res2/$1.eval.json
}
mkdir -p /tmp/res2 && one A && one C

# the report (here, on the development machine)
H=benchmarks/2026-11-30-h200-plush-dog-lite-budget-growth-and-no-sync-probe
python scripts/benchmark.py --from-json $H/raw/dog_growth_results.json --reference splat-plus-lite --out $H/plush-dog
