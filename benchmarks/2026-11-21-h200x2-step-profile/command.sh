# NVIDIA H200, 1 and 2 GPUs of one host; 2026-11-21; before-*: the code before 4eb83f1, after-*: 4eb83f1 (which added these files)
# The commands of README.md in this folder; run from the repository root, P an output folder.
FOX="--data ../shared/data/fox instant-ngp-data --eval-mode interval --eval-interval 8"   # README.md: --data <fox>
COMMON="--max-num-iterations 3000 --vis tensorboard --viewer.quit-on-train-completion True --steps-per-eval-image 0 --steps-per-eval-batch 0 --steps-per-eval-all-images 0 --steps-per-save 1000000"
P=/tmp/step-profile
python scripts/profile_step.py --out $P -- splat-plus $COMMON $FOX                                    # before-1gpu-instrumentation-on.txt
python scripts/profile_step.py --out $P -- splat-plus $COMMON --pipeline.model.instrumentation False $FOX  # before-1gpu-instrumentation-off.txt
torchrun --nproc-per-node 2 scripts/profile_step.py --out $P -- splat-plus $COMMON $FOX             # before-2gpu.txt; on 4eb83f1: after-2gpu-rank0.txt
