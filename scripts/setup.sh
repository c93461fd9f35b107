#!/usr/bin/env bash
# Sets up ns-splat-plus on a fresh machine: a virtual environment in .venv with the package
# (editable) and its test dependencies, plus headless Chromium for the viewer's browser test and SLURM
# (slurm-wlm, munge) for the SLURM tests, both installed with apt-get when run as root.
#   bash scripts/setup.sh            # then: .venv/bin/python -m pytest (the unit tier; -m slow: the CLI tier)
# One line per stage; pip's own output goes to .venv/setup.log (its tail is shown if a stage fails).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LOG=.venv/setup.log

stage() { echo "setup.sh [$(printf '%3d' "$SECONDS") s] $*"; }
logged() {  # run a command with its output in $LOG; on failure show the end of it
  if ! "$@" >>"$LOG" 2>&1; then
    echo "setup.sh: failed: $*" >&2
    tail -n 40 "$LOG" >&2
    echo "setup.sh: the whole output is in $LOG" >&2
    exit 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  stage "creating .venv"
  # torch's CUDA libraries make the environment about 8 GiB: say so before pip runs out of disk halfway
  free_gib=$(df -Pk . | awk 'NR == 2 {print int($4 / 1048576)}')
  if [ "${free_gib:-0}" -lt 10 ]; then
    echo "setup.sh: warning: ${free_gib} GiB free on this disk; .venv needs about 8 GiB (torch with its CUDA libraries)" >&2
  fi
  "$PYTHON" -m venv .venv
fi
: >"$LOG"
stage "installing the package and its dependencies (torch, nerfstudio: a few minutes; pip's output: $LOG)"
logged .venv/bin/python -m pip install --quiet --upgrade pip setuptools wheel
# nerfstudio 1.1.5 pins gsplat 1.4.0; torch comes from PyPI (a CUDA build, which also runs on CPU).
# Bytecode is compiled once afterwards on every core: pip compiles its 20,000 modules one after another
# (about 34 s; compileall took 23 s on 2 cores), and Python run with PYTHONDONTWRITEBYTECODE=1 keeps none itself
logged .venv/bin/python -m pip install --quiet --no-compile -e '.[test]'
logged .venv/bin/python -m pip install --quiet --no-compile -e ./splatbench  # the benchmark tool; the tests use its scenes
# (a few files are for a newer Python, e.g. torch's py312_intrinsics.py: pip skips them, so does this)
# The editable packages too (their __pycache__ is git-ignored): the CLI tests start about 250 processes, each of
# which would otherwise compile ns_splat_plus again (0.09 s of imports against 0.03 s with bytecode)
.venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  ns_splat_plus splatbench/splatbench >>"$LOG" 2>&1 || true

# The viewer test drives a real browser: Debian's chromium + chromium-driver (never downloaded at run time).
if ! command -v chromedriver >/dev/null 2>&1 || ! { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    stage "installing the browser for the viewer test (chromium, chromium-driver)"
    export DEBIAN_FRONTEND=noninteractive
    logged apt-get update -qq
    logged apt-get install -y -qq chromium chromium-driver
  else
    echo "setup.sh: install chromium and chromium-driver (e.g. sudo apt-get install chromium chromium-driver) for the viewer test" >&2
  fi
fi
# The SLURM tests (tests/parallel/test_slurm.py) start a real SLURM on this machine: Debian's slurm-wlm and munge.
# The marker tells those tests that this machine was prepared, so they fail rather than skip without them.
rm -f .venv/slurm-installed
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }  # the daemons live in /usr/sbin
  if ! have sbatch || ! have slurmctld || ! have slurmd || ! have munged; then
    stage "installing SLURM for the SLURM tests (slurm-wlm, munge)"
    export DEBIAN_FRONTEND=noninteractive
    logged apt-get update -qq
    logged apt-get install -y -qq --no-install-recommends slurm-wlm munge
  fi
  touch .venv/slurm-installed
else
  echo "setup.sh: the SLURM tests skip unless slurm-wlm and munge are installed (as root: apt-get install slurm-wlm munge; then run this script as root)" >&2
fi
versions=$(.venv/bin/python -c "import ns_splat_plus, nerfstudio, gsplat, torch; print('torch', torch.__version__, '| gsplat', gsplat.__version__)")
stage "ready: ns-splat-plus with $versions (tests: .venv/bin/python -m pytest; the CLI tier: -m slow)"
