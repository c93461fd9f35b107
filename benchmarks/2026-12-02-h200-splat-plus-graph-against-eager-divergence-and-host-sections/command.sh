# 1x H200 (16 cores), 2026-12-02, commit ca1d028 (raw/commit.txt), the second of two leases (1,694 s of device time in all, the session's budget). From the repository root:
# call 1 `source .device/setup.sh` (carry .device, .gpurun: wheels into /tmp/site, this checkout, gsplat's extension built
# with TORCH_CUDA_ARCH_LIST=9.0; fused-ssim not installed). Call 2 carried .data/dog (../shared/data/plush-dog: images_2,
# sparse, checked against its MANIFEST.sha256) and ran part 1 below in the foreground, its output under $OUT (= raw/).
# (An earlier lease the same morning started the same work in the background and lost its machine before the first
# poll: 290 s of device time, nothing measured.) Calls 3 and 4 ran part 2 without TORCH_CUDA_ARCH_LIST: gsplat began
# to rebuild its extension for other settings, and the second call waited on the first one's lock until its limit
# (500 s lost); call 5 removed the stale lock, rebuilt once (160 s) and ran part 2. Logs: raw-logs.tar.xz (raw/*.log,
# raw/div/*.log, raw/divr/*.log; divr/B.log did not come back: the device tool's file count).
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD/splatbench:/tmp/site
R=$OUT; mkdir -p $R/div
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
# Part 1a: the GPU test that a graphed run draws the eager run's random backgrounds (7408628)
python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_graphed_step_gpu.py -k "random_backgrounds" > $R/gpu_test.log 2>&1  # -> raw/gpu_test.log
# Part 1b: the divergence check without refines, as 2026-12-01's (its command.sh), now with the graph drawing the eager
#   run's backgrounds: A, A2 the default eager step, B --cuda-graph True, at once on the GPU, seed 2. Rule, fixed before:
#   |A - B| <= 3 x |A - A2| in the means at step 999: the graph computes the eager step's numbers.
DIV="splat-plus --output-dir /tmp/div --timestamp t --vis tensorboard --viewer.quit-on-train-completion True \
  --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0 --max-num-iterations 1000 \
  --steps-per-save 100 --save-only-latest-checkpoint False --pipeline.model.stop-split-at 0 \
  --pipeline.model.sh-degree-interval 100 --pipeline.model.num-downscales 0 \
  --machine.seed 2 --pipeline.datamanager.train-cameras-sampling-seed 2"
ns-train $DIV --experiment-name A $DOG > $R/div/A.log 2>&1 < /dev/null &
ns-train $DIV --experiment-name A2 $DOG > $R/div/A2.log 2>&1 < /dev/null &
ns-train $DIV --experiment-name B --cuda-graph True $DOG > $R/div/B.log 2>&1 < /dev/null &
wait
# the table: 2026-12-01's script, run from a copy whose arms were cut to A, A2, B and its pairs to (A, A2), (A, B),
# (A2, B) (its other lines as they are; the script itself prints n/a for the arms C, C2 that did not run)
python3 benchmarks/2026-12-01-h200-lite-against-splatfacto-and-graph-divergence/raw/compare_checkpoints.py /tmp/div  # -> raw/divergence.txt
# Part 1c: where the host time of a step goes, splat-plus on plush-dog, its schedule's first 3,000 steps, steps 200+
PROF="--max-num-iterations 3000 --vis tensorboard --viewer.quit-on-train-completion True --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0 --steps-per-save 1000000 --output-dir /tmp/prof"
python3 scripts/profile_step.py --out $R/prof-eager -- splat-plus $PROF $DOG > $R/prof-eager.log 2>&1  # -> raw/sections-eager.txt
python3 scripts/profile_step.py --out $R/prof-graph -- splat-plus $PROF --cuda-graph True $DOG > $R/prof-graph.log 2>&1  # -> raw/sections-graph.txt
# Part 2: the same three arms with refines (the default schedule's first 3,000 steps: refines from step 500), a
#   checkpoint every 500 steps, then ns-eval of each arm's last checkpoint. Diagnostic (one run per arm, not a quality
#   gate): the graph's Gaussian count and PSNR against the spread of two eager runs of the same seed.
R=$OUT/divr; mkdir -p $R
DIV="splat-plus --output-dir /tmp/divr --timestamp t --vis tensorboard --viewer.quit-on-train-completion True \
  --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0 --max-num-iterations 3000 \
  --steps-per-save 500 --save-only-latest-checkpoint False --machine.seed 2 --pipeline.datamanager.train-cameras-sampling-seed 2"
for a in A A2; do ns-train $DIV --experiment-name $a $DOG > $R/$a.log 2>&1 < /dev/null & done
ns-train $DIV --experiment-name B --cuda-graph True $DOG > $R/B.log 2>&1 < /dev/null &
wait
for a in A A2 B; do ns-eval --load-config /tmp/divr/$a/splat-plus/t/config.yml --output-path $R/$a-eval.json > $R/$a-eval.log 2>&1 & done  # -> raw/divr/*-eval.json
wait
# the Gaussian count of every arm's checkpoints (torch.load of step-*.ckpt, the rows of _model.gauss_params.means) -> raw/divr/counts.txt
