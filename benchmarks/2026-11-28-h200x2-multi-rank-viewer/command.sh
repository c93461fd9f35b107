# 2x H200 (nvidia-h200-x2), 2026-11-28, commit b99c61a (runs A and B) and the session's working tree before commit (C)
# From the repository root on the device, after `source .device/setup.sh` (DEVELOPERS.md); DOG is
# ../shared/data/plush-dog copied into .dog/. stdin is /dev/null, as in a batch job: the viewer starts
# (the default --vis viewer) and the run ends after its last step.
DOG="--data .dog colmap --colmap-path sparse/0 --downscale-factor 2"
# A. the README's headline command on a machine with 2 GPUs: ns-train spawns one rank per GPU
ns-train splat-plus --output-dir /tmp/run/outputs --experiment-name spawn $DOG < /dev/null   # -> raw/spawn.log
# B. the same under torchrun
torchrun --nproc-per-node 2 $(which ns-train) splat-plus --output-dir /tmp/run/outputs --experiment-name torchrun $DOG < /dev/null   # -> raw/torchrun.log
# C. the GPU test tier on the same machine kind (2 GPUs)
PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu -q -rs --durations=15 -p no:cacheprovider   # -> raw/pytest_gpu.log
PYTHONPATH=$PWD/splatbench:/tmp/site python3 -m pytest -m gpu -q -p no:cacheprovider tests/training/test_gpu_paths.py -k load_a_cuda_checkpoint   # -> raw/pytest_gpu_rerun.log
# The logs are in raw-logs.tar.xz (tar -xJf raw-logs.tar.xz).
