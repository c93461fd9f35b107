# 1x H200 (16 cores), 2026-11-29, commit e369513 (raw/commit.txt), run from the repository root after
# `source .device/setup.sh`, as one background job, alone on the GPU.
# 0) the GPU tests written at f56ab53 (fixed-capacity intersections) and e232c2f (no compile at a new size)
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/raster/test_fixed_capacity_isect.py \
  tests/kernels/test_photometric_loss.py tests/kernels/test_kernel_launch.py  # -> raw/gpu-tests.txt (its last 40 lines)
# 1) the fused loss's kernels with the image strides specialized (kernels/ssim.py of e232c2f^) and unspecialized
#    (e232c2f), side by side in one process; ssim_specialization_bench.py is in this folder
git show e232c2f^:ns_splat_plus/kernels/ssim.py > /tmp/ssim_old.py
timeout 200 python3 benchmarks/2026-11-29-h200-kernel-strides-and-fixed-isect/ssim_specialization_bench.py \
  --old /tmp/ssim_old.py  # -> raw/ssim-specialization.json (its JSON lines as one list)
