# 1x H200 (16 cores), 2026-11-30, two leases of one session. Lease 1 ran at 0d353de with the branch preload-key-only
# (f8d59dc) beside it; lease 2 at 86947ce's code (its module docstring's figures written after). From the repository
# root; plush-dog (../shared/data/plush-dog) and fox (../shared/data/fox) copied into git-ignored .gpurun/dog and
# .gpurun/fox and carried. Logs (fox's train, eval and warm-cache logs, its runs' small files, the job log): raw-logs.tar.xz.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH  # besides .device/setup.sh's
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
bytecode() {  # Python bytecode for every tree a run imports (a user's pip install leaves it)
  PYTHONPATH=$PWD/splatbench:$1:/tmp/site python3 -c "from splatbench.bytecode import compile_bytecode, bytecode_roots; r=bytecode_roots(); print('bytecode', [str(x) for x in r], compile_bytecode(r))"
}
startup() {  # one default lite run of 30 steps with the viewer; its start-up record's parts
  PYTHONPATH=$2 CUDA_VISIBLE_DEVICES=0 python3 /tmp/site/bin/ns-train splat-plus-lite --max-num-iterations 30 \
    --output-dir /tmp/ab --experiment-name $1 --timestamp t $DOG > /tmp/ab_$1.log 2>&1 < /dev/null
  python3 -c "
import json
d=json.load(open('/tmp/ab/$1/splat-plus-lite/t/ranks/startup_rank0.json')); p=d['parts_seconds']
g=d.get('gpu_preload') or {}
print('$1', 'total %.2f' % d['seconds_to_first_step_end'], 'after_command_line %.2f' % (d['seconds_to_first_step_end'] - p['imports'] - p['command_line']), ' '.join('%s %.2f' % (a, b) for a, b in p.items()), 'preload', g.get('seconds'), g.get('errors'))"
}

# Lease 1, call 1: the graphed step's GPU tests at 0d353de -> raw/gpu-tests-before-fix.txt (6 passed; the SH-3
# statistics test failed: its eager step's autograd graph was still held when it recorded, fixed in 86947ce)
PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu tests/training/test_graphed_step_gpu.py -p no:cacheprovider -q --timeout=400 -W ignore
# Lease 1, call 2: the preload of preload-key-only (started just before the trainer's own decoding call) against
# 0d353de, cold then 3 rounds of main, key (Triton's key), kv (key and the inverse) -> raw/ab-late-start.txt
git -C /work/main archive preload-key-only ns_splat_plus pyproject.toml README.md LICENSE | tar -x -C .gpurun/s75/new  # here, before the call
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site-key .gpurun/s75/new
cp -r /tmp/site-key /tmp/site-kv
sed -i 's/^PRELOAD_TASKS = ("triton_key",)/PRELOAD_TASKS = ("triton_key", "view_matrix")/' /tmp/site-kv/ns_splat_plus/training/gpu_preload.py
bytecode /tmp/site-key; bytecode /tmp/site-kv
startup cold /tmp/site-key:/tmp/site
for i in 1 2 3; do startup main$i /tmp/site; startup key$i /tmp/site-key:/tmp/site; startup kv$i /tmp/site-kv:/tmp/site; done

# Lease 2, call 1: the GPU tests of the graphed step and the preload at 86947ce -> raw/gpu-tests.txt (8 passed)
PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu tests/training/test_graphed_step_gpu.py tests/training/test_gpu_preload.py -p no:cacheprovider -q --timeout=400 -W ignore
git archive 0d353de ns_splat_plus pyproject.toml README.md LICENSE | tar -x -C .gpurun/s75/old  # here, before the call
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site-old .gpurun/s75/old
bytecode /tmp/site-old; bytecode /tmp/site
python3 -c "import compileall; print(compileall.compile_dir('/tmp/site-old', quiet=1))"  # bytecode() had found the checkout's ns_splat_plus, not site-old's
# Lease 2, call 2: new (86947ce: the preload from the start of the trainer's set-up) against old (0d353de); one cold
# run, then 4 rounds of old, new -> raw/ab.txt, raw/startup_*.json (the files that came back). Fixed before any run:
# new lands if its median "after_command_line" (first step's end - imports - command line) is >= 0.3 s below old's.
startup cold /tmp/site
for i in 1 2 3 4; do startup old$i /tmp/site-old:/tmp/site; startup new$i /tmp/site; done
# Lease 2, call 3: every GPU test -> raw/gpu-suite.txt (55 passed, 2 skipped: two GPUs; 1 failed: fused-ssim is not
# installed on the device, which has no network)
PYTHONPATH=$PWD/splatbench:/tmp/site timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout=300 -W ignore -rfE --durations=15
# Lease 2, calls 4-5: fox, splatfacto then splat-plus-lite, one timed run each alone on the GPU, caches warmed first,
# 50 steps profiled at 0.9 of each run -> raw/fox_results.json (run as /tmp/res/fox)
PYTHONPATH=$PWD/splatbench:/tmp/site CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --methods splatfacto splat-plus-lite \
  --reference splatfacto --steps 30000 --seed-per-repeat --no-prebuild --warm-caches --timeout 900 --gpu-busy-steps 50 \
  --gpu-busy-at 0.9 --scene-args "$FOX" --scene-name fox --out raw/fox
# Here: the report
python scripts/benchmark.py --from-json benchmarks/2026-11-30-h200-start-up-preload-and-fox-at-head/raw/fox_results.json \
  --reference splatfacto --out benchmarks/2026-11-30-h200-start-up-preload-and-fox-at-head/fox
