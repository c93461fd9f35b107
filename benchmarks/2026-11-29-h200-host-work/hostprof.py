"""Host profile of real ns-train steps: wall per step over a window, then torch.profiler (CPU + CUDA) over N steps."""
import json, os, sys, time
import torch
from nerfstudio.scripts.train import entrypoint
import ns_splat_plus.training.loop as L

START = int(os.environ.get("HP_START", "2000")); N = int(os.environ.get("HP_STEPS", "30")); OUT = os.environ["HP_OUT"] + (f".rank{os.environ['RANK']}" if "RANK" in os.environ else "")
orig = L.run_training_step
state = {"prof": None, "t": {}}

def wrapped(trainer, step):
    state["t"][step] = time.perf_counter()
    if step == START:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        state["prof"] = torch.profiler.profile(activities=acts, with_stack=bool(os.environ.get("HP_STACK")))
        state["prof"].__enter__()
    if step == START + N and state["prof"] is not None:
        torch.cuda.synchronize()
        p = state["prof"]; p.__exit__(None, None, None); state["prof"] = None
        ka = p.key_averages(group_by_stack_n=int(os.environ.get("HP_STACK", "0") or 0))
        with open(OUT + ".self.txt", "w") as f:
            f.write(ka.table(sort_by="self_cpu_time_total", row_limit=90, max_name_column_width=70))
        with open(OUT + ".total.txt", "w") as f:
            f.write(ka.table(sort_by="cpu_time_total", row_limit=90, max_name_column_width=70))
        if os.environ.get("HP_TRACE"):
            p.export_chrome_trace(OUT + ".trace.json")
        ts = state["t"]; walls = [ts[s + 1] - ts[s] for s in range(START - 300, START - 1) if s in ts and s + 1 in ts]
        walls.sort()
        n_ops = sum(e.count for e in ka if e.device_type == torch.autograd.DeviceType.CPU)
        json.dump({"median_step_ms_before": 1000 * walls[len(walls) // 2] if walls else None, "mean_step_ms_before": 1000 * sum(walls) / max(1, len(walls)), "p90_step_ms_before": 1000 * walls[int(len(walls) * 0.9)] if walls else None, "cpu_events_per_step": n_ops / N}, open(OUT + ".json", "w"))
    return orig(trainer, step)

L.run_training_step = wrapped
sys.argv = ["ns-train"] + sys.argv[1:]  # (torchrun: every rank writes HP_OUT.rank<k>.*)
entrypoint()
