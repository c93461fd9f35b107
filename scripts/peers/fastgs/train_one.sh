#!/usr/bin/env bash
# One FastGS run on a COLMAP scene (GPU machine, after build.sh), from the repository root:
#   bash scripts/peers/fastgs/train_one.sh SCENE_DIR OUT_DIR [SEED]
# It writes OUT_DIR/peer_results.json, so it runs beside nerfstudio's methods as scripts/benchmark.py's
#   --methods splatfacto splat-plus-lite fastgs --peer 'fastgs=bash scripts/peers/fastgs/train_one.sh {data} {run_dir} {seed}'
# SCENE_DIR holds sparse/0/{cameras,images,points3D}.bin and images_2/ (half-resolution images, used as they are).
# Trains FastGS's standard ("base", train_base.sh) config: 30k iterations, --densification_interval 500,
# --grad_abs_thresh 0.0012, with --eval (every 8th image held out), renders the test views with FastGS's render.py
# and scores them like its metrics.py (PSNR, SSIM; no LPIPS: see fgs_metrics.py).
# env: FGS_SRC (FastGS sources, default .gpurun/fastgs/src)  FGS_IMAGES (default images_2)
#      FGS_SPLIT=fastgs|nerfstudio (default fastgs, see fgs_run.py)  FGS_EXTRA="more train.py args"
#      PYTHON (default python3)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SCENE_DIR OUT_DIR [SEED]"; exit 2; }
SCENE=$(readlink -f "$1")
OUT=$2
SEED=${3:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SRC=$(readlink -f "${FGS_SRC:-$ROOT/.gpurun/fastgs/src}")
PY=${PYTHON:-python3}
IMAGES=${FGS_IMAGES:-images_2}
export PYTHONPATH=/tmp/site_fastgs:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export FGS_SEED=$SEED FGS_SPLIT=${FGS_SPLIT:-fastgs}
[ -f "$SRC/train.py" ] || { echo "no FastGS sources in $SRC (run prepare.sh, carry .gpurun)"; exit 2; }
[ -d "$SCENE/$IMAGES" ] && [ -f "$SCENE/sparse/0/images.bin" ] ||
  { echo "not a COLMAP scene with $IMAGES/: $SCENE"; exit 2; }
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")

# FastGS writes sparse/0/points3D.ply next to the model on first use: give it a scratch copy made of links
SC=$OUT/scene
rm -rf "$SC"
mkdir -p "$SC/sparse/0"
ln -s "$SCENE/$IMAGES" "$SC/$IMAGES"
for f in "$SCENE"/sparse/0/*; do ln -s "$f" "$SC/sparse/0/$(basename "$f")"; done
rm -f "$SC/sparse/0/points3D.ply" # never reuse (or write through to) a ply in the source scene
MODEL=$OUT/model
rm -rf "$MODEL"

# -r 1: use the images at their stored size (1500x1000; FastGS only auto-downscales when -r is unset and width>1600)
t0=$(date +%s.%N)
rc=0
# shellcheck disable=SC2086  # FGS_EXTRA is split into words on purpose
$PY "$HERE/fgs_run.py" "$SRC" train.py -s "$SC" -m "$MODEL" -i "$IMAGES" -r 1 --eval \
  --densification_interval 500 --optimizer_type default --grad_abs_thresh 0.0012 --test_iterations 30000 \
  ${FGS_EXTRA:-} >"$OUT/train.log" 2>"$OUT/train.err" || rc=$?
t1=$(date +%s.%N)
WALL=$(awk "BEGIN{printf \"%.1f\", $t1-$t0}")
grep -v '^\s*$' "$OUT/train.log" | grep -v 'Reading camera' | tail -n 8 || true
[ $rc -eq 0 ] || { echo "train.py failed rc=$rc"; tail -n 30 "$OUT/train.err"; exit $rc; }

$PY "$HERE/fgs_run.py" "$SRC" render.py -m "$MODEL" --skip_train >"$OUT/render.log" 2>&1 ||
  { echo "render.py failed"; tail -n 30 "$OUT/render.log"; exit 1; }
$PY "$HERE/fgs_metrics.py" "$SRC" "$MODEL" >"$OUT/metrics.log" 2>&1 ||
  { echo "metrics failed"; tail -n 30 "$OUT/metrics.log"; exit 1; }

NG=$( (grep -o 'Gaussian number: [0-9]*' "$OUT/train.log" || true) | tail -1 | awk '{print $3}')
PLY=$( (ls -d "$MODEL"/point_cloud/iteration_* 2>/dev/null || true) | sort -V | tail -1)/point_cloud.ply
NGPLY=$( (head -c 4000 "$PLY" 2>/dev/null || true) | (grep -a -m1 '^element vertex' || true) | awk '{print $3}')
TT=$( (grep -o 'Training time: [0-9.]*' "$OUT/train.log" || true) | tail -1 | awk '{print $3}')
TESTV=$( (grep -o 'test:.*' "$OUT/render.log" || true) | head -1 | sed 's/ \[[0-9\/: ]*\]$//')
echo "scene            $SCENE ($IMAGES, split=$FGS_SPLIT, seed=${SEED:-0 (FastGS default)})"
echo "test views       ${TESTV#test: }"
echo "train.py wall_s  $WALL"
echo "fastgs_train_s   $TT   (FastGS's own GPU-event sum of iteration+optimizer time)"
echo "gaussians        $NG   (ply: $NGPLY)"
grep '^TEST' "$OUT/metrics.log" || echo "no TEST line in $OUT/metrics.log"
echo "logs in $OUT: train.log train.err render.log metrics.log; model in $MODEL"
# what scripts/benchmark.py --peer reads (splatbench/splatbench/peer.py): the last iteration's test metrics; the
# process wall is train.py's alone (render.py and the metrics are the evaluation, outside it, as ns-eval is for
# ns-train), the train wall FastGS's own timer
$PY - "$MODEL/results_nolpips.json" "$OUT/peer_results.json" "$WALL" "${TT:-}" "${NGPLY:-$NG}" <<'PY'
import json, sys
metrics, out, wall, own_timer, gaussians = sys.argv[1:6]
last = list(json.load(open(metrics)).values())[-1]
report = {"psnr": last["PSNR"], "ssim": last["SSIM"], "process_wall_s": float(wall)}
if own_timer:
    report["train_wall_s"] = float(own_timer)
if gaussians:
    report["num_gaussians"] = int(gaussians)
json.dump(report, open(out, "w"))
PY
