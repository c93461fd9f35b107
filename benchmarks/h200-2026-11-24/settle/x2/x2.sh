# fox, 3000 steps: splat-plus on 1 and on 2 GPUs (torchrun), each alone, one command
cd /tmp/repo
nvidia-smi --query-gpu=index,name --format=csv,noheader
python scripts/benchmark.py --methods splat-plus --gpus 1 2 --steps 3000 --gpu-busy-steps 50 --timeout 400 \
  --scene-args "$FOX" --scene-name fox --out /tmp/r-x2 > /tmp/x2.blog 2>&1 < /dev/null
tail -n 12 /tmp/x2.blog
find /tmp/r-x2 -name "rank*.json" | head; for f in $(find /tmp/r-x2 -name "rank*.json"); do cp $f $OUT/$(echo $f | tr / _ | tail -c 60); done
grep -h "splat-plus: using" -r /tmp/r-x2 2>/dev/null | head -3
bash .gpu/w.sh
