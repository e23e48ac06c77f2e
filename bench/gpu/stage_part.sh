#!/usr/bin/env bash
# Stage one carried bundle part on the GPU machine, verifying it on arrival.
#
#   bash bench/gpu/stage_part.sh .gpu/bundle/carry/03            # -> /tmp/stage
#   STAGE=/data/stage bash bench/gpu/stage_part.sh DIR
#
# DIR is one carry/NN folder written by `collectbot bundle`: a part and PARTS.sha256.
# Parts may arrive in any order and over any number of calls; install_bundle.sh joins them.
set -euo pipefail
src=${1:?usage: stage_part.sh CARRIED_PART_DIR [STAGE_DIR]}
stage=${2:-${STAGE:-/tmp/stage}}
[ -f "$src/PARTS.sha256" ] || { echo "error: $src has no PARTS.sha256" >&2; exit 2; }
src=$(cd "$src" && pwd)
mkdir -p "$stage"
shopt -s nullglob
staged=0
for part in "$src"/*.part[0-9]*of[0-9]*; do
  name=$(basename "$part")
  cp -f "$part" "$stage/$name"
  if ! (cd "$stage" && grep -E "  ${name}\$" "$src/PARTS.sha256" | sha256sum -c --quiet - >/dev/null); then
    rm -f "$stage/$name"
    echo "error: $name does not match its sha256 in PARTS.sha256 (re-carry it)" >&2
    exit 3
  fi
  staged=$((staged + 1))
  echo "staged $name (sha256 ok)"
done
[ "$staged" -gt 0 ] || { echo "error: no *.partNNofMM file in $src" >&2; exit 2; }
cp -f "$src/PARTS.sha256" "$stage/PARTS.sha256"
expected=$(grep -cE '\.part[0-9]+of[0-9]+$' "$stage/PARTS.sha256")
have=$(cd "$stage" && ls | grep -cE '\.part[0-9]+of[0-9]+$' || true)
echo "stage $stage: $have of $expected parts"
