# 2x H200 (nvidia-h200-x2), 2026-11-28, working tree of 30f045f (the device copy's git metadata still named 82e7b14; ns_splat_plus/errors.py there had exit_with, checked)
# Issue 46 / the CI failure of session 55: ranks started with different options stop at start-up, right after a collective, under NCCL
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/splatbench PATH=/tmp/site/bin:$PATH PYTHONPYCACHEPREFIX=/tmp/pycache NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .device/*.whl  # no gsplat build: the options are compared before it
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site .  # -> raw/install.txt
# three times: torchrun --nproc-per-node 2 with rank 0 running ns-train ... --max-num-iterations 40 and rank 1 ... 80 (a wrapper execs each rank's own command line)
python3 - 3 results-logs <<'EOF'  # -> results.txt; logs raw/run{0,1,2}.log in raw-logs.tar.xz
"""On 2 GPUs (NCCL): ranks started with different --max-num-iterations stop at start-up with exit status 2
(the agreement, right after a collective), N times; prints each run's exit codes and torchrun's Root Cause."""
import json, os, re, subprocess, sys, time
from pathlib import Path
from splatbench.scenes import make_scene, SceneSpec

n = int(sys.argv[1]); out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
scene = make_scene(Path("/tmp/optcheck/scene"), SceneSpec(n_views=8, width=32, height=24))
wrapper = Path("/tmp/optcheck/per_rank.py")
wrapper.write_text('import json, os\nargs = json.loads(os.environ["ARGS"])[int(os.environ["RANK"])]\nos.execv(args[0], args)\n')
ns_train = subprocess.run(["which", "ns-train"], capture_output=True, text=True).stdout.strip()
per_rank = [[sys.executable, ns_train, "splat-plus", "--data", str(scene), "--output-dir", "/tmp/optcheck/out",
             "--vis", "tensorboard", "--max-num-iterations", str(s), "colmap"] for s in (40, 80)]
for i in range(n):
    t = time.time()
    p = subprocess.run(["torchrun", "--nproc-per-node", "2", "--master-port", str(29600 + i), str(wrapper)],
                       env={**os.environ, "ARGS": json.dumps(per_rank)}, capture_output=True, text=True, timeout=240)
    output = p.stdout + p.stderr
    (out / f"run{i}.log").write_text(output)
    codes = re.findall(r"rank\s*:\s*(\d+) \(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)", output)
    root = output[output.find("Root Cause"):][:600].splitlines()
    print(f"run {i}: torchrun {p.returncode}, ranks {codes}, {time.time() - t:.1f} s;",
          next((l.strip() for l in root if "traceback" in l), "no root cause"), flush=True)
EOF
