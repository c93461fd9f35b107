"""Where the time of one training step goes: a per-section breakdown of real ns-train runs.

    python scripts/profile_step.py --out /tmp/prof/on -- splat-plus --max-num-iterations 3000 \\
        --vis tensorboard --data path/to/fox instant-ngp-data
    torchrun --nproc-per-node 2 scripts/profile_step.py --out /tmp/prof/w2 -- splat-plus ...
    python scripts/profile_step.py --sync ...    # synchronise the GPU around every section

Entry point: :func:`main` (``scripts/profile_step.py``). Everything after ``--`` is parsed exactly like
``ns-train`` arguments. The run is nerfstudio's own loop under the benchmark's trainer probe
(``splatbench.probe.run_train``), whose section option (``splatbench.sections``) wraps the pieces of an
iteration with host timers: the data loader, model forward, losses, optimizer step (gradient averaging
and finiteness check inside), every training callback (densification included), and the writer /
viewer work between iterations, plus Python's garbage collector. Most of them are the built trainer's
own instance attributes; nerfstudio's writer functions (``nerfstudio.utils.writer.put_scalar`` and
others) and splat-plus's ``average_gradients`` are module-level functions: they are patched for the
duration of the probed run and restored when it ends.

Without ``--sync`` a section's time is what the host spends launching it (waiting only where the code
itself synchronises); with ``--sync`` it includes the GPU work. Steps before ``--skip`` are not counted.

Offline (no AlexNet weights in torch's cache), methods other than splat-plus get the benchmark's
stand-in LPIPS weights in OUT/lpips-standin (``TORCH_HOME``): splatfacto builds LPIPS when the model
is constructed and could not start without them (LPIPS plays no part in training). splat-plus runs
without them, as ns-train would on the same machine. ``--no-lpips-standin`` keeps torch's own cache.

Writes OUT/profile.rank<k>.json and prints a table (ms per counted step) on every rank; the probe's
own per-step JSON goes to the run directory (benchmark_probe_train.json).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from splatbench.options import ProbeOptions
from splatbench.probe import run_train


def use_lpips_standin(method: str, out: Path) -> Optional[Path]:
    """Point TORCH_HOME at stand-in AlexNet weights when ``method`` needs them to start and the real
    ones are not cached (the benchmark's :func:`~splatbench.children.lpips_standin_home`);
    the home used, or None. splat-plus needs none: with weights it would build LPIPS, which draws
    AlexNet's initial weights from the global RNG, and train on another random stream than ns-train."""
    if method.startswith("splat-plus"):
        return None
    from splatbench.children import lpips_standin_home

    home = lpips_standin_home(out)
    if home is not None:
        os.environ["TORCH_HOME"] = str(home)  # torch.hub reads it when LPIPS is built
        print(f"profile_step: AlexNet weights not cached: LPIPS uses stand-in weights ({home}); training is unaffected")
    return home


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="profile_step.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s --out DIR [options] -- METHOD [ns-train arguments ...]",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip", type=int, default=200, help="first steps left out")
    parser.add_argument("--sync", action="store_true", help="synchronise the GPU around every section")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() before training (what-if)")
    parser.add_argument("--no-lpips-standin", action="store_true", help="no stand-in AlexNet weights when offline")
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            parser.print_help()
            raise SystemExit(0)
        parser.error("the training command is missing: end the options with -- and the ns-train arguments")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    train_argv = argv[split + 1 :]
    if not args.no_lpips_standin and train_argv:
        use_lpips_standin(train_argv[0], args.out)
    options = ProbeOptions.from_env()
    options.sections_out = str(args.out)
    options.sections_skip = args.skip
    options.sections_sync = args.sync
    options.gc_freeze = args.gc_freeze
    run_train(train_argv, options)
