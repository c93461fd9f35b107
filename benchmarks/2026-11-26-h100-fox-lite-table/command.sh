# H100 (one machine: A, then B), 2026-11-26; the code of 59dd34f (ns_splat_plus as at c27cab3: splat-plus-lite at
# B = 1). Issue 30's table on fox, first part: every method's repeat 1 timed alone in one command; splat-plus-lite's
# repeats 2-5. Repeats 2-5 of splatfacto, splat-plus and splat-plus-fast follow below as far as they have run (with
# --first-repeat 2, at this package: notes.md lists those still to run). Run from the repository root with fox copied to /tmp/data and `source .device/setup.sh`
# (DEVELOPERS.md); the number of runs (5 per method) and the seeds (repeat k: seed k) were fixed before any ran.
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
FOX='--data /tmp/data/fox instant-ngp-data --eval-mode interval --eval-interval 8'
# A) the four methods, repeat 1 (seed 1), each alone on the GPU, one after the other, each evaluated by ns-eval
python3 scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fast splat-plus-lite --steps 30000 --seed-per-repeat \
  --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/res/tableA-fox  # -> raw/tableA-fox/
# B) splat-plus-lite repeats 2-5 (seeds 2-5), trained at the same time (quality only: timing discarded)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --no-prebuild --timeout 900 --scene-args "$FOX" --scene-name fox --out /tmp/res/tableB-lite-fox  # -> raw/tableB-lite-fox/
# C) H200, the code of 7ded9a5 (ns_splat_plus as at c27cab3, source digest 579ea92667da): splatfacto repeats 2-5
# (seeds 2-5), trained at the same time (quality only), each exported to a PLY (--export-ply). nerfstudio's exporter
# imports open3d, pymeshlab, mediapy and xatlas at the top, which the device lacks and the gaussian-splat export
# never calls: an empty package of each name, on PYTHONPATH, stands in for them there.
python3 scripts/benchmark.py --methods splatfacto --steps 30000 --repeats 4 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splatfacto-r2-4-fox  # -> raw/tableC-splatfacto-fox/
# D) 2026-11-27, H200 (a 2-GPU machine, this batch alone on its GPU), the code of d6d40d7 with ns_splat_plus as at
# c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy; source digest 579ea92667da, checked
# before the start): splat-plus-fast repeats 2-3 (seeds 2-3), trained at the same time (quality only), each exported
# to a PLY. Started from a folder holding scripts/ and splatbench/ but no ns_splat_plus, so no probe could import
# the checkout's package. Repeats 4-5 were cut off when the session's device time ran out: still to run.
python3 scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splat-plus-fast-r2-2-fox  # -> raw/tableD-fast-fox/
# E) 2026-11-27, H200 (a 4-GPU machine: each GPU ran its own batches, four at a time on the machine), the code of
# 870f20e with ns_splat_plus as at c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy;
# source digest 579ea92667da, checked before the start), started from a folder holding scripts/ and splatbench/ but
# no ns_splat_plus: splat-plus repeats 2-3 (seeds 2-3), trained at the same time (quality only), each exported to a PLY
python3 scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat 2 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splat-plus-r2-2-fox  # -> raw/tableE-sp-fox/
# F) the same machine and code: splat-plus-fast repeats 4-5 (seeds 4-5), trained at the same time (quality only),
# each exported to a PLY
python3 scripts/benchmark.py --methods splat-plus-fast --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splat-plus-fast-r4-2-fox  # -> raw/tableF-fast-fox/
# P) the same machine and code, not merged (a sixth splat-plus-lite run, for its PLY bytes only; its GPU ran it
# alone, the machine's other GPUs ran batches of their own: its timing is not a timed-alone figure)
python3 scripts/benchmark.py --methods splat-plus-lite --steps 30000 --repeats 1 --first-repeat 1 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splat-plus-lite-r1-1-fox  # -> raw/ply-lite-fox/
# G) 2026-11-27, H200 (a third 4-GPU machine: each GPU ran its own batch, four at a time on the machine), the code
# of d5fde15 with ns_splat_plus as at c27cab3 (`git archive c27cab3 ns_splat_plus` installed over the wheel's copy;
# source digest 579ea92667da, checked before the start), started from a folder holding scripts/ and splatbench/ but
# no ns_splat_plus, with setup.sh's TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 exported (so gsplat's extension was not
# rebuilt): splat-plus repeats 4-5 (seeds 4-5), trained at the same time (quality only), each
# exported to a PLY
python3 scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat 4 --concurrent-quality \
  --seed-per-repeat --export-ply --no-prebuild --timeout 1750 --scene-args "$FOX" --scene-name fox \
  --out /tmp/res/splat-plus-r4-2-fox  # -> raw/tableG-sp-fox/
# merged -> results.json, results.md, readme_section.md, plots/ (from this folder)
python3 scripts/benchmark.py --from-json raw/tableA-fox/results.json raw/tableB-lite-fox/results.json \
  raw/tableC-splatfacto-fox/results.json raw/tableD-fast-fox/results.json raw/tableE-sp-fox/results.json \
  raw/tableF-fast-fox/results.json raw/tableG-sp-fox/results.json --reference splatfacto --out .
# After A, `ns-export gaussian-splat --load-config <run>/config.yml` was tried for each run: it failed on the device,
# whose nerfstudio lacks the modules its exporter imports at the top (open3d, pymeshlab, mediapy, xatlas), and the
# configs of benchmark runs name the probe's trainer (splatbench must be importable): no PLY bytes from these runs.
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
