# 2x H200 (32 cores), 2026-11-30, HEAD 427e7ad and a563601 (raw/commit.txt), one lease. From the repository root
# after `source .device/setup.sh` (call 1). a563601's tree: `git archive a563601` without benchmarks/ -> /tmp/tree-s80,
# `pip install --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site-old /tmp/tree-s80`.
# fox (../shared/data/fox) -> /tmp/fox, checked against its MANIFEST.sha256. Offline: stand-in AlexNet weights
# (seeded random) in $TORCH_HOME, so ns-eval's LPIPS runs (time, memory) but its value means nothing.
# GPU 1 (this file) ran at the same time as GPU 0's two splatfacto quality runs
# (../2026-11-30-h200x2-quality-five-runs/command.sh, part b) until 08:43 UTC: h3 and the ns-evals ran alone.
# Call 2 did not source setup.sh again: TORCH_CUDA_ARCH_LIST was unset, so the first process built gsplat's
# extension again (sf6's cache-warming run, 265 s); every timed process below ran after that build.
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
R=/tmp/res/lane1; export CUDA_VISIBLE_DEVICES=1 TORCH_HOME=/tmp/torch-home
OLDPP=/tmp/tree-s80/splatbench:/tmp/site-old:/tmp/site; HEADPP=$PWD/splatbench:/tmp/site
stamp() { echo "$(date +%s.%N) $*" >> $R/walls.txt; }   # -> raw/walls.txt

# 1) splatfacto repeat 6 of the fox quality runs, timed alone on GPU 1 (a563601's tree) -> sf6.log, and
#    ../2026-11-30-h200x2-quality-five-runs/raw/fox_sf6_*.json (its ns-eval run again there: fill_r6_eval.py)
(cd /tmp/tree-s80 && PYTHONPATH=$OLDPP python3 scripts/benchmark.py --methods splatfacto --reference splatfacto --repeats 1 \
  --first-repeat 6 --steps 30000 --seed-per-repeat --no-prebuild --timeout 1650 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/sf6) > $R/sf6.log 2>&1

# 2) the default `ns-train splat-plus-lite` (the viewer on; it exits after the last step because stdin and stdout
#    are not terminals), through splatbench's probe (ns-train's own main, each step's host and CUDA-event times):
#    one 200-step process per tree first (w*: caches), then HEAD (h) and a563601 (o) in turn, one at a time
for k in wh wo h1 o1 h2 o2 h3; do
  case $k in *h*) dir=$PWD; pp=$HEADPP;; *) dir=/tmp/tree-s80; pp=$OLDPP;; esac
  case $k in w*) extra="--max-num-iterations 200";; *) extra="";; esac
  stamp start $k
  (cd $dir && NS_SPLAT_PLUS_BENCH_OUT=$R/probe_$k.json PYTHONPATH=$pp python3 -m splatbench.probe train splat-plus-lite $extra \
    --output-dir $R/runs --experiment-name $k --timestamp t $FOX) > $R/train_$k.log 2>&1 < /dev/null  # -> raw/startup_$k.json
  stamp end $k rc=$?
done

# 3) ns-eval of h3's checkpoint: HEAD, a563601, HEAD (the first attempt lacked splatbench on PYTHONPATH: the
#    probe's trainer class is named in config.yml) -> raw/eval_*.json, raw/evalwalls.txt
CFG=$R/runs/h3/splat-plus-lite/t/config.yml
for k in eh1 eo eh2; do
  case $k in eh*) d=$PWD; pp=$HEADPP;; *) d=/tmp/tree-s80; pp=$OLDPP;; esac
  a=$(date +%s.%N); (cd $d && PYTHONPATH=$pp ns-eval --load-config $CFG --output-path $R/$k.json) > $R/$k.log 2>&1 < /dev/null
  echo "$a $(date +%s.%N) $k rc=$?" >> $R/evalwalls.txt
done

# the table (here): tar -xJf raw-logs.tar.xz lane1/ && python raw/parts.py raw lane1
