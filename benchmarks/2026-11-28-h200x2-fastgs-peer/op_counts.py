"""Operators per training step of a real ns-train run (torch.profiler on the CPU), to compare two commits.

    HP_OUT=PREFIX [HP_START=600] [HP_STEPS=20] python op_counts.py splat-plus-lite --machine.device-type cpu ...

writes PREFIX.ops.json: the operators (and autograd nodes) per step over steps HP_START to HP_START + HP_STEPS - 1.
It wraps ``run_training_step`` wherever the checkout defines or imports it (ns_splat_plus.training.step, .loop).
"""

import importlib
import json
import os
import sys

import torch
from nerfstudio.scripts.train import entrypoint

START = int(os.environ.get("HP_START", "600"))
STEPS = int(os.environ.get("HP_STEPS", "20"))
OUT = os.environ["HP_OUT"]
run_training_step = importlib.import_module("ns_splat_plus.training.step").run_training_step
profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


def counted_step(trainer, step):
    if step == START:
        profile.__enter__()
    if step == START + STEPS:
        profile.__exit__(None, None, None)
        averages = profile.key_averages()
        ops = {e.key: e.count / STEPS for e in averages}
        with open(OUT + ".ops.json", "w") as f:
            json.dump({"cpu_events_per_step": sum(ops.values()), "ops": dict(sorted(ops.items()))}, f, indent=1)
    return run_training_step(trainer, step)


for name in ("ns_splat_plus.training.step", "ns_splat_plus.training.loop"):
    module = importlib.import_module(name)
    if hasattr(module, "run_training_step"):
        module.run_training_step = counted_step
sys.argv = ["ns-train"] + sys.argv[1:]
entrypoint()
