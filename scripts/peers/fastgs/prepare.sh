#!/usr/bin/env bash
# Exports FastGS's sources at the pinned commit, patched for CUDA 13 / g++ 13, for the offline GPU machine.
# Run on a machine that has a FastGS git directory (a clone, a bare mirror, or the directory the `fetch
# github:fastgs/FastGS` tool returns, e.g. /work/.mirror/fastgs+FastGS/repo), from anywhere:
#   bash scripts/peers/fastgs/prepare.sh FASTGS_GIT_DIR [DEST]     (DEST default: .gpurun/fastgs/src)
# It `git archive`s the commit without the paths below, applies fastgs-cuda13.patch (exactly: no fuzz) and
# only then replaces DEST (an empty or missing directory, or an earlier export). Any failure leaves DEST as it was.
set -euo pipefail
COMMIT=44e02a5c1d5e9ed64d2ecd4af1cbba14ac92150f
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PATCH=$HERE/fastgs-cuda13.patch
die() {
  echo "prepare.sh: $*" >&2
  exit 1
}
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 FASTGS_GIT_DIR [DEST]"
DEST=${2:-$ROOT/.gpurun/fastgs/src}

# the fetch tool's folder holds the git directory in repo/; a clone's work tree holds it in .git/
G=$1
if [ -f "$G/repo/HEAD" ]; then G=$G/repo; elif [ -e "$G/.git" ]; then G=$G/.git; fi
[ -d "$G" ] || die "no such directory: $G"
G=$(cd "$G" && pwd)
git --git-dir="$G" cat-file -e "$COMMIT^{commit}" 2>/dev/null || die "commit $COMMIT is not in $G (fetch FastGS again?)"
command -v patch >/dev/null || die "GNU patch is needed"

# What the export leaves out (nothing the build or a run uses):
DROP=(
  ':(exclude)submodules/simple-knn/build'             # stale py3.7 build products (mirrors lack the .so blob)
  ':(exclude)submodules/simple-knn/simple_knn.egg-info'
  ':(exclude,glob)**/__pycache__/**'                  # committed py3.7/3.8 bytecode
  ':(exclude,glob)**/*.pyc'
  ':(exclude)submodules/diff-gaussian-rasterization_fastgs/third_party/glm/doc'
  ':(exclude)submodules/diff-gaussian-rasterization_fastgs/third_party/glm/test'
  ':(exclude)assets'                                  # README images
  ':(exclude)submodules/fused-ssim/images'
)

mkdir -p "$(dirname "$DEST")"
DEST=$(cd "$(dirname "$DEST")" && pwd)/$(basename "$DEST")
if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST")" ]; then
  [ -f "$DEST/train.py" ] && [ -d "$DEST/submodules/diff-gaussian-rasterization_fastgs" ] ||
    die "$DEST is neither empty nor an earlier FastGS export: not replacing it"
fi
TMP=$(mktemp -d "$(dirname "$DEST")/.fastgs-prepare.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/cwd" "$TMP/tree"

# --worktree-attributes: read attributes from the (empty) current directory instead of loading the commit's whole
# tree into an index, which checks every blob, the dropped ones too, and complains about the .so blob a partial
# mirror lacks. FastGS has no .gitattributes, so the archive is the same either way.
(cd "$TMP/cwd" && git --git-dir="$G" archive --worktree-attributes --format=tar "$COMMIT" -- . "${DROP[@]}") |
  tar -x -C "$TMP/tree" || die "git archive $COMMIT failed"
patch -d "$TMP/tree" -p1 --forward --batch --fuzz=0 --no-backup-if-mismatch -r - <"$PATCH" ||
  die "fastgs-cuda13.patch does not apply to $COMMIT"

rm -rf "$DEST"
mv "$TMP/tree" "$DEST"
N=$(find "$DEST" -type f | wc -l)
echo "prepare.sh: FastGS ${COMMIT:0:7} exported to $DEST ($N files, fastgs-cuda13.patch applied)"
