# 2x H200 (32 cores), 2026-11-30, commit 6d66c88 (raw/commit.txt), one lease. From the repository root after
# `source .device/setup.sh` (call 1: wheels, this checkout into /tmp/site, gsplat's extension built); fox
# (../shared/data/fox) and plush-dog (../shared/data/plush-dog) carried in call 2 to /tmp/fox and /tmp/dog, each
# checked against its MANIFEST.sha256. Call 2's first launch of this job failed at once: .device/ had not been carried
# in that call, so it was gone and setup.sh's exports were missing (ModuleNotFoundError: nerfstudio). The job was
# launched again with those exports written into it (below); every run here is from that second launch.
# Job logs (lane0.log: GPU 0, lane1.log: GPU 1), every run's train/eval log and the import profiles: raw-logs.tar.xz.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH  # what .device/setup.sh exports
export PYTHONPATH=$PWD/splatbench:/tmp/site
R=/tmp/res; mkdir -p $R
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
M='splatfacto splat-plus-lite splat-plus splat-plus-fast'
COMMON='--reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 --gpu-busy-steps 50 --gpu-busy-at 0.9'
# 1) GPU 0: plush-dog's four methods, one timed run each, alone on the GPU, one after the other (caches warmed first;
#    50 steps profiled at 0.9 of each run) -> raw/dog_results.json; then the import profile and the time to a CUDA
#    context (3 times each; fox's runs still going on GPU 1), and the GPU test of ns-eval's metrics limit (c8bf1a7)
lane0() {
  CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods $M $COMMON --scene-args "$DOG" --scene-name plush-dog --out $R/dog
  for i in 1 2 3; do CUDA_VISIBLE_DEVICES=0 python3 -X importtime -c "import nerfstudio.scripts.train" 2> $R/importtime_$i.txt
    CUDA_VISIBLE_DEVICES=0 python3 -c "import time; t=time.time(); import torch; a=time.time(); torch.cuda.init(); torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print(f'torch import {a-t:.2f} s, CUDA context {time.time()-a:.2f} s')" ; done  # -> raw/torch-import-and-cuda-context.txt
  CUDA_VISIBLE_DEVICES=0 python3 -m pytest -m gpu -q -p no:cacheprovider "tests/training/test_gpu_paths.py::test_ns_eval_and_ns_viewer_load_a_cuda_checkpoint" 2>&1 | tail -15
}
# 2) GPU 1, at the same time: fox's four methods as in 1) -> raw/fox_results.json
lane1() {
  CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --methods $M $COMMON --scene-args "$FOX" --scene-name fox --out $R/fox
}
lane0 > $R/lane0.log 2>&1 &
lane1 > $R/lane1.log 2>&1 &
wait
# each splat-plus run's start-up record: $R/<scene>/runs/<method>-1gpu/<scene>/<method>/bench/ranks/startup_rank0.json
#   -> raw/startup_<scene>_<method>.json

# 3) a second lease (1x H200, 16 cores), plush-dog only (carried with .device/): decoding threads. ns-train
#    splat-plus-lite with the viewer on (the default; it exits after the last step: stdin is not a terminal), 30 steps,
#    one cache-warming run, then --pipeline.datamanager.max-thread-workers 8 (the default cap), 16, 32 in turn, twice;
#    the device time ran out during the fifth run -> raw/decode-threads.txt
for k in warm w8a w16a w32a w8b w16b w32b; do
  w=${k#w}; w=${w%[ab]}; extra=""; [ "$k" != warm ] && extra="--pipeline.datamanager.max-thread-workers $w"
  ns-train splat-plus-lite --max-num-iterations 30 --output-dir /tmp/dec --experiment-name $k --timestamp t $extra \
    --data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2 > /tmp/dec_$k.log 2>&1 < /dev/null
done

# the reports (here, on the development machine)
H=benchmarks/2026-11-30-h200x2-four-methods-and-start-up-parts
python scripts/benchmark.py --from-json $H/raw/fox_results.json --reference splatfacto --out $H/fox
python scripts/benchmark.py --from-json $H/raw/dog_results.json --reference splatfacto --out $H/plush-dog
