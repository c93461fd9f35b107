#!/usr/bin/env bash
# The table's runs still to run (notes.md, "Still to run"), at the table's package: ns_splat_plus as at c27cab3
# (source digest 579ea92667da), one queue of benchmark batches per GPU, every batch exported to a PLY.
#   here:        bash benchmarks/2026-11-26-h100-fox-lite-table/finish.sh prepare  (from the repository root)
#   on the GPU:  bash benchmarks/2026-11-26-h100-fox-lite-table/finish.sh start    (after source .device/setup.sh;
#                carry .table-run and .table-data)
#                bash benchmarks/2026-11-26-h100-fox-lite-table/finish.sh poll SECONDS
#                (waits until no batch runs or SECONDS pass, prints each batch's last lines, and copies every
#                batch's results.json and log to $OUT; results.json is rewritten as each run of a batch ends)
# Each finished batch goes to raw/ of its scene's folder, with a command.sh block, and both folders are re-merged.
set -uo pipefail
DIGEST=579ea92667da
RES=/tmp/res
FOX='--data /tmp/data/fox instant-ngp-data --eval-mode interval --eval-interval 8'
DOG='--data /tmp/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2'

# batch METHOD REPEATS FIRST_REPEAT SCENE: one scripts/benchmark.py batch (its repeats train at the same time)
batch() {
  local scene_args=$FOX name=fox
  [ "$4" = plush-dog ] && scene_args=$DOG && name=plush-dog
  local out=$RES/$1-r$3-$2-$name
  python3 scripts/benchmark.py --methods "$1" --steps 30000 --repeats "$2" --first-repeat "$3" --concurrent-quality \
    --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$scene_args" --scene-name "$name" \
    --out "$out" > "$out.log" 2>&1
  local code=$?
  echo "$(date +%T) $1 repeats $3-$(($3 + $2 - 1)) $name: exit $code" >> $RES/ended.txt
}

# queue GPU BATCH...: the batches one after the other on one GPU, in the background
queue() {
  local gpu=$1; shift
  local cmds=""
  for b in "$@"; do cmds+="batch $b; "; done
  CUDA_VISIBLE_DEVICES=$gpu setsid nohup bash -c "$cmds" > $RES/queue$gpu.log 2>&1 < /dev/null &
}

case "${1:-}" in
  prepare)
    rm -rf .table-run && mkdir -p .table-run/stubs .table-data
    git archive c27cab3 ns_splat_plus | tar -x -C .table-run
    # nerfstudio's exporter imports these at the top; the gaussian-splat export never calls them
    for m in open3d pymeshlab mediapy xatlas; do mkdir -p .table-run/stubs/$m && touch .table-run/stubs/$m/__init__.py; done
    cp -r ../shared/data/fox ../shared/data/plush-dog .table-data/
    grep -qx '/.table-run/' .git/info/exclude || printf '/.table-run/\n/.table-data/\n' >> .git/info/exclude
    echo "prepared .table-run (the package as at c27cab3) and .table-data" ;;
  start)
    rm -rf /tmp/site/ns_splat_plus && cp -r .table-run/ns_splat_plus /tmp/site/ || exit 1
    # start from a folder without ns_splat_plus, so that no child imports the checkout's copy
    rm -rf /tmp/w $RES && mkdir -p /tmp/w /tmp/data $RES && cp -r scripts splatbench .table-run/stubs /tmp/w/
    cp -rn .table-data/fox .table-data/plush-dog /tmp/data/
    cd /tmp/w || exit 1
    export PYTHONPATH=/tmp/w/splatbench:/tmp/site:/tmp/w/stubs PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
    found=$(python3 -c "from splatbench.recorder import package_source_digest as d; print(d('ns_splat_plus'))")
    [ "$found" = $DIGEST ] || { echo "source digest $found, not the table's $DIGEST: nothing started"; exit 1; }
    export -f batch; export FOX DOG RES
    gpus=$(nvidia-smi -L | wc -l)
    if [ "$gpus" -ge 4 ]; then
      queue 0 "splatfacto 1 3 plush-dog"; queue 1 "splatfacto 1 4 plush-dog"
      queue 2 "splat-plus 2 4 fox"; queue 3 "splat-plus 2 4 plush-dog"
    elif [ "$gpus" -ge 2 ]; then  # about 30 minutes: more than one session's device time after set-up
      queue 0 "splatfacto 2 3 plush-dog"; queue 1 "splat-plus 2 4 fox" "splat-plus 2 4 plush-dog"
    else
      queue 0 "splatfacto 2 3 plush-dog"
    fi
    echo "source digest $found; $gpus GPU(s); queues started" ;;
  poll)
    start=$(date +%s)
    while [ $(($(date +%s) - start)) -lt "${2:-500}" ] && pgrep -f "scripts/benchmark[.]py" > /dev/null; do sleep 10; done
    cat $RES/ended.txt 2>/dev/null
    for log in $RES/*.log; do echo "== $log"; tail -c 600 "$log" | tr '\r' '\n' | grep -v '^$' | tail -2 | cut -c1-220; done
    (cd $RES && find . -maxdepth 2 \( -name results.json -o -name results.md -o -name '*.log' -o -name ended.txt \) \
      -print0 | xargs -0 -r tar czf "$OUT/res.tgz") && find $RES -name '*.ply' -printf '%s %p\n' | tee "$OUT/ply_bytes.txt" ;;
  *) echo "usage: $0 prepare|start|poll [SECONDS]" >&2; exit 2 ;;
esac
