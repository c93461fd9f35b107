#!/usr/bin/env bash
# Builds FastGS's three CUDA extensions on the GPU machine (offline), after prepare.sh and `source .device/setup.sh`.
#   bash scripts/peers/fastgs/build.sh [LOGDIR]      (LOGDIR default /tmp/fastgs_logs)
# Installs into /tmp/site_fastgs; use afterwards with PYTHONPATH=/tmp/site_fastgs:/tmp/site (train_one.sh does).
# env: FGS_SRC (FastGS sources, default .gpurun/fastgs/src)  FGS_WHEELS (plyfile/websockets wheels, default .device)
#      PYTHON (default python3)  MAX_JOBS (default 16)  TORCH_CUDA_ARCH_LIST (default 9.0)  CUDA_HOME (else searched)
set -euo pipefail
LOG=${1:-/tmp/fastgs_logs}
mkdir -p "$LOG"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
SRC=$(readlink -f "${FGS_SRC:-$ROOT/.gpurun/fastgs/src}")
WHEELS=${FGS_WHEELS:-$ROOT/.device}
DEST=/tmp/site_fastgs
PY=${PYTHON:-python3}
[ -d "$SRC/submodules" ] || { echo "build.sh: no FastGS sources in $SRC (run prepare.sh, carry .gpurun)"; exit 2; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1
# torch's cpp_extension finds CUDA via CUDA_HOME, else `which nvcc`/.. (wrong when nvcc is a wrapper script in
# /usr/local/bin): pick the first candidate that has both bin/nvcc and include/cuda_runtime.h
if [ -z "${CUDA_HOME:-}" ]; then
  NV=$(command -v nvcc || true)
  PIPCUDA=$($PY -c 'import nvidia,os;print(os.path.join(list(nvidia.__path__)[0],"cu13"))' 2>/dev/null || true)
  for d in ${NV:+$(dirname "$(dirname "$(readlink -f "$NV")")")} \
    $(sed -n 's|^exec \(/[^ ]*\)/bin/nvcc.*|\1|p' "${NV:-/dev/null}" 2>/dev/null || true) \
    /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13 /opt/cuda $PIPCUDA; do
    if [ -x "$d/bin/nvcc" ] && [ -f "$d/include/cuda_runtime.h" ]; then
      export CUDA_HOME=$d
      break
    fi
  done
fi
export PATH=${CUDA_HOME:+$CUDA_HOME/bin:}$PATH
command -v nvcc >/dev/null || { echo "build.sh: no nvcc found (set CUDA_HOME)"; exit 1; }
TV=$($PY -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda)' 2>&1 || true)
echo "CUDA_HOME=${CUDA_HOME:-unset}; $TV"
nvcc --version 2>&1 | tail -2
${CXX:-c++} --version 2>&1 | head -1 || true
mkdir -p $DEST
# build in a scratch copy so the carried tree stays clean (pip builds in-tree: build/, *.egg-info)
BUILD=/tmp/fastgs_build
rm -rf $BUILD
cp -a "$SRC/submodules" $BUILD
rc_all=0
EXTS="simple-knn fused-ssim diff-gaussian-rasterization_fastgs"
# the three builds at once (about 60 s each with 16 jobs; one after another they took 175 s on the H200 machine)
for ext in $EXTS; do
  (
    t0=$(date +%s.%N)
    rc=0
    $PY -m pip install --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target "$DEST/$ext" \
      "$BUILD/$ext" >"$LOG/build_$ext.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    echo "$rc $(awk "BEGIN{printf \"%.1f\", $t1-$t0}")" >"$BUILD/$ext.result"
  ) &
done
wait
for ext in $EXTS; do
  read -r rc wall <"$BUILD/$ext.result" || { rc=1; wall=?; }
  printf 'build %-36s rc=%d  wall %s s  (log %s)\n' $ext $rc "$wall" "$LOG/build_$ext.log"
  if [ "$rc" -ne 0 ]; then
    rc_all=1
    grep -m20 -i -B2 -A3 'error' "$LOG/build_$ext.log" || tail -n 20 "$LOG/build_$ext.log"
  else
    cp -a "$DEST/$ext"/. "$DEST"/ # one target per build (pip --target replaces a shared one), merged afterwards
  fi
done
# small pure-Python/runtime deps FastGS imports, installed only where the machine lacks them
for mod in plyfile websockets; do
  if ! PYTHONPATH=$DEST:$PYTHONPATH $PY -c "import $mod" 2>/dev/null; then
    if $PY -m pip install -q --no-index --no-deps --no-compile --target $DEST "$WHEELS"/$mod-*.whl; then
      echo "installed $mod from $WHEELS"
    else
      rc_all=1
    fi
  fi
done
# import check
PYTHONPATH=$DEST:$PYTHONPATH $PY - <<'EOF' || rc_all=1
import torch
import simple_knn._C as k
import fused_ssim, fused_ssim_cuda
import diff_gaussian_rasterization_fastgs as r
import plyfile, websockets, torchvision, tqdm, PIL
print("import ok:", k.__file__, fused_ssim_cuda.__file__, r._C.__file__, sep="\n  ")
if torch.cuda.is_available():
    x = torch.rand(1000, 3, device="cuda")
    d = k.distCUDA2(x); torch.cuda.synchronize()
    a = torch.rand(1, 3, 64, 64, device="cuda"); b = torch.rand(1, 3, 64, 64, device="cuda")
    s_aa, s_ab = fused_ssim.fused_ssim(a, a).item(), fused_ssim.fused_ssim(a, b).item()
    print("distCUDA2 mean %.4g, fused_ssim(a,a)=%.4f fused_ssim(a,b)=%.4f" % (d.mean().item(), s_aa, s_ab))
EOF
echo "build.sh done rc=$rc_all; use PYTHONPATH=$DEST:/tmp/site"
exit $rc_all
