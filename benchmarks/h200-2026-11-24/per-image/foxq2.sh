# fox quality repeats with per-image metrics: 1 splatfacto + 3 preset runs, all at once on one GPU
# usage: bash .gpu/foxq2.sh FIRST_REPEAT
R=${1:?first repeat}
cd /tmp/repo
: > /tmp/jobs
setsid nohup python scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat $R --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-sf$R > /tmp/fox_q_sf$R.blog 2>&1 < /dev/null &
setsid nohup python scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 3 --first-repeat $R --concurrent-quality \
  --no-prebuild --timeout 1500 --scene-args "$FOX" --scene-name fox --out /tmp/r-fox-q-fast$R > /tmp/fox_q_fast$R.blog 2>&1 < /dev/null &
sleep 5
pgrep -f "r-fox-q-" >> /tmp/jobs
cat /tmp/jobs
