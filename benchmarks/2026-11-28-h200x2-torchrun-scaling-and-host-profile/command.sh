# 2x H200 (nvidia-h200-x2; two machines, one per part), 2026-11-28, commit b071245. From the repository root on the
# device; DOG is ../shared/data/plush-dog copied into .dog/. Set-up: the carried wheels installed into /tmp/site
# (as .device/setup.sh), gsplat built, then bytecode compiled once as a user's pip install leaves it
# (python3 -m compileall -q -j 8 <stdlib> <site-packages> /tmp/site; PYTHONPYCACHEPREFIX=/tmp/pycache)   -> raw/prof/compileall_time.txt
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
NOEVAL="--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0"
# A (first machine). imports alone, twice   -> raw/prof/import_train.txt
time python3 -c "import nerfstudio.scripts.train"
# A. short runs for the start-up line (the first process on the machine compiles the kernels: "cold")   -> raw/prof/walls.txt
ns-train splat-plus-lite --machine.num-devices 1 --vis tensorboard --max-num-iterations 1500 $DOG   # lite-w1-cold, then again: lite-w1
ns-train splat-plus-lite --machine.num-devices 2 --vis tensorboard --max-num-iterations 1500 $DOG   # lite-w2
ns-train splat-plus --machine.num-devices 1 --vis tensorboard --max-num-iterations 1500 $DOG        # sp-w1
# A. host profiles (torch.profiler over HP_STEPS steps from HP_START), no evaluation   -> raw/prof/
#    hostprof.py is benchmarks/2026-11-24-h200-plush-dog-host-light/hostprof.py with three changes: under torchrun each
#    rank appends .rank<RANK> to HP_OUT; HP_TRACE=1 also writes the profiler's Chrome trace (HP_OUT.trace.json); the
#    JSON adds the mean and the 90th percentile of the 300 steps before the window
CUDA_VISIBLE_DEVICES=0 HP_START=3000 HP_STEPS=30 HP_OUT=hp_sp_w1 python3 hostprof.py splat-plus --vis tensorboard $NOEVAL --max-num-iterations 3040 $DOG
CUDA_VISIBLE_DEVICES=0 HP_TRACE=1 HP_START=3000 HP_STEPS=20 HP_OUT=hp_lite_w1 python3 hostprof.py splat-plus-lite --vis tensorboard $NOEVAL --max-num-iterations 9120 $DOG
HP_TRACE=1 HP_START=1500 HP_STEPS=12 HP_OUT=hp_sp_w2 torchrun --nproc-per-node 2 hostprof.py splat-plus --vis tensorboard $NOEVAL --max-num-iterations 3040 $DOG
HP_START=1500 HP_STEPS=30 HP_OUT=hp_sp_w2_nooverlap torchrun --nproc-per-node 2 hostprof.py splat-plus --vis tensorboard $NOEVAL \
  --data-parallel.overlap-gradient-averaging False --max-num-iterations 3080 $DOG
python3 raw/prof/trace_summary.py hp_sp_w2.rank0.trace.json.gz 12   # and rank1, and hp_lite_w1 (20)   -> raw/prof/trace_summary.txt (traces not kept)
# B (second machine). W = 1 and W = 2 side by side under torchrun, each run alone on the machine
python3 scripts/benchmark.py --methods splat-plus --gpus 1 2 --launcher torchrun --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --no-prebuild --timeout 400 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/scale/bench   # -> results.json, results.md, plots/
python3 scripts/benchmark.py --methods splat-plus-lite --gpus 1 2 --launcher torchrun --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --no-prebuild --timeout 300 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/scale/bench-lite   # -> raw/bench-lite/
# (each run's <run>/ranks/startup_rank<k>.json -> raw/startup/)
# The logs (A's runs and profiles: raw/prof-logs/; B's ns-train and ns-eval: logs/, raw/bench-lite/logs/) are in raw-logs.tar.xz.
