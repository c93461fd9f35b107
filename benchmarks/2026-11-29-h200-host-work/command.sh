# 1x H200 (16 cores), 2026-11-29; s59 at 6b89c86; s62 and s63: d4e2a71 ("head") against 6b89c86 ("old": its ns_splat_plus
# first on PYTHONPATH); plush-dog copied into .dog/ (../shared/data/plush-dog); run from the repository root as .gpurun/run.sh
# jobs s59, s62, s63 (commit.txt in each raw/ folder). DOG='--data .dog colmap --colmap-path sparse/0 --downscale-factor 2'
DOG='--data .dog colmap --colmap-path sparse/0 --downscale-factor 2'
NOEVAL='--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0'

# s59 (6b89c86): torch.profiler (CPU + CUDA) over lite's steps 4095-4104 (a refine at 4100, full resolution), with a trace;
# the profiler is 2026-11-24's hostprof.py with hostprof.diff applied (a Chrome trace with HP_TRACE=1, a file per torchrun rank)
patch -s -o /tmp/hostprof.py benchmarks/2026-11-24-h200-plush-dog-host-light/hostprof.py benchmarks/2026-11-29-h200-host-work/hostprof.diff
CUDA_VISIBLE_DEVICES=0 HP_TRACE=1 HP_START=4095 HP_STEPS=10 HP_OUT=raw/refine-profile/refine \
  python3 /tmp/hostprof.py splat-plus-lite --vis tensorboard $NOEVAL \
  --max-num-iterations 12360 --output-dir /tmp/rp $DOG  # -> raw/refine-profile/ (log: refine.log)
# s59: lite's GPU busy at 0.15, 0.5 and 0.9 of its run, one run each, alone on the GPU
for at in 0.15 0.5 0.9; do
  python scripts/benchmark.py --methods splat-plus-lite --gpus 1 --steps 30000 --no-prebuild --gpu-busy-steps 50 \
    --gpu-busy-at $at --timeout 300 --scene-args "$DOG" --scene-name plush-dog --out raw/busy-$at  # -> raw/busy-$at/
done

# s62 (d4e2a71 against 6b89c86): the import of ns-train under a splat-plus command line, 3 each, alternating
for v in old head old head old head; do PP=; [ $v = old ] && PP=.wt-old  # .wt-old/ns_splat_plus: git archive 6b89c86
  { time PYTHONPATH=$PP python3 -c "import sys; sys.argv=['ns-train','splat-plus-lite']; import nerfstudio.scripts.train"; } \
    2>> raw/ab/import_$v.txt
done
# s62: lite's 10k schedule, no evaluation, 2 runs each, interleaved, each alone on the GPU (the benchmark's probe then still
# imported nerfstudio under its own command line, fixed in a003cad: the import saving is not in these process walls)
for run in old-1 head-1 head-2 old-2; do v=${run%-*}; PP=; [ $v = old ] && PP=.wt-old
  PYTHONPATH=splatbench:$PP python scripts/benchmark.py --methods splat-plus-lite --gpus 1 --steps 30000 --no-prebuild \
    --no-eval --timeout 240 --scene-args "$DOG" --scene-name plush-dog --out raw/ab/$run  # -> raw/ab/$run/
done
# s62: the GPU tests of the efficient strategy at head, and the new ground-truth test against 6b89c86's package
python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/strategy/test_efficient_strategy.py  # -> raw/ab/pytest_gpu_head.log
(cd .wt-old && python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/strategy/test_efficient_strategy.py -k ground_truth)  # -> raw/ab/pytest_gpu_old.log

# s63 (d4e2a71 against 6b89c86): the real ns-train's start-up, lite, 300 units (100 steps), an unrecorded warm-up run of each,
# then 3 rounds alternating; the "Start-up:" line and the process wall
for run in old-0 head-0 old-1 head-1 head-2 old-2 old-3 head-3; do v=${run%-*}; PP=; [ $v = old ] && PP=.wt-old
  PYTHONPATH=$PP ns-train splat-plus-lite --vis tensorboard $NOEVAL --max-num-iterations 300 --output-dir /tmp/su-$run $DOG
done  # -> raw/startup/walls.txt (logs: raw/startup/$run.log)
