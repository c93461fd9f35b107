"""ns-eval's parts, timed in one process: import, eval_setup, metrics (each profiled after the import)."""
import cProfile, io, pstats, sys, time

t0 = time.perf_counter()
import nerfstudio.scripts.eval  # noqa: F401
from nerfstudio.utils.eval_utils import eval_setup
from pathlib import Path
import torch

t1 = time.perf_counter()
print(f"PHASE import {t1 - t0:.2f} s", flush=True)
out = {}
prof = cProfile.Profile()
prof.enable()
config, pipeline, ckpt, step = eval_setup(Path(sys.argv[1]))
prof.disable()
torch.cuda.synchronize()
t2 = time.perf_counter()
print(f"PHASE eval_setup {t2 - t1:.2f} s", flush=True)
s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45); print(s.getvalue()[:9000])
prof = cProfile.Profile()
prof.enable()
metrics = pipeline.get_average_eval_image_metrics(get_std=True)
prof.disable()
torch.cuda.synchronize()
t3 = time.perf_counter()
print(f"PHASE metrics {t3 - t2:.2f} s ({len(pipeline.datamanager.eval_dataset)} images) {metrics}", flush=True)
s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45); print(s.getvalue()[:9000])
print(f"PHASE total {t3 - t0:.2f} s")
