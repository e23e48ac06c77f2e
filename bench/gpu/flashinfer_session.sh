#!/usr/bin/env bash
# One entry point for the flashinfer steps of a GPU session (short commands for the device
# tool), run from the repo root on a machine with torch and nvcc but no FlashInfer.
#
#   bash bench/gpu/flashinfer_session.sh setup                      # install + restorejit
#   bash bench/gpu/flashinfer_session.sh install                    # carried wheels -> $FISITE
#   bash bench/gpu/flashinfer_session.sh restorejit                 # carried JIT cache -> ~/.cache
#   bash bench/gpu/flashinfer_session.sh collect NAME OPS [ARGS...] # flashinfer record, resumable
#   bash bench/gpu/flashinfer_session.sh torch NAME OPS [ARGS...]   # torch record, same cases
#   bash bench/gpu/flashinfer_session.sh reference NAME [TORCH_NAME] # compare (also on a CPU)
#   bash bench/gpu/flashinfer_session.sh savejit                    # JIT cache -> $OUT
#   bash bench/gpu/flashinfer_session.sh probe                      # GPU, torch, nvcc, FlashInfer
#
# `setup` installs the carried wheels (.gpu/fi-wheels: flashinfer-python, apache-tvm-ffi,
# nvidia-cudnn-frontend, ninja, einops, tabulate) into $FISITE (/tmp/fisite) offline and
# restores the carried JIT cache (.gpu/fi-jit/fi-jit-cache.tgz, a tar of ~/.cache/flashinfer)
# if present. `collect` runs `python -m bot collect --backend flashinfer` with $FISITE and the
# checkout on PYTHONPATH (the image's Python has the collector's other dependencies) and
# $FISITE/bin on PATH (ninja, for FlashInfer's JIT). It stops itself after $COLLECT_TIMEOUT s
# (default 500) and leaves a partial record that the same command resumes; records live in
# $RUNS (/tmp/runs) while the machine stays warm. Results go to $OUT as NAME.tar + NAME.log.
# CASE_SET (default `default`) picks the case set.
set -uo pipefail
cd "$(dirname "$0")/../.."
FISITE=${FISITE:-/tmp/fisite}
RUNS=${RUNS:-/tmp/runs}
OUT=${OUT:-/tmp/out}
WHEELS=${WHEELS:-.gpu/fi-wheels}
JIT_TGZ=${JIT_TGZ:-.gpu/fi-jit/fi-jit-cache.tgz}
# Where FlashInfer keeps its JIT cache (flashinfer/jit/env.py: $FLASHINFER_WORKSPACE_BASE or
# the home directory, then .cache/flashinfer).
CACHE=${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache
export PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$FISITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$FISITE/bin:$PATH"
# Workers see an allow-listed environment (collector/environment.py): PATH, HOME, PYTHONPATH,
# CUDA_* and FLASHINFER_* pass; FlashInfer's JIT then runs ninja with its default parallelism.
cmd=${1:-}
shift || true

run_collect() {  # backend name ops [args...]
  local backend=$1 name=$2 ops=$3
  shift 3
  mkdir -p "$RUNS"
  local resume=()
  [ -f "$RUNS/$name/checkpoint.jsonl" ] && resume=(--resume)
  local start=$SECONDS
  timeout --signal=TERM "${COLLECT_TIMEOUT:-500}" "$PYTHON" -m bot collect --backend "$backend" \
    --device cuda --case-set "${CASE_SET:-default}" --ops "$ops" --out "$RUNS/$name" --quiet \
    "${resume[@]}" "$@" 2>&1 | tee -a "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  if [ -d "$RUNS/$name" ]; then
    tar -C "$RUNS" -cf "$OUT/$name.tar" "$name"
    echo "collect exit $rc after $((SECONDS - start)) s; record in $OUT/$name.tar" | tee -a "$OUT/$name.log"
  else
    echo "collect exit $rc; no record written" | tee -a "$OUT/$name.log"
  fi
  return "$rc"
}

case "$cmd" in
  setup)
    start=$SECONDS
    bash "$0" install && bash "$0" restorejit || exit 2
    echo "setup done in $((SECONDS - start)) s" ;;
  install)
    ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "error: no wheels in $WHEELS (carry .gpu/fi-wheels)" >&2; exit 2; }
    "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check \
      --upgrade --target "$FISITE" "$WHEELS"/*.whl || exit 2
    "$PYTHON" -c 'import importlib.metadata as m; print("flashinfer-python", m.version("flashinfer-python"), "apache-tvm-ffi", m.version("apache-tvm-ffi"), "cudnn-frontend", m.version("nvidia-cudnn-frontend"))' || exit 2 ;;
  restorejit)
    if [ -f "$JIT_TGZ" ]; then
      mkdir -p "$CACHE"
      tar -xzf "$JIT_TGZ" -C "$CACHE" || exit 2
      echo "JIT cache restored into $CACHE/flashinfer: sha256 $(sha256sum "$JIT_TGZ" | cut -c1-16), $(find "$CACHE/flashinfer" -name '*.so' | wc -l) modules"
    else
      echo "no JIT cache at $JIT_TGZ: the first use of each kernel variant compiles (10-100 s each)"
    fi ;;
  probe)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.limit --format=csv
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
    nvcc --version | tail -1
    command -v ninja || echo "no ninja on PATH"
    "$PYTHON" -c 'import flashinfer; print("flashinfer", flashinfer.__version__, flashinfer.__file__)' ;;
  collect)
    run_collect flashinfer "${1:?collect needs NAME}" "${2:?collect needs OPS}" "${@:3}" ;;
  torch)
    run_collect torch "${1:?torch needs NAME}" "${2:?torch needs OPS}" "${@:3}" ;;
  reference)
    name=${1:?reference needs NAME}
    args=("$OUT/$name.tar")
    [ -n "${2:-}" ] && args+=(--against "$OUT/$2.tar")
    for extra in ${AGAINST:-}; do args+=(--against "$extra"); done
    "$PYTHON" -m bench.flashinfer_reference "${args[@]}" --markdown "$OUT/$name-reference.md" \
      --json "$OUT/$name-reference.json" ;;
  savejit)
    [ -d "$CACHE/flashinfer" ] || { echo "error: no $CACHE/flashinfer" >&2; exit 2; }
    tar -C "$CACHE" -czf "$OUT/fi-jit-cache.tgz" flashinfer
    echo "JIT cache: $(du -h "$OUT/fi-jit-cache.tgz" | cut -f1), $(find "$CACHE/flashinfer" -name '*.so' | wc -l) modules" ;;
  *)
    sed -n '2,23p' "$0"; exit 2 ;;
esac
