# NVIDIA H200, 1 GPU; 2026-11-24; code commit not recorded (the results were added in ce2d6d7)
# Run from the repository root on the device, with the scene(s) copied into the checkout's git-ignored .data/:
mkdir -p .data && cp -rn ../shared/data/plush-dog .data/
DOG="--data .data/plush-dog colmap --colmap-path sparse/0 --downscale-factor 2"
B=benchmarks/2026-11-24-h200-plush-dog-host-light
python scripts/benchmark.py --methods splatfacto splat-plus splat-plus-fused \
  --variant "splat-plus-fused=splat-plus --pipeline.model.fused-loss True" --steps 30000 --gpu-busy-steps 50 \
  --gpu-busy-at 0.67 --timeout 1200 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-timed   # -> raw/dog_timed_results.json, raw/dog_timed.log
python scripts/benchmark.py --methods splat-plus splat-plus-fused \
  --variant "splat-plus-fused=splat-plus --pipeline.model.fused-loss True" --steps 30000 --repeats 2 --first-repeat 2 \
  --concurrent-quality --no-prebuild --timeout 900 --scene-args "$DOG" --scene-name plush-dog --out /tmp/r-dog-q   # -> raw/dog_quality_r2r3_results.json, raw/dog_quality.log
# the merged report; splatfacto's repeats 2-4 from ../2026-11-24-h200-plush-dog-30k-fused-ssim
# (as run: --from-json /tmp/r-dog-timed/results.json /tmp/r-dog-q/results.json
#  benchmarks/h200-2026-11-24/plush-dog-30k-fused-ssim/splatfacto_earlier_results.json ... --out benchmarks/h200-2026-11-24/host-light/plush-dog)
python scripts/benchmark.py --from-json $B/raw/dog_timed_results.json $B/raw/dog_quality_r2r3_results.json \
  benchmarks/2026-11-24-h200-plush-dog-30k-fused-ssim/raw/splatfacto_earlier_results.json \
  --methods splatfacto splat-plus splat-plus-fused --out $B
# The host profile (hostprof.py, here; HP_START / HP_STEPS / HP_OUT as in its source): plush-dog B = 1, late phase
# (--pipeline.model.resolution-schedule 250 --pipeline.model.stop-split-at 1500), on e93cfc9 and on this code, one run at a time;
# -> hostprof_*.txt, hostprof_ab.txt. The ns-train arguments beyond those named in hostprof_ab.txt were not recorded, e.g.:
# HP_OUT=hostprof_new_dog_off python $B/hostprof.py splat-plus --pipeline.model.resolution-schedule 250 \
#   --pipeline.model.stop-split-at 1500 $DOG
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
