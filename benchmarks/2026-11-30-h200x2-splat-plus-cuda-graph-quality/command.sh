# 2x H200 (32 cores), 2026-11-30, commit c8dd4ae (raw/commit.txt), one machine, from the repository root after
# `source .device/setup.sh`; plush-dog (../shared/data/plush-dog) copied to /tmp/dog. The session's scripts were
# .gpurun/s74/prof.sh (step 1) and .gpurun/s74/job.sh (step 2), their variables expanded here.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH
export PYTHONPATH=$PWD/splatbench:/tmp/site
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'

# 1) start-up, GPU 0 alone: the default splat-plus-lite command (viewer on), 30 steps: a cold run, two plain runs, one
#    under cProfile; each run's ranks/startup_rank0.json -> raw/startup/parts.txt, the profile -> raw/startup/prof_*.txt
for k in cold p1 p2; do
  CUDA_VISIBLE_DEVICES=0 ns-train splat-plus-lite --max-num-iterations 30 --output-dir /tmp/prof --experiment-name $k \
    --timestamp t $DOG < /dev/null
done
CUDA_VISIBLE_DEVICES=0 python3 -m cProfile -o startup.prof /tmp/site/bin/ns-train splat-plus-lite \
  --max-num-iterations 30 --output-dir /tmp/prof --experiment-name prof --timestamp t $DOG < /dev/null

# 2) quality only: splat-plus eager against splat-plus --cuda-graph True, 5 runs each (repeats 2-6, seeds 2-6), the
#    four commands at once, two on each GPU; every run of a GPU trains at the same time (timing discarded)
G='sp-graph=splat-plus --cuda-graph True'
C='--steps 30000 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1650 --scene-name plush-dog'
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus --reference splat-plus --repeats 3 --first-repeat 2 \
  $C --scene-args "$DOG" --out /tmp/res/g0_eager &  # -> raw/g0_eager_results.json
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods sp-graph --reference sp-graph --variant "$G" --repeats 2 \
  --first-repeat 2 $C --scene-args "$DOG" --out /tmp/res/g0_graph &  # -> raw/g0_graph_results.json
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus --reference splat-plus --repeats 2 --first-repeat 5 \
  $C --scene-args "$DOG" --out /tmp/res/g1_eager &  # -> raw/g1_eager_results.json
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods sp-graph --reference sp-graph --variant "$G" --repeats 3 \
  --first-repeat 4 $C --scene-args "$DOG" --out /tmp/res/g1_graph &  # -> raw/g1_graph_results.json
wait

# 3) GPU 0 alone (the job over): the default `ns-train splat-plus`, 30,000 steps, its process start and exit
#    -> raw/startup/splat-plus-default-*. This call did not export TORCH_CUDA_ARCH_LIST (see notes.md).
S=$(date +%s.%N); CUDA_VISIBLE_DEVICES=0 ns-train splat-plus --output-dir /tmp/sp --experiment-name sp --timestamp t \
  $DOG < /dev/null; echo "start $S exit $(date +%s.%N)"

# the report, here on the development machine
H=benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality
python scripts/benchmark.py --from-json $H/raw/g0_eager_results.json $H/raw/g1_eager_results.json \
  $H/raw/g0_graph_results.json $H/raw/g1_graph_results.json --reference splat-plus --out $H/plush-dog

# 4) 1x H200, a fresh lease, commit 877c3d6 (reverted after): the side-thread GPU preload against the same installed
#    tree with its task list emptied ("old", ahead on the path), plush-dog, the default lite command, 30 steps;
#    the budget ended during the fifth run -> raw/startup/preload-ab.txt
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
rm -rf /tmp/site-old && mkdir -p /tmp/site-old && cp -r /tmp/site/ns_splat_plus /tmp/site-old/
sed -i 's/    if device.type != "cuda":\n        return GpuPreload(tasks=\[\])/    if True:\n        return GpuPreload(tasks=[])/' \
  /tmp/site-old/ns_splat_plus/training/gpu_preload.py  # as run: a python replacement of those two lines
run() { PYTHONPATH=$2 CUDA_VISIBLE_DEVICES=0 python3 /tmp/site/bin/ns-train splat-plus-lite --max-num-iterations 30 \
  --output-dir /tmp/ab --experiment-name $1 --timestamp t $DOG < /dev/null; }  # then each ranks/startup_rank0.json
run cold /tmp/site
for i in 1 2; do run old$i /tmp/site-old:/tmp/site; run new$i /tmp/site; done

# 5) on the development machine (2 cores), from the repository root: Triton's key beside the photos' decoding
H=benchmarks/2026-11-30-h200x2-splat-plus-cuda-graph-quality
python $H/raw/startup/triton-key-overlap-cpu.py  # -> raw/startup/triton-key-overlap-cpu.txt
