# H200, 2026-11-26: this commit (the reshaping of issue 32) against the previous commit 338aee7, fox, splat-plus, 3000 steps.
# Run from the repository root on the device, with: the previous commit's package in .prev/
#   (git archive 338aee7 ns_splat_plus pyproject.toml | tar -x -C .prev), fox copied to .data/fox,
#   and `source .device/setup.sh` (DEVELOPERS.md). Each run alone on the GPU, alternating prev / new.
set -uo pipefail
RES=${RES:-raw}; mkdir -p "$RES"
FOX="--data .data/fox instant-ngp-data --eval-mode interval --eval-interval 8"
python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee pytest_gpu.log   # before the runs, on the same GPU
echo -e "code\trepeat\trc\tprocess_wall_s" > "$RES/ab.tsv"
for r in 1 2 3; do
  for code in prev new; do
    if [ $code = prev ]; then PP=$PWD/.prev; else PP=$PWD; fi
    t0=$(date +%s.%N)
    PYTHONPATH=$PP:$PYTHONPATH ns-train splat-plus --vis tensorboard --max-num-iterations 3000 \
      --output-dir /tmp/ab --experiment-name $code-r$r --timestamp run $FOX > "$RES/train-$code-r$r.log" 2>&1
    rc=$?; t1=$(date +%s.%N)
    echo -e "$code\t$r\t$rc\t$(python3 -c "print(round($t1 - $t0, 2))")" | tee -a "$RES/ab.tsv"
  done
done
for r in 1 2 3; do
  for code in prev new; do
    if [ $code = prev ]; then PP=$PWD/.prev; else PP=$PWD; fi
    PYTHONPATH=$PP:$PYTHONPATH ns-eval --load-config /tmp/ab/$code-r$r/splat-plus/run/config.yml \
      --output-path "$RES/eval-$code-r$r.json" > "$RES/eval-$code-r$r.log" 2>&1
  done
done
# The per-step losses of both codes, 40 steps logged every step (raw/diag.txt): default, without tight tiles,
# and with pytorch_msssim's SSIM
for cfg in default notight msssim; do
  case $cfg in default) X="";; notight) X="--pipeline.model.tight-tiles False";; msssim) X="--pipeline.model.ssim-kernel pytorch-msssim";; esac
  for code in prev new; do
    if [ $code = prev ]; then PP=$PWD/.prev; else PP=$PWD; fi
    PYTHONPATH=$PP:$PYTHONPATH ns-train splat-plus --vis tensorboard --max-num-iterations 40 --logging.steps-per-log 1 \
      --steps-per-eval-all-images 100000 --steps-per-eval-image 100000 --steps-per-eval-batch 0 $X \
      --output-dir /tmp/diag --experiment-name $cfg-$code --timestamp run $FOX > "$RES/diag-$cfg-$code.log" 2>&1
  done
done
# raw/summary.md: the table below from raw/ab.tsv, the eval JSONs and each run's TensorBoard 'Train Iter (time)'
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
