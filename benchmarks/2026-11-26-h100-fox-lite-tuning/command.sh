# H100 (three machines in turn: A-B, C-F, G), 2026-11-26; A-F: the code of 0d280c9 (splat-plus-lite as at 5f8a152,
# B = 4, with the variants' arguments), G: the commit that added this folder (the new preset, B = 1). Run from the repository root with fox and plush-dog copied to /tmp/data and
# `source .device/setup.sh` (DEVELOPERS.md); the variants are splat-plus-lite with the arguments shown.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
FOX='--data /tmp/data/fox instant-ngp-data --eval-mode interval --eval-interval 8'
DOG='--data /tmp/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2'
FLAGS='--vis tensorboard --viewer.quit-on-train-completion True --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0'
# A) the real ns-train, each output line prefixed with the seconds since the process started (a first process on a
# fresh machine) -> raw/a1/ (ts.py: `for line in stdin: print(f"{time.time() - t0:8.2f} {line}")`)
ns-train splat-plus-lite $FLAGS --output-dir /tmp/a1 --timestamp run $FOX 2>&1 | python3 ts.py $t0 > raw/a1/ns-train-timestamped.log
# B) cameras per step and budget, trained at the same time (quality, Gaussians, train peak; timing discarded) -> raw/tuneB/
python3 scripts/benchmark.py --methods lite lite-b2 lite-b1 lite-b2-g2 lite-b2-q lite-b1-g2 \
  --variant 'lite=splat-plus-lite' \
  --variant 'lite-b2=splat-plus-lite --pipeline.datamanager.cameras-per-step 2' \
  --variant 'lite-b1=splat-plus-lite --pipeline.datamanager.cameras-per-step 1' \
  --variant 'lite-b2-g2=splat-plus-lite --pipeline.datamanager.cameras-per-step 2 --pipeline.model.efficient-budget-growth 2' \
  --variant 'lite-b2-q=splat-plus-lite --pipeline.datamanager.cameras-per-step 2 --steps-scaler 0.25' \
  --variant 'lite-b1-g2=splat-plus-lite --pipeline.datamanager.cameras-per-step 1 --pipeline.model.efficient-budget-growth 2' \
  --steps 30000 --repeats 1 --first-repeat 2 --concurrent-quality --no-prebuild --timeout 900 \
  --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneB
L='splat-plus-lite --pipeline.datamanager.cameras-per-step 1'
# C) B = 1, each alone, timed (no ns-eval) -> raw/tuneC/
python3 scripts/benchmark.py --methods b1 b1-d3 --variant "b1=$L" --variant "b1-d3=$L --pipeline.model.efficient-densify-score 3" \
  --steps 30000 --no-prebuild --timeout 400 --no-eval --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneC
# D) Gaussian-count settings at B = 1, trained at the same time -> raw/tuneD/
python3 scripts/benchmark.py --methods b1-d6 b1-g07 b1-lt2 b1-d3-v5 b1-d3-s028 \
  --variant "b1-d6=$L --pipeline.model.efficient-densify-score 6" \
  --variant "b1-g07=$L --pipeline.model.efficient-budget-growth 0.7" \
  --variant "b1-lt2=$L --pipeline.model.efficient-loss-thresh 0.2" \
  --variant "b1-d3-v5=$L --pipeline.model.efficient-densify-score 3 --pipeline.model.efficient-num-views 5" \
  --variant "b1-d3-s028=$L --pipeline.model.efficient-densify-score 3 --steps-scaler 0.28" \
  --steps 30000 --repeats 1 --first-repeat 2 --concurrent-quality --no-prebuild --timeout 900 \
  --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneD
# E) longer resolution schedules, each alone, timed -> raw/tuneE/
L5="$L --pipeline.model.efficient-densify-score 3 --pipeline.model.efficient-num-views 5"
python3 scripts/benchmark.py --methods e-rs6 e-rs9 --variant "e-rs6=$L5 --pipeline.model.resolution-schedule 6000" \
  --variant "e-rs9=$L5 --pipeline.model.resolution-schedule 9000" \
  --steps 30000 --no-prebuild --timeout 400 --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneE
# F) the candidate (the preset of the next commit, given as arguments) and splatfacto, each alone, timed -> raw/tuneF/
C="$L --pipeline.model.efficient-densify-score 6 --pipeline.model.efficient-num-views 5 --pipeline.model.resolution-schedule 6000"
python3 scripts/benchmark.py --methods lite-cand splatfacto --variant "lite-cand=$C" \
  --steps 30000 --no-prebuild --timeout 800 --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneF
# the fox runs timed alone on the second machine (C, E, F), merged -> results.json, results.md, readme_section.md, plots/
python3 scripts/benchmark.py --from-json raw/tuneC/results.json raw/tuneE/results.json raw/tuneF/results.json --out .
# G) the new preset on a third machine: plush-dog alone, timed -> raw/tuneG-dog/; fox, 5 seeds (repeat 1 alone, 2-5 at
# the same time) -> raw/tuneG-fox/ (the device time ran out after repeat 1's ns-eval: 2-5 trained, not evaluated)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --no-prebuild --timeout 400 \
  --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/tuneG-dog
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --repeats 5 --seed-per-repeat --concurrent-quality \
  --no-prebuild --timeout 600 --scene-args "$FOX" --scene-name fox --out /tmp/res/tuneG-fox
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
