#!/bin/bash
# Session 74: the GPU preload's effect on splat-plus-lite's start-up, 1x H200: the default command with the viewer,
# plush-dog, 30 steps; a cold run (new), then old (HEAD with the preload off) and new (HEAD) alternating, two each; then the GPU test.
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH
rm -rf /tmp/dog && cp -r .gpurun/dog /tmp/dog
# "old": this checkout with the preload turned off (start_gpu_preload returns no tasks), ahead on the path
rm -rf /tmp/site-old && mkdir -p /tmp/site-old && cp -r /tmp/site/ns_splat_plus /tmp/site-old/
python3 - <<'PY'
p = "/tmp/site-old/ns_splat_plus/training/gpu_preload.py"; s = open(p).read()
old = '    if device.type != "cuda":\n        return GpuPreload(tasks=[])'
assert old in s; open(p, "w").write(s.replace(old, '    if True:  # preload off\n        return GpuPreload(tasks=[])'))
PY
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
run() {
  PYTHONPATH=$2 CUDA_VISIBLE_DEVICES=0 python3 /tmp/site/bin/ns-train splat-plus-lite --max-num-iterations 30 \
    --output-dir /tmp/ab --experiment-name $1 --timestamp t $DOG > /tmp/ab_$1.log 2>&1 < /dev/null
  python3 -c "
import json
d=json.load(open('/tmp/ab/$1/splat-plus-lite/t/ranks/startup_rank0.json')); p=d['parts_seconds']
print('$1', 'total %.2f' % d['seconds_to_first_step_end'], ' '.join('%s %.2f' % (a, b) for a, b in p.items()), 'preload', d.get('gpu_preload'))" 2>&1 | tee -a $OUT/ab.txt
}
run cold /tmp/site
for i in 1 2; do run old$i /tmp/site-old:/tmp/site; run new$i /tmp/site; done
grep -h "Warmup:" /tmp/ab_*.log | tee -a $OUT/ab.txt
PYTHONPATH=/tmp/site python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_gpu_preload.py 2>&1 | tail -n 3 | tee -a $OUT/ab.txt
