# 2x H200 (32 cores), 2026-11-30, commit dfba800 (raw/commit.txt), one session, seven calls. From the repository root
# after `source .device/setup.sh > /tmp/setup.txt 2>&1` in every call (its PATH and PYTHONPATH do not outlive a call);
# plush-dog and fox (../shared/data) copied into the git-ignored .gpurun/dog and .gpurun/fox, carried and copied to
# /tmp/dog and /tmp/fox. Every log (each run's ns-train and ns-eval output, start-up record, config, ns-eval JSON; the
# job's lane.log; not the per-step timing of runs whose timing is discarded): raw-logs.tar.xz.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH
export PYTHONPATH=$PWD/splatbench:/tmp/site

# Call 1: rahul-goel/fused-ssim (0ac916a, carried as source) built for the GPU tier
(cd .gpurun/fused-ssim && CUDA_ARCHITECTURES=90 python3 -m pip install -q --no-index --no-deps --no-build-isolation \
  --target /tmp/site .)

# Calls 2-4: splat-plus-lite against lite with --pipeline.model.efficient-late-prunes 4, 5 runs each (seeds 2-6),
# plush-dog on GPU 0 and fox on GPU 1, all ten runs of a scene at once on its GPU (quality and Gaussians only, timing
# discarded). The rule, fixed before any run (notes.md), in the job script's header.
# -> raw/plush-dog-results.{md,json}, raw/fox-results.{md,json}
R=/tmp/late; mkdir -p $R
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
COMMON='--methods splat-plus-lite lite-late4 --reference splat-plus-lite --steps 30000 --repeats 5 --first-repeat 2'
COMMON+=' --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1500'
V='lite-late4=splat-plus-lite --pipeline.model.efficient-late-prunes 4'
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py $COMMON --variant "$V" --scene-args "$DOG" --scene-name plush-dog \
  --out $R/dog &
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py $COMMON --variant "$V" --scene-args "$FOX" --scene-name fox \
  --out $R/fox &
wait

# Call 5: a 500-step parameter-distance check of gsplat's kernels against the recordable ones (A, A again, C). It
# failed: the script pinned no GPU, so each run trained on both ranks, and C's wrapper stopped on its own run
# directory ("already exists"). No figure; the tail of C's log is in raw-logs.tar.xz (divergence/).

# Call 6: every GPU test -> raw/gpu-tier.txt (53 passed, 8 failed: 5 found no ns-train, since this call did not
# source setup.sh; 3 are the CUDA-graph tests against fused-ssim, notes.md)
python3 -m pytest -m gpu -v -p no:cacheprovider -W ignore -rs --durations=20 tests

# Call 7: the five that found no ns-train, with setup.sh sourced -> raw/gpu-tier-rerun.txt (5 passed)
python3 -m pytest -m gpu -v -p no:cacheprovider -W ignore -rs tests/parallel/test_parallel.py \
  tests/training/test_gpu_paths.py -k "identical_replicas or ns_eval_and_ns_viewer or blender"
