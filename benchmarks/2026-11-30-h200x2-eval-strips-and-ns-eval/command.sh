# 2x H200 (32 cores), 2026-11-30, commit 7172b55 (HEAD; raw/commit.txt); a563601 installed beside it for the
# comparison (git archive a563601 -> /tmp/tree-s80, pip install --no-deps --target /tmp/site-old). Two leases of
# the same kind, each after `source .device/setup.sh`; fox (../shared/data/fox) copied to /tmp/fox, plush-dog
# (../shared/data/plush-dog) to /tmp/dog. Offline: stand-in AlexNet weights (torchvision's architecture, seeded
# random weights) in $TORCH_HOME, so LPIPS runs (its time and memory count) but its values mean nothing.
FOX='--data /tmp/fox instant-ngp-data --eval-mode interval --eval-interval 8'
DOG='--data /tmp/dog colmap --colmap-path sparse/0 --downscale-factor 2'
export TORCH_HOME=/tmp/torch-home
python3 -c "
import torch, torchvision
from ns_splat_plus import upstream
p = upstream.alexnet_weights_path(); p.parent.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0); torch.save(torchvision.models.alexnet(weights=None).state_dict(), p)"

# --- lease 1, GPU 1 (alone on it), HEAD -------------------------------------------------------------------------
export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD/splatbench:/tmp/site
python3 -m pytest -m gpu tests/training/test_gpu_paths.py -k "strips_stay or eval_peak" -q -s -p no:cacheprovider  # -> gpu_tests.log
# each command's whole process wall -> raw/walls.txt (date +%s.%N around it)
ns-train splat-plus-lite --max-num-iterations 200 --output-dir $R/runs --experiment-name warm --timestamp t $FOX  # warm (caches)
ns-train splat-plus-lite --output-dir $R/runs --experiment-name head --timestamp t $FOX                           # train_head
CFG=$R/runs/head/splat-plus-lite/t/config.yml
ns-eval --load-config $CFG --output-path $R/eval_head.json                                                     # -> raw/eval_head.json
(cd /tmp/tree-s80 && PYTHONPATH=/tmp/site-old:/tmp/site ns-eval --load-config $CFG --output-path $R/eval_old.json)  # -> raw/eval_old.json
ns-eval --load-config $CFG --output-path $R/eval_head2.json                                                    # -> raw/eval_head2.json
# --- lease 1, GPU 0 (alone on it), a563601, at the same time as the HEAD commands above -> raw/walls_old.txt ------
cd /tmp/tree-s80 && export CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site-old:/tmp/site
ns-train splat-plus-lite --max-num-iterations 200 --output-dir $R/runs --experiment-name warmold --timestamp t $FOX  # warm_old
timeout 420 ns-train splat-plus-lite --output-dir $R/runs --experiment-name old --timestamp t $FOX                   # train_old

# --- lease 2 (a fresh machine: the first process of each kind cold), HEAD ----------------------------------------
python3 -m compileall -q -j 16 /tmp/site
CUDA_VISIBLE_DEVICES=1 ns-train splat-plus-lite --output-dir $R --experiment-name lite --timestamp t $DOG &         # train_lite.log
CUDA_VISIBLE_DEVICES=0 ns-train splatfacto --max-num-iterations 3000 --viewer.quit-on-train-completion True \
  --output-dir $R --experiment-name sf --timestamp t $DOG; wait
export CUDA_VISIBLE_DEVICES=1
for m in lite/splat-plus-lite sf/splatfacto; do
  ns-eval --load-config $R/$m/t/config.yml --output-path $R/eval_${m%%/*}.json   # twice each, timed; -> raw/plush_dog_eval_lite.json
  python3 evalphases.py $R/$m/t/config.yml   # ns-eval's parts in one process, each profiled (the script: notes.md)
done
