# The fox quality repeats of this folder, as run from the checkout root on the device (FOX as in the README).
# First H200, after b1_ab.sh on the same machine: preset r7, r8 side by side
python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 7 --concurrent-quality --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast78
# Second H200: splatfacto r8 and preset r9, both at once
cd /tmp/repo
setsid nohup python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 8 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf8 > /tmp/fox_q_sf8.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
setsid nohup python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 1 --first-repeat 9 --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast9 > /tmp/fox_q_fast9.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
