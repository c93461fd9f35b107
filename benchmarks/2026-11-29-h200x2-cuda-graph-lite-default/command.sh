# 2x H200 (32 cores), 2026-11-29, commit 858060f (raw/commit.txt); branch wip/isect-fill-triton at 012c44b for the
# levers (section 3). One background job per GPU (CUDA_VISIBLE_DEVICES), from the repository root after
# `source .device/setup.sh`; plush-dog (../shared/data/plush-dog) copied to /tmp/dog, fox (../shared/data/fox) to
# /tmp/fox in two halves (one call's carry holds at most 64 MiB). The numbers of runs were fixed before any ran:
# plush-dog 8 of lite-graph and 8 of splat-plus-lite (seeds 1-8), one timed run of each method.
# Job logs and every run's logs: raw-logs.tar.xz (s76dog.log, s76fox2.log, s76q5.log; s76fox.log is the first start of
# the GPU 1 job, which lacked setup.sh's environment and ran nothing).
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
V="lite-graph=splat-plus-lite --cuda-graph True"

# 1) GPU 0: plush-dog, splatfacto, lite-graph and splat-plus-lite, each alone on its GPU, one after the other, caches
#    warmed first, 50 steps profiled at 0.9 of each run (GPU busy)
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto lite-graph splat-plus-lite --variant "$V" \
  --reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 \
  --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/timed  # -> raw/dog_timed_results.json
# 2) GPU 1, started 8 minutes later: the same on fox. Sections 3 and 4 overlapped it on the other GPU (notes.md)
CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods splatfacto lite-graph splat-plus-lite --variant "$V" \
  --reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 \
  --gpu-busy-steps 50 --gpu-busy-at 0.9 --scene-args "$FOX" --scene-name fox --out /tmp/res/fox/timed  # -> fox/, raw/fox_timed_results.json
# 3) GPU 0 after 1): plush-dog quality repeats 2-4, then 5-8, of both (trained at the same time, timing discarded)
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods lite-graph splat-plus-lite --variant "$V" \
  --reference splat-plus-lite --steps 30000 --repeats 3 --first-repeat 2 --concurrent-quality --seed-per-repeat \
  --no-prebuild --timeout 700 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/q2  # -> raw/dog_q2_results.json
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods lite-graph splat-plus-lite --variant "$V" \
  --reference splat-plus-lite --steps 30000 --repeats 4 --first-repeat 5 --concurrent-quality --seed-per-repeat \
  --no-prebuild --timeout 700 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/dog/q5  # -> raw/dog_q5_results.json
# 4) the levers, branch 012c44b installed into /tmp/site-branch (first on PYTHONPATH): its kernel GPU tests, the
#    micro-probes (probes/, as they ran), then lite-graph with the PyTorch paths on GPU 0 and
#    with both Triton kernels on GPU 1 at the same time, each alone on its GPU, no evaluation, same seed
python3 -m pytest -m gpu -q -p no:cacheprovider tests/kernels/test_isect_fill.py tests/kernels/test_spherical_harmonics.py  # -> raw/levers_kernel-gpu-tests.txt
CUDA_VISIBLE_DEVICES=1 python3 probes/isect_probe.py  # -> raw/levers_isect-probe.json (the branch's switch SLOT_KEYS, gone since)
CUDA_VISIBLE_DEVICES=0 python3 probes/sh_probe.py     # -> raw/levers_sh-probe.json
CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods lite-graph --variant "$V" --steps 30000 --no-prebuild \
  --warm-caches --no-eval --gpu-busy-steps 50 --gpu-busy-at 0.9 --timeout 200 --scene-args "$DOG" \
  --scene-name plush-dog --out $OUT/graph-torch &  # -> raw/levers_graph-pytorch_results.{json,md}
NS_SPLAT_PLUS_RECORDABLE_SH=triton NS_SPLAT_PLUS_SLOT_KEYS=triton CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py \
  --methods lite-graph --variant "$V" --steps 30000 --no-prebuild --warm-caches --no-eval --gpu-busy-steps 50 \
  --gpu-busy-at 0.9 --timeout 200 --scene-args "$DOG" --scene-name plush-dog --out $OUT/graph-triton  # -> its console log only (levers/graph-triton.log in raw-logs.tar.xz: the call returned too many files)
wait
# the merged plush-dog report (here, on the development machine)
H=benchmarks/2026-11-29-h200x2-cuda-graph-lite-default
python scripts/benchmark.py --from-json $H/raw/dog_timed_results.json $H/raw/dog_q2_results.json \
  $H/raw/dog_q5_results.json --reference splat-plus-lite --out $H/plush-dog
