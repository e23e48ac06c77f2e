#!/usr/bin/env bash
# Join the staged bundle parts, verify every checksum, and install the wheels offline.
#
#   bash bench/gpu/install_bundle.sh                 # /tmp/stage -> /tmp/site
#   bash bench/gpu/install_bundle.sh STAGE TARGET
#   export PYTHONPATH=$(cat TARGET/.pythonpath)      # then vLLM imports from TARGET
#
# Checks, in order: every part listed in PARTS.sha256 is staged (else lists the missing
# ones, exit 3), each part's sha256, the joined tar's sha256, each wheel's sha256 against
# the bundle's SHA256SUMS; then `pip install --no-index --no-deps --target TARGET` and a
# check that the installed framework has the bundle's version. `site_path.py` writes
# TARGET/.pythonpath (a --target folder's .pth files are not read from PYTHONPATH) and fails
# (exit 6) when a module a wheel ships is not found on it. PYTHON picks the interpreter
# (default python3).
set -euo pipefail
stage=${1:-${STAGE:-/tmp/stage}}
target=${2:-${TARGET:-/tmp/site}}
python=${PYTHON:-python3}
die() { echo "error: $*" >&2; exit "${2:-2}"; }
[ -f "$stage/PARTS.sha256" ] || die "$stage/PARTS.sha256 not found (stage a part first)"
mkdir -p "$target"
target=$(cd "$target" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$stage"
mapfile -t parts < <(awk '$2 ~ /\.part[0-9]+of[0-9]+$/ {print $2}' PARTS.sha256 | sort)
tarname=$(awk '$2 ~ /\.tar$/ {print $2}' PARTS.sha256)
[ "${#parts[@]}" -gt 0 ] && [ -n "$tarname" ] || die "PARTS.sha256 lists no parts or no tar"
missing=()
for p in "${parts[@]}"; do [ -f "$p" ] || missing+=("$p"); done
[ "${#missing[@]}" -eq 0 ] || die "missing parts: ${missing[*]}" 3
grep -E '\.part[0-9]+of[0-9]+$' PARTS.sha256 | sha256sum -c --quiet - || die "a part is corrupt" 4
cat "${parts[@]}" > "$tarname"
grep -E "  ${tarname}\$" PARTS.sha256 | sha256sum -c --quiet - || die "joined $tarname is corrupt" 4
rm -rf bundle
tar -xf "$tarname"
rm -f "$tarname"
(cd bundle && sha256sum -c --quiet SHA256SUMS) || die "a wheel does not match SHA256SUMS" 4
read -r framework version < <("$python" -c 'import json,sys; m=json.load(open("bundle/manifest.json")); print(m["framework"], m["version"])')
start=$(date +%s)
"$python" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check \
  --upgrade --target "$target" bundle/wheels/*.whl
# Bytecode once, here: a worker that finds no .pyc compiles every module it imports (vLLM's
# import took 25-30 s instead of 8.6 s so on a 2-core VM), and a collection starts many.
# Files that are not Python of this version (templates, test data) stay source.
"$python" -m compileall -q -j 0 "$target" >/dev/null || true
# TARGET/.pythonpath: the target and the folders its .pth files name; each wheel's modules found.
pythonpath=$("$python" "$here/site_path.py" "$target" bundle/wheels/*.whl) || exit 6
installed=$(PYTHONPATH="$pythonpath" "$python" -c "import importlib.metadata as m; print(m.version('$framework'))")
[ "$installed" = "$version" ] || die "$framework $installed installed, bundle says $version" 5
echo "installed $framework $installed and $(ls bundle/wheels | wc -l) wheels into $target in $(( $(date +%s) - start )) s"
echo "export PYTHONPATH=$pythonpath"
