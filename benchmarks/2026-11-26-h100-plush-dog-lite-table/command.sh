# H100 (a second machine: A, then B), 2026-11-26; the code of 59dd34f (ns_splat_plus as at c27cab3: splat-plus-lite at
# B = 1). Issue 30's table on plush-dog, first part: every method's repeat 1 timed alone in one command; splat-plus-lite's
# repeats 2-5. Repeats 2-5 of splatfacto, splat-plus and splat-plus-fast follow below as far as they have run (with
# --first-repeat 2, at this package: notes.md lists those still to run). Run from the repository root with plush-dog
# copied to /tmp/data and `source .device/setup.sh` (DEVELOPERS.md); the number of runs (5 per method) and the seeds
# (repeat k: seed k) were fixed before any ran.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
DOG='--data /tmp/data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2'
# A) the four methods, repeat 1 (seed 1), each alone on the GPU, one after the other, each evaluated by ns-eval
python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite --steps 30000 --seed-per-repeat \
  --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/tableA-dog  # -> raw/tableA-dog/
# B) splat-plus-lite repeats 2-5 (seeds 2-5), trained at the same time (quality only: timing discarded)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog --out /tmp/res/tableB-lite-dog  # -> raw/tableB-lite-dog/
# C) 2026-11-27, H200 (a 2-GPU machine, this run alone on its GPU), the code of d6d40d7 with ns_splat_plus as at
# c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy; source digest 579ea92667da, checked
# before the start; splatfacto trains nerfstudio's own model): splatfacto repeat 2 (seed 2), quality only, exported
# to a PLY. Started from a folder holding scripts/ and splatbench/ but no ns_splat_plus. nerfstudio's exporter imports
# open3d, pymeshlab, mediapy and xatlas at the top: an empty package of each name, on PYTHONPATH, stands in for them.
python3 scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splatfacto-r2-1-dog  # -> raw/tableC-splatfacto-dog/
# D) 2026-11-27, H200 (a 4-GPU machine: each GPU ran its own batches, four at a time on the machine), the code of
# 870f20e with ns_splat_plus as at c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy;
# source digest 579ea92667da, checked before the start), started from a folder holding scripts/ and splatbench/ but
# no ns_splat_plus: splatfacto repeat 5 (seed 5), alone on its GPU (quality only), exported to a PLY. Repeats 3-4
# (seeds 3-4) started on another GPU and were stopped at step 12,000, when the session's device time could no longer
# hold them: still to run.
python3 scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 5 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splatfacto-r5-1-dog  # -> raw/tableD-splatfacto-dog/
# E) the same machine and code: splat-plus repeats 2-3 (seeds 2-3), trained at the same time (quality only), each
# exported to a PLY
python3 scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splat-plus-r2-2-dog  # -> raw/tableE-sp-dog/
# F) the same machine and code: splat-plus-fast repeats 2-3 (seeds 2-3), trained at the same time (quality only), each
# exported to a PLY
python3 scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splat-plus-fast-r2-2-dog  # -> raw/tableF-fast-dog/
# G) the same machine and code: splat-plus-fast repeats 4-5 (seeds 4-5), as F, on another GPU
python3 scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splat-plus-fast-r4-2-dog  # -> raw/tableG-fast-dog/
# P) the same machine and code, not merged (a sixth splat-plus-lite run, for its PLY bytes only; its GPU ran it
# alone, the machine's other GPUs ran batches of their own: its timing is not a timed-alone figure)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --repeats 1 --first-repeat 1 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splat-plus-lite-r1-1-dog  # -> raw/ply-lite-dog/
# H) 2026-11-27, H200 (a third 4-GPU machine: each GPU ran its own batch, four at a time on the machine), the code
# of d5fde15 with ns_splat_plus as at c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy;
# source digest 579ea92667da, checked before the start), started from a folder holding scripts/ and splatbench/ but
# no ns_splat_plus, with setup.sh's TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 exported (so gsplat's extension was not
# rebuilt): splatfacto repeat 3 (seed 3), alone on its GPU (quality only), exported to a PLY
python3 scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 3 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splatfacto-r3-1-plush-dog  # -> raw/tableH-splatfacto-dog/
# I) the same machine and code: splatfacto repeat 4 (seed 4), as H, on another GPU
python3 scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 1 --first-repeat 4 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splatfacto-r4-1-plush-dog  # -> raw/tableI-splatfacto-dog/
# J) the same machine and code: splat-plus repeats 4-5 (seeds 4-5), trained at the same time (quality only), each
# exported to a PLY
python3 scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$DOG" --scene-name plush-dog \
  --out /tmp/res/splat-plus-r4-2-plush-dog  # -> raw/tableJ-sp-dog/
# merged -> results.json, results.md, readme_section.md, plots/ (from this folder)
python3 scripts/benchmark.py --from-json raw/tableA-dog/results.json raw/tableB-lite-dog/results.json \
  raw/tableC-splatfacto-dog/results.json raw/tableD-splatfacto-dog/results.json raw/tableE-sp-dog/results.json \
  raw/tableF-fast-dog/results.json raw/tableG-fast-dog/results.json raw/tableH-splatfacto-dog/results.json \
  raw/tableI-splatfacto-dog/results.json raw/tableJ-sp-dog/results.json --reference splatfacto --out .
# After A, `ns-export gaussian-splat --load-config <run>/config.yml` was tried for each run: it failed on the device,
# whose nerfstudio lacks the modules its exporter imports at the top (open3d, pymeshlab, mediapy, xatlas), and the
# configs of benchmark runs name the probe's trainer (splatbench must be importable): no PLY bytes from these runs.
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
