# 2x H200 (32 cores), 2026-11-30, commit cc530e8 (raw/commit.txt), one session, three calls. From the repository root
# after `source .device/setup.sh`; plush-dog (../shared/data/plush-dog) copied into the git-ignored .gpurun/dog,
# carried and copied to /tmp/dog. Every log (each run's ns-train and ns-eval output, densification.jsonl, start-up
# record, config; the job's lane.log): raw-logs.tar.xz.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH PYTHONPATH=/tmp/site
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'

# Call 1: the blender scene's GPU test (2fc8f09), never run on a GPU before -> raw/gpu-tests-blender.txt (2 passed)
CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu tests/training/test_gpu_paths.py \
  -k blender -p no:cacheprovider -q --timeout=600 -W ignore

# Call 2: splat-plus eager (A, the default command) against the same with the recordable kernels run eagerly
# (C: the previous folder's raw/eager_recordable.py, run as .gpurun/s78/eager_recordable.py, the same file: it sets the
# model's isect_capacity to 2**25 for every training render: the fixed-capacity
# tile lists and Triton's SH, no graph). Plush-dog, 30,000 steps, seeds 2-6, 5 runs each, fixed before any run with
# the rule in notes.md; five runs at once on each GPU (quality only, timing discarded).
R=/tmp/iso; mkdir -p $R
one() {  # gpu arm seed
  local cmd=(ns-train); [ $2 = C ] && cmd=(python3 benchmarks/2026-11-30-h200-plush-dog-lite-budget-growth-and-no-sync-probe/raw/eager_recordable.py)
  CUDA_VISIBLE_DEVICES=$1 "${cmd[@]}" splat-plus --output-dir $R --experiment-name $2$3 --timestamp t --vis tensorboard \
    --viewer.quit-on-train-completion True --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0 \
    --machine.seed $3 --pipeline.datamanager.train-cameras-sampling-seed $3 $DOG > $R/$2$3.train.log 2>&1 < /dev/null
  CUDA_VISIBLE_DEVICES=$1 ns-eval --load-config $R/$2$3/splat-plus/t/config.yml --output-path $R/$2$3.eval.json > $R/$2$3.eval.log 2>&1
  echo "$(date -u +%FT%TZ) $2$3 done" >> $R/lane.log
}
one 0 A 2 & one 0 A 3 & one 0 A 4 & one 0 C 2 & one 0 C 3 &
one 1 A 5 & one 1 A 6 & one 1 C 4 & one 1 C 5 & one 1 C 6 &
wait   # -> raw/{A,C}{2..6}.eval.json

# Call 3 (a fresh machine): every GPU test -> raw/gpu-tier.txt (55 passed, 6 failed: 5 found no ns-train on PATH, because
# setup.sh was sourced through a pipe here, so its PATH stayed in a subshell; 1 needs fused-ssim, not carried)
source .device/setup.sh 2>&1 | tail -1 && export PYTHONPATH=$PWD/splatbench:/tmp/site && \
  timeout 400 python3 -m pytest -m gpu -v -p no:cacheprovider -W ignore -rs --durations=20 tests

# the summary (here, on the development machine, in the extracted /tmp/iso) -> raw/summary.txt
(cd /tmp/iso && python "$OLDPWD"/benchmarks/2026-11-30-h200x2-splat-plus-recordable-kernels-eager-quality/raw/summary.py)
