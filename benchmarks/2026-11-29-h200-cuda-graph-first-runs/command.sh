# 1x H200 (16 cores), 2026-11-29, three device calls of one session, each from the repository root after
# `source .device/setup.sh`, plush-dog (../shared/data/plush-dog) copied to /tmp/dog. The commit of each part is in
# its raw/<part>/commit.txt: s70a at c9d0cc1, s71a at d54b451, s71b at cfb1b74. Logs: raw-logs.tar.xz.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
HERE=benchmarks/2026-11-29-h200-cuda-graph-first-runs
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'

# s70a (c9d0cc1): the GPU tests of --cuda-graph, the real lite trainer eager against graphed (600 steps each from
# step 4200), the synthetic probe at lite's sizes, and lite's GPU busy at 0.9 of its run (50 steps profiled)
python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_graphed_step_gpu.py
python3 $HERE/trainer_graph_probe.py --data /tmp/dog --out /tmp/res/trainer-graph.json
python3 $HERE/graph_probe.py --gaussians 18000 --width 1500 --height 1000 --out /tmp/res/probe-dog.json
python3 $HERE/graph_probe.py --gaussians 90000 --width 1920 --height 1080 --out /tmp/res/probe-fox.json
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --gpu-busy-steps 50 --gpu-busy-at 0.9 \
  --no-prebuild --timeout 600 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-busy

# s71a (d54b451: autograd graphs of earlier steps dropped before a recording): the GPU tests, the trainer probe, and
# (its graph window's median step below the eager one) lite against lite --cuda-graph True: one timed run of each,
# alone, one after the other; then repeats 2-5 of both at the same time (quality only; fixed before any ran)
python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_graphed_step_gpu.py
python3 $HERE/trainer_graph_probe.py --data /tmp/dog --out /tmp/res/trainer-graph.json
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 600 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-timed
python3 scripts/benchmark.py --methods splat-plus-lite lite-graph --variant "lite-graph=splat-plus-lite --cuda-graph True" \
  --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 900 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog-graph-quality

# s71b (cfb1b74): one recording replayed on five cameras against each camera's eager step (lite, plush-dog, at
# steps 300 and 2500), and the GPU tests with the new replay-on-other-cameras test
python3 $HERE/replay_check.py --data /tmp/dog --out /tmp/res/replay-check.json
python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_graphed_step_gpu.py
