# NVIDIA H200, 1 GPU, 128 GiB host; 2026-11-23; code commit not recorded (the results were added in 608d3ea and,
# for the page-locked blocks, 919a9d9). Notes: ../2026-11-23-h200-plush-dog-30k/notes.md ("A thousand 4K images").
# Run from the repository root.
python scripts/make_synthetic_scene.py /tmp/s4k --large --views 1000 --width 3840 --height 2160 --gaussians 2000000 \
  --device cuda --writers 14   # -> raw/gen.log
python scripts/benchmark.py --no-eval --steps 200 --skip-steps 50 --methods splat-plus \
  --scene-args "--data /tmp/s4k colmap --downscale-factor 1" --train-args "--pipeline.model.num-downscales 0" --out /tmp/b1000   # -> raw/b1000.log
python scripts/benchmark.py --no-eval --steps 200 --skip-steps 50 --methods splat-plus \
  --scene-args "--data /tmp/s4k colmap --downscale-factor 1" \
  --train-args "--pipeline.model.num-downscales 0 --pipeline.datamanager.image-memory stream" --out /tmp/b1000s   # -> raw/b1000s.log
python scripts/benchmark.py --no-eval --steps 200 --skip-steps 50 --methods splatfacto \
  --scene-args "--data /tmp/s4k colmap --downscale-factor 1" --train-args "--pipeline.model.num-downscales 0" --out /tmp/b1000sf   # -> raw/b1000sf.log
# the 100-view scene (every 10th view of /tmp/s4k; its path and how it was cut are not recorded) -> raw/b100.log
python scripts/benchmark.py --no-eval --steps 200 --skip-steps 50 --methods splat-plus \
  --scene-args "--data /tmp/s4k-100 colmap --downscale-factor 1" --train-args "--pipeline.model.num-downscales 0" --out /tmp/b100
# splat-plus.md and splatfacto.md tabulate these runs (how they were made is not recorded)
# train images in shared page-locked blocks (as recorded in the results files)
python scripts/benchmark.py --no-eval --steps 200 --skip-steps 50 --methods splat-plus --timeout 145 \
  --scene-args '--data /tmp/s4k colmap --downscale-factor 1' --train-args '--pipeline.model.num-downscales 0' \
  --scene-name 1000x4K --out /tmp/b1000   # -> raw/b1000_pinned_blocks_train_results.json
# ... and the eval images too (this run shared the GPU with three training runs)
python scripts/benchmark.py --no-eval --no-prebuild --steps 200 --skip-steps 50 --methods splat-plus --timeout 195 \
  --scene-args '--data /tmp/s4k colmap --downscale-factor 1' --train-args '--pipeline.model.num-downscales 0' \
  --scene-name 1000x4K --out /tmp/b1000   # -> raw/b1000_pinned_blocks_train_eval_results.json
pytest -m gpu tests/test_image_memory.py   # -> pytest_gpu_pinned_blocks.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
