# 2x H200 (32 cores), 2026-11-30, commit a563601 (raw/commit.txt), one machine. One background job per GPU
# (CUDA_VISIBLE_DEVICES; .gpurun/s80lane.sh of the session's working tree, its variables expanded here), from the
# repository root after `source .device/setup.sh`; plush-dog (../shared/data/plush-dog) copied to /tmp/dog, fox
# (../shared/data/fox) to /tmp/fox in two halves (one call's carry holds at most 64 MiB).
# Quality runs only: all runs of a lane trained at once on one GPU (--concurrent-quality), their timing discarded.
# Job logs (joblogs/s80dog.log: GPU 0, joblogs/s80fox.log: GPU 1) and every run's logs: raw-logs.tar.xz.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
D10='lite-d10=splat-plus-lite --pipeline.model.efficient-densify-score 10'

# 1) GPU 0: plush-dog, splatfacto and splat-plus-lite, 5 runs each (repeats 2-6, seeds 2-6), all ten at once
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto splat-plus-lite --reference splatfacto \
  --repeats 5 --first-repeat 2 --steps 30000 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1650 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/q5  # -> raw/dog_q5_results.json
# 2) GPU 1, at the same time as 1): fox part a, two commands at once on the one GPU: splat-plus-lite and lite-d10,
#    5 runs each (repeats 2-6), and splatfacto repeats 2-3 (repeats 4-6, part b: a later session, same source tree)
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splat-plus-lite lite-d10 --variant "$D10" \
  --reference splat-plus-lite --repeats 5 --first-repeat 2 --steps 30000 --concurrent-quality --seed-per-repeat \
  --no-prebuild --timeout 1650 --scene-args "$FOX" --scene-name fox --out /tmp/res/fox/lite5 &  # -> raw/fox_lite5_results.json
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splatfacto --reference splatfacto \
  --repeats 2 --first-repeat 2 --steps 30000 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1650 \
  --scene-args "$FOX" --scene-name fox --out /tmp/res/fox/sf23  # -> raw/fox_sf23_results.json
wait
# the reports (here, on the development machine; the same files as the lanes' --out folders without logs/)
H=benchmarks/2026-11-30-h200x2-quality-five-runs
python scripts/benchmark.py --from-json $H/raw/dog_q5_results.json --reference splatfacto --out $H/plush-dog
python scripts/benchmark.py --from-json $H/raw/fox_lite5_results.json --reference splat-plus-lite --out $H/fox-lite-d10
python scripts/benchmark.py --from-json $H/raw/fox_sf23_results.json --reference splatfacto --out $H/fox-splatfacto-part-a

# --- part b: 2026-11-30 from 08:24 UTC, another lease of the same kind, the same source tree (git archive a563601
# without benchmarks/ -> /tmp/tree-s80; pip install --no-index --no-deps --no-build-isolation --no-compile
# --target /tmp/site-old /tmp/tree-s80; ns-splat-plus-source f244d471b1db). Job logs: joblogs/lane*.log.
cd /tmp/tree-s80 && export PYTHONPATH=/tmp/tree-s80/splatbench:/tmp/site-old:/tmp/site
# 3) GPU 0: repeats 4-5, both at once
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto --reference splatfacto --repeats 2 --first-repeat 4 \
  --steps 30000 --concurrent-quality --seed-per-repeat --no-prebuild --timeout 1650 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/sf45  # -> raw/fox_sf45_results.json
# 4) GPU 1, at the same time: repeat 6 alone, timed (its lane exported TORCH_HOME=/tmp/torch-home, stand-in weights)
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splatfacto --reference splatfacto --repeats 1 --first-repeat 6 \
  --steps 30000 --seed-per-repeat --no-prebuild --timeout 1650 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/sf6  # -> raw/fox_sf6_as_run.json (ns-eval failed: weights_only)
# 5) repeat 6's evaluation again, by hand, as the benchmark runs it for baselines
C=/tmp/res/sf6/runs/splatfacto-1gpu-r6/fox/splatfacto/bench/config.yml
CUDA_VISIBLE_DEVICES=0 TORCH_HOME=/tmp/res/sf45/lpips-standin TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONSAFEPATH=1 \
  NS_SPLAT_PLUS_BENCH_OUT=/tmp/res/sf6/reeval_r6_probe.json python3 -m splatbench.probe eval --load-config $C \
  --output-path /tmp/res/sf6/reeval_r6.json  # -> raw/fox_sf6_reeval.json, raw/fox_sf6_reeval_probe.json
# the record and the report (here, on the development machine, from the repository root)
PYTHONPATH=splatbench python $H/raw/fill_r6_eval.py  # -> raw/fox_sf6_results.json
python scripts/benchmark.py --from-json $H/raw/fox_sf23_results.json $H/raw/fox_sf45_results.json \
  $H/raw/fox_sf6_results.json $H/raw/fox_lite5_results.json --methods splatfacto splat-plus-lite --reference splatfacto \
  --out $H/fox
