#!/usr/bin/env bash
# One entry point for the vLLM steps of a GPU session (short commands for the device tool).
#
#   bash bench/gpu/vllm_session.sh stage .gpu/bundle/carry/NN   # verify + stage one part
#   bash bench/gpu/vllm_session.sh install                      # join, verify, pip install
#   bash bench/gpu/vllm_session.sh smoke                        # each vLLM path once
#   bash bench/gpu/vllm_session.sh collect NAME OPS [ARGS...]   # a record, resumable
#   bash bench/gpu/vllm_session.sh probe                        # GPU, torch, nvcc, bundle state
#
# Staged parts live in $STAGE (/tmp/stage), the install in $SITE (/tmp/site), records in
# $RUNS (/tmp/runs): all survive between calls while the machine stays warm. Results go to
# $OUT (the device tool's folder) as few files: smoke.jsonl + smoke.log, NAME.tar + NAME.log.
# `collect` stops itself after $COLLECT_TIMEOUT s (default 520) and leaves a partial record
# that the same command resumes.
set -uo pipefail
cd "$(dirname "$0")/../.."
STAGE=${STAGE:-/tmp/stage}
SITE=${SITE:-/tmp/site}
RUNS=${RUNS:-/tmp/runs}
OUT=${OUT:-/tmp/out}
export PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$(cat "$SITE/.pythonpath" 2>/dev/null || echo "$SITE"):$PWD${PYTHONPATH:+:$PYTHONPATH}"
cmd=${1:-}
shift || true
case "$cmd" in
  stage)
    bash bench/gpu/stage_part.sh "${1:?stage needs a carried part folder}" "$STAGE" ;;
  install)
    bash bench/gpu/install_bundle.sh "$STAGE" "$SITE" && \
      "$PYTHON" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"), "flashinfer", m.version("flashinfer-python"))' ;;
  probe)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.limit --format=csv
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
    nvcc --version | tail -1
    ls "$STAGE" 2>/dev/null | sed 's/^/staged: /'
    [ -d "$SITE" ] && echo "installed: $(ls "$SITE" | grep -c dist-info) distributions in $SITE" ;;
  smoke)
    "$PYTHON" bench/gpu/vllm_smoke.py --out "$OUT/smoke.jsonl" "$@" 2>&1 | tee "$OUT/smoke.log" ;;
  collect)
    name=${1:?collect needs NAME}; ops=${2:?collect needs OPS}; shift 2
    mkdir -p "$RUNS"
    resume=()
    [ -f "$RUNS/$name/checkpoint.jsonl" ] && resume=(--resume)
    timeout --signal=TERM "${COLLECT_TIMEOUT:-520}" "$PYTHON" -m bot collect --backend vllm \
      --device cuda --case-set vllm --ops "$ops" --out "$RUNS/$name" --quiet "${resume[@]}" "$@" \
      2>&1 | tee "$OUT/$name.log"
    rc=${PIPESTATUS[0]}
    if [ -d "$RUNS/$name" ]; then
      tar -C "$RUNS" -cf "$OUT/$name.tar" "$name"
      echo "collect exit $rc; record in $OUT/$name.tar"
    else
      echo "collect exit $rc; no record written"
    fi
    exit "$rc" ;;
  *)
    sed -n '2,14p' "$0"; exit 2 ;;
esac
