# 2x H200 (nvidia-h200-x2), 2026-11-28, commit 4985eb6 (main) and branch wip/gradient-buckets b612932 (bucket: its
# ns_splat_plus/ copied into .wt-bucket/ and put first on PYTHONPATH). From the repository root on the device, after
# `source .device/setup.sh` and bytecode compiled once (python3 -m compileall; PYTHONPYCACHEPREFIX=/tmp/pycache);
# DOG is ../shared/data/plush-dog copied into .dog/; hostprof.py is
# benchmarks/2026-11-28-h200x2-torchrun-scaling-and-host-profile's (the median of steps 1,200-1,499 before its 5-step
# profile is the figure read).
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
NOEVAL="--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0"
# 1. A/B at W = 2: rounds 1-2 main then bucket   -> raw/bucket_ab/; rounds 1-4 again, the order alternating   -> raw/bucket_ab4/
PYTHONPATH=/tmp/site HP_START=1500 HP_STEPS=5 HP_OUT=main_r1 torchrun --nproc-per-node 2 hostprof.py splat-plus --vis tensorboard \
  $NOEVAL --max-num-iterations 3040 $DOG
PYTHONPATH=.wt-bucket:/tmp/site HP_START=1500 HP_STEPS=5 HP_OUT=bucket_r1 torchrun --nproc-per-node 2 hostprof.py splat-plus --vis tensorboard \
  $NOEVAL --max-num-iterations 3040 $DOG
# 2. W = 1 and W = 2 side by side under torchrun at main (the A/B chose main), each run alone   -> results.json, results.md, plots/
python3 scripts/benchmark.py --methods splat-plus --gpus 1 2 --launcher torchrun --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --no-prebuild --timeout 400 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/s54b/bench
# (each run's <run>/ranks/startup_rank<k>.json -> raw/startup/)
# The logs (logs/, raw/bucket_ab*/*.log) are in raw-logs.tar.xz.
