# 4x H200 (nvidia-h100-x4 lent as nvidia-h200-x4), 2026-11-28, commit 0d1143d (A-C); 2x H200, the session's working tree
# with LPIPS built lazily (D). From the repository root on the device; DOG is ../shared/data/plush-dog copied into .dog/.
# Set-up: the carried wheels installed into /tmp/site (as .device/setup.sh), gsplat built; for D also bytecode (below).
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
# A. imports alone, without bytecode (the device's Python runs with PYTHONDONTWRITEBYTECODE=1)   -> raw/import_without_bytecode.txt, raw/importtime_without_bytecode.txt
time python3 -c "import nerfstudio.scripts.train"; python3 -X importtime -c "import nerfstudio.scripts.train"
# B. host profiles (torch.profiler, 30 steps), splat-plus on GPU 0 and torchrun W = 2 on GPUs 2, 3   -> raw/hostprof/
#    hostprof.py is benchmarks/2026-11-24-h200-plush-dog-host-light/hostprof.py with one line changed: under torchrun
#    each rank appends .rank<RANK> to HP_OUT
HP_START=3000 HP_STEPS=30 HP_OUT=hostprof_sp python3 hostprof.py splat-plus --vis tensorboard --max-num-iterations 3100 $DOG
HP_START=1500 HP_STEPS=30 HP_OUT=hostprof_sp_w2 torchrun --nproc-per-node 2 hostprof.py splat-plus --vis tensorboard --max-num-iterations 3400 $DOG
# C. W = 1, 2, 4 side by side (ns-train's spawn), each run alone on the machine; then splat-plus-lite (W = 2 was refused by the tool, see notes)
python3 scripts/benchmark.py --methods splat-plus --gpus 1 2 4 --launcher spawn --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --no-prebuild --timeout 700 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/base/bench   # -> results.json, results.md, plots/
python3 scripts/benchmark.py --methods splat-plus-lite --gpus 1 2 --launcher spawn --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.5 \
  --no-prebuild --timeout 500 --scene-args "$DOG" --scene-name plush-dog --out /tmp/gj/base/bench-lite   # -> raw/bench-lite/
# (each run's <run>/ranks/startup_rank<k>.json -> raw/startup/)
# D. with bytecode compiled once (python3 -m compileall -q -j 8 <stdlib> <site-packages> /tmp/site, PYTHONPYCACHEPREFIX=/tmp/pycache),
#    splat-plus-lite for 1,000 camera steps, W = 1, then under cProfile, then W = 2   -> raw/after/
ns-train splat-plus-lite --machine.num-devices 1 --vis tensorboard --max-num-iterations 3000 $DOG
python3 -m cProfile -o lite-w1.prof $(which ns-train) splat-plus-lite --machine.num-devices 1 --vis tensorboard --max-num-iterations 3000 $DOG
ns-train splat-plus-lite --machine.num-devices 2 --vis tensorboard --max-num-iterations 3000 $DOG
# The logs (ns-train and ns-eval of C, the runs of B and D) are in raw-logs.tar.xz (tar -xJf raw-logs.tar.xz).
