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
