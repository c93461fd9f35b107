# 2x H200 (32 cores), 2026-11-29, commit df99d05 (raw/commit.txt), one machine. One background job per GPU
# (CUDA_VISIBLE_DEVICES), from the repository root after `source .device/setup.sh`; plush-dog (../shared/data/plush-dog)
# copied to /tmp/dog, fox (../shared/data/fox) to /tmp/fox in two halves (one call's carry holds at most 64 MiB).
# Job logs (joblogs/s79dog.log: GPU 0, joblogs/s79fox.log: GPU 1) and every run's logs: raw-logs.tar.xz.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
D10='lite-d10=splat-plus-lite --pipeline.model.efficient-densify-score 10'

# 1) GPU 0: the GPU tests of the tile keys of 08b64a9 and 7cff29e (the gate: nothing else ran before they passed)
CUDA_VISIBLE_DEVICES=0 python3 -m pytest -m gpu -q -p no:cacheprovider tests/kernels/test_isect_fill.py \
  tests/raster/test_fixed_capacity_isect.py tests/training/test_graphed_step_gpu.py \
  "tests/raster/test_raster.py::test_the_recordable_render_replays_from_a_cuda_graph_as_it_runs_eagerly"  # -> raw/gpu-tests.txt
# 2) GPU 0, then: plush-dog's methods, one timed run each, alone on the GPU, one after the other; caches warmed first,
#    50 steps profiled at 0.9 of each run (GPU busy)
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite \
  lite-d10 sp-graph --variant "$D10" --variant "sp-graph=splat-plus --cuda-graph True" --reference splatfacto \
  --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 --gpu-busy-steps 50 --gpu-busy-at 0.9 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/timed  # -> raw/dog_timed_results.json
# 3) GPU 1, after the gate, at the same time as 2): the tile-key probe (.gpurun/isect_rank_probe.py of the session's
#    working tree, not in the repository: the three key layouts' intersections in one CUDA graph each, at the Gaussian
#    counts and sizes of the runs), then fox's methods as in 2) without sp-graph
CUDA_VISIBLE_DEVICES=1 python3 .gpurun/isect_rank_probe.py  # -> raw/isect-rank-probe.txt
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite \
  lite-d10 --variant "$D10" --reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches \
  --timeout 900 --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/fox/timed  # -> raw/fox_timed_results.json
# 4) after both timed parts: lite against lite-d10, repeats 2-5 on plush-dog (GPU 0) and 2-4 on fox (GPU 1), all of a
#    scene at once on its GPU (quality only). fox's trainings finished but the device time ran out during their
#    ns-eval: no fox report (their train logs, with the final Gaussian counts, are in raw-logs.tar.xz)
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splat-plus-lite lite-d10 --variant "$D10" \
  --reference splat-plus-lite --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality --seed-per-repeat \
  --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/d10  # -> raw/dog_d10_results.json
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus-lite lite-d10 --variant "$D10" \
  --reference splat-plus-lite --steps 30000 --repeats 3 --first-repeat 2 --concurrent-quality --seed-per-repeat \
  --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/res/fox/d10  # -> (lost in ns-eval)
# the reports (here, on the development machine)
H=benchmarks/2026-11-29-h200x2-four-methods-one-commit
python scripts/benchmark.py --from-json $H/raw/dog_timed_results.json --reference splatfacto --out $H/plush-dog
python scripts/benchmark.py --from-json $H/raw/fox_timed_results.json --reference splatfacto --out $H/fox
python scripts/benchmark.py --from-json $H/raw/dog_timed_results.json $H/raw/dog_d10_results.json \
  --methods splat-plus-lite lite-d10 --reference splat-plus-lite --out $H/plush-dog-d10
