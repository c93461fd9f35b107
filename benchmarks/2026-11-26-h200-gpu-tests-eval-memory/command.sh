# H200, 2026-11-26, commit 9fe574a (pytest_gpu.log); the memory traces in raw/ from the commits before it (notes.md).
# From the repository root on the device, after `source .device/setup.sh` (DEVELOPERS.md):
export PYTHONPATH=$PWD/splatbench:$PYTHONPATH
python3 -m pytest -m gpu -q -p no:cacheprovider -rs --durations=12 tests/ 2>&1 | tee pytest_gpu.log
# the evaluation's device memory by stage (memtrace_plugin.py prints it around each render and metric)
PYTHONPATH=benchmarks/2026-11-26-h200-gpu-tests-eval-memory:$PYTHONPATH python3 -m pytest -m gpu -q -s -p no:cacheprovider \
  -p memtrace_plugin tests/test_gpu_paths.py tests/test_evaluation.py -k eval_peak 2>&1 | tee raw/memtrace_after.log
# The logs of these commands (*.log, *.jsonl, test output) are in raw-logs.tar.xz, under their paths in this folder.
