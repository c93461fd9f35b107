# 2x H200 (nvidia-h200-x2), 2026-11-28, commit 4985eb6 (the GPU tier, the SSIM libraries); the last check (raw/after/) on one
# H200 with the working tree that became the next commit (fused-ssim under --pipeline.model.ssim-kernel auto).
# From the repository root on the device, after `source .device/setup.sh` (PYTHONPATH=/tmp/site); DOG is
# ../shared/data/plush-dog copied into .dog/. fussim 0.3.15 is PyPI's wheel (cp312 manylinux_2_28), fused-ssim is
# rahul-goel/fused-ssim at 0ac916a, both installed into /tmp/site2 beside the other packages.
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
NOEVAL="--steps-per-eval-batch 0 --steps-per-eval-image 0 --steps-per-eval-all-images 0"
# 1. the GPU tier on 2 GPUs (its two-GPU replica tests included); fused-ssim built meanwhile (70 s)   -> pytest_gpu.log
(cd fused-ssim && CUDA_ARCHITECTURES=90 python3 -m pip install -v --no-index --no-deps --no-build-isolation --target /tmp/site2 .)  # -> build_fused_ssim.log
python3 -m pip install --no-index --no-deps --target /tmp/site2 fussim-0.3.15-cp312-cp312-manylinux_2_28_x86_64.whl
PYTHONPATH=splatbench:/tmp/site python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=15 tests/
# 2. the loss's SSIM, forward + backward, four implementations (ssim_libraries.py: CUDA events, median of 100)   -> ssim_micro.json, ssim_micro.log
PYTHONPATH=/tmp/site:/tmp/site2 python3 ssim_libraries.py fused-ssim/COMMIT ssim_micro.json
# 3. whole splat-plus steps at full size (1500x1000) with each SSIM in the loss: median step over steps 1,200-1,499,
#    two rounds, two runs at a time (one per GPU: triton with fussim, fused-ssim with pytorch_msssim)   -> raw/step_*.json
#    (ssim_step.py swaps the loss's SSIM; the pytorch_msssim runs are SSIM_IMPL=triton with the option below, so their
#    JSON says "triton" with ssim_calls 0)
for impl in triton fussim fused-ssim; do
  PYTHONPATH=/tmp/site:/tmp/site2 SSIM_IMPL=$impl HP_START=1500 HP_OUT=step_${impl}_r1.json python3 ssim_step.py splat-plus --vis tensorboard \
    $NOEVAL --pipeline.model.num-downscales 0 --max-num-iterations 1520 $DOG
done
PYTHONPATH=/tmp/site:/tmp/site2 SSIM_IMPL=triton HP_START=1500 HP_OUT=step_msssim_r1.json python3 ssim_step.py splat-plus --vis tensorboard \
  $NOEVAL --pipeline.model.ssim-kernel pytorch-msssim --pipeline.model.num-downscales 0 --max-num-iterations 1520 $DOG
# 4. after the change (one H200): the GPU SSIM tests with fused-ssim installed, and a short run under auto   -> raw/after/
PYTHONPATH=/tmp/site2:/tmp/site python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/kernels/test_ssim.py
PYTHONPATH=/tmp/site2:/tmp/site ns-train splat-plus --vis tensorboard --max-num-iterations 800 --pipeline.model.num-downscales 0 $NOEVAL $DOG
# The logs (*.log, raw/*.log, raw/after/*.log) are in raw-logs.tar.xz.
