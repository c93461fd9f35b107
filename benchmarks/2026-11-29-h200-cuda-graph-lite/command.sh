# 1x H200 (16 cores), 2026-11-29, three device calls of one session (s72a, s73a, s74a), each from the repository root
# after `source .device/setup.sh` (with gsplat's CUDA extension prebuilt for this image), plush-dog
# (../shared/data/plush-dog) copied to /tmp/dog. s72a at 1424acf, s73a at 1424acf with af79de2's stream fix uncommitted,
# s74a at af79de2. Logs of every run: raw-logs.tar.xz.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
HERE=benchmarks/2026-11-29-h200-cuda-graph-lite
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
GPU_TESTS="tests/raster/test_raster.py tests/raster/test_fixed_capacity_isect.py tests/training/test_graphed_step_gpu.py"

# s72a (1424acf: the recorded render's SH in PyTorch): the GPU tests, the replay check (one recording replayed on five
# cameras against their eager steps, at steps 300 and 2500), then lite against lite --cuda-graph True: one timed run of
# each, alone, one after the other; then repeats 2-5 of both at the same time (quality only; 5 against 5, fixed before)
python3 -m pytest -m gpu -q -p no:cacheprovider $GPU_TESTS                     # -> raw/1424acf_gpu-tests.txt
python3 benchmarks/2026-11-29-h200-cuda-graph-first-runs/replay_check.py --data /tmp/dog --out /tmp/res/replay-check.json  # -> raw/1424acf_replay-check.json
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 600 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-timed  # -> raw/1424acf_timed_results.json
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 900 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-quality  # -> raw/1424acf_quality_results.json
python3 scripts/benchmark.py --from-json $HERE/raw/1424acf_timed_results.json $HERE/raw/1424acf_quality_results.json \
  --reference splat-plus-lite --out $HERE/1424acf

# s73a (1424acf + the stream fix): the GPU tests; the new stream test with the fix deleted (raw/s73a_stream-break-check.txt:
# it fails); the GPU-busy breakdown of both at 0.9 of the run and of the graph at 0.3 (no ns-eval)
python3 -m pytest -m gpu -q -p no:cacheprovider $GPU_TESTS
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --no-prebuild --timeout 400 --no-eval --gpu-busy-steps 50 --gpu-busy-at 0.9 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/busy-0.9  # -> raw/s73a_busy-0.9_results.json
python3 scripts/benchmark.py --methods lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --no-prebuild --timeout 400 --no-eval --gpu-busy-steps 50 --gpu-busy-at 0.3 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/busy-0.3  # -> raw/s73a_busy-0.3_results.json

# s74a (af79de2: the overflow flag read one step late): the GPU tests (raw/af79de2_gpu-tests.txt: 17 passed), the
# replay check, a 300-step throwaway lite run, then the timed pair (with 50 profiled steps at 0.9) and repeats 2-3 of
# both at once (3 against 3, fixed before)
python3 -m pytest -m gpu -q -p no:cacheprovider $GPU_TESTS
python3 $HERE/replay_check.py --data /tmp/dog --out /tmp/res/replay-check.json  # -> raw/af79de2_replay-check.json
ns-train splat-plus-lite --output-dir /tmp/warm --max-num-iterations 300 --vis tensorboard \
  --viewer.quit-on-train-completion True $DOG
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 300 --gpu-busy-steps 50 --gpu-busy-at 0.9 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-timed  # -> raw/af79de2_timed_results.json
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 400 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-quality  # -> raw/af79de2_quality_results.json
python3 scripts/benchmark.py --from-json $HERE/raw/af79de2_timed_results.json $HERE/raw/af79de2_quality_results.json \
  --reference splat-plus-lite --out $HERE/af79de2
