# fox quality repeats with per-image metrics: 2 splatfacto (r11, r12) + 2 preset (r15, r16) runs, all at once on one GPU
cd /tmp/repo
: > /tmp/jobs
setsid nohup python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 2 --first-repeat 11 --concurrent-quality \
  --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf11 > /tmp/fox_q_sf11.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
setsid nohup python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 15 --concurrent-quality \
  --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast15 > /tmp/fox_q_fast15.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
cat /tmp/jobs
