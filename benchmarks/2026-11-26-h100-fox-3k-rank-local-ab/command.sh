# H100, 2026-11-26: issue 31's code (rank-local images, overlapped averaging, agreed exits; package of 0775b91) against 0ddd044, fox, splat-plus, 3000 steps, W = 1.
# Run from the repository root on the device, with: the previous commit's package in .prev/
#   (git archive 0ddd044 ns_splat_plus pyproject.toml | tar -x -C .prev), this commit's in .new/, fox copied to
#   /tmp/data/fox, `source .device/setup.sh` (DEVELOPERS.md), and the splat_plus_lite line removed from the
#   installed entry_points.txt while the runs last (0ddd044 has no splat-plus-lite). Each run alone on the GPU,
#   alternating prev / new; then ns-eval of each run with its own code. As run: .gpu/ab31.sh.
set -uo pipefail
RES=${RES:-raw}; mkdir -p "$RES"
FOX="--data /tmp/data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
echo -e "code\trepeat\trc\tprocess_wall_s" > "$RES/ab.tsv"
for r in 1 2 3; do
  for code in prev new; do
    if [ $code = prev ]; then PP=$PWD/.prev; else PP=$PWD/.new; fi
    t0=$(date +%s.%N)
    PYTHONPATH=$PP:$PYTHONPATH ns-train splat-plus --vis tensorboard --max-num-iterations 3000 \
      --output-dir /tmp/ab --experiment-name $code-r$r --timestamp run $FOX > "$RES/train-$code-r$r.log" 2>&1
    rc=$?; t1=$(date +%s.%N)
    echo -e "$code\t$r\t$rc\t$(python3 -c "print(round($t1 - $t0, 2))")" | tee -a "$RES/ab.tsv"
  done
done
for r in 1 2 3; do
  for code in prev new; do
    if [ $code = prev ]; then PP=$PWD/.prev; else PP=$PWD/.new; fi
    PYTHONPATH=$PP:$PYTHONPATH ns-eval --load-config /tmp/ab/$code-r$r/splat-plus/run/config.yml \
      --output-path "$RES/eval-$code-r$r.json" > "$RES/eval-$code-r$r.log" 2>&1
  done
done
# raw/summary.md: the table from raw/ab.tsv, the eval JSONs and each run's TensorBoard 'Train Iter (time)'
# (mean over steps >= 1000), with Welch 90 % intervals of new - prev
# The CPU check of notes.md (deterministic reference rasterizer), on the development machine:
# PYTHONPATH=.prev ns-train splat-plus --vis tensorboard --machine.device-type cpu --max-num-iterations 120 --pipeline.model.warmup-length 10 --pipeline.model.refine-every 10 --pipeline.model.sh-degree-interval 20 --steps-per-save 120 --output-dir /tmp/w1 --experiment-name prev --timestamp run --data /tmp/dbg/scene colmap
