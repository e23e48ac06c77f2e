#!/usr/bin/env bash
# The attention-backend acceptance on an H200 (issue 25), after `vllm_session.sh stage/install`.
#
#   bash bench/gpu/vllm_backends.sh grid FLASH_ATTN   # vllm-backends set through FA3 (FA4 at 512)
#   bash bench/gpu/vllm_backends.sh grid FLASHINFER   # the same shapes through FlashInfer
#   bash bench/gpu/vllm_backends.sh fa4               # the head_dim-512 cases through FA4 alone
#   bash bench/gpu/vllm_backends.sh fp8               # the field's fp8-KV FlashInfer scenario
#   bash bench/gpu/vllm_backends.sh alignment         # the FP8-KV alignment tests, real vLLM
#   bash bench/gpu/vllm_backends.sh gap               # the decode-gap variants (decode_gap.py)
#   bash bench/gpu/vllm_backends.sh report            # the grid table of every record so far
#
# One record per backend (`--case-filter attn_backend=...`), so each is compared with the
# field's table on its own; records and logs land in $OUT as vllm_session.sh leaves them.
set -uo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-/tmp/runs}
OUT=${OUT:-/tmp/out}
SITE=${SITE:-/tmp/site}
export PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$(cat "$SITE/.pythonpath" 2>/dev/null || echo "$SITE"):$PWD${PYTHONPATH:+:$PYTHONPATH}"
ATTN=context_attention,generation_attention
cmd=${1:-}
shift || true
case "$cmd" in
  grid)
    backend=${1:?grid needs FLASH_ATTN or FLASHINFER}; shift
    bash bench/gpu/vllm_session.sh collect "grid-$backend" "$ATTN" --case-set vllm-backends \
      --case-filter "attn_backend=$backend" --runs 3 "$@" ;;
  fa4)
    bash bench/gpu/vllm_session.sh collect fa4 "$ATTN" --case-set vllm-backends \
      --case-filter "attn_backend=FLASH_ATTN,head_dim=512" --runs 3 "$@" ;;
  fp8)
    bash bench/gpu/vllm_session.sh collect fp8-flashinfer "$ATTN" --case-set vllm-fp8-flashinfer \
      --runs 3 "$@" ;;
  alignment)
    "$PYTHON" -c 'import pytest' 2>/dev/null || {
      echo "error: pytest is not importable here; carry pytest, pluggy and iniconfig wheels" >&2
      exit 2; }
    # --noconftest: the suite's conftest needs the GitHub server's packages; these use none.
    "$PYTHON" -m pytest -q -rs --noconftest -p no:cacheprovider tests/test_vllm_fp8_kv_alignment.py \
      tests/test_attn_backend.py tests/test_vllm_selection.py 2>&1 | tee "$OUT/alignment.log" ;;
  gap)
    "$PYTHON" bench/gpu/decode_gap.py --out "$OUT/gap.jsonl" --attn-backend auto \
      --attn-backend FLASHINFER "$@" 2>&1 | tee "$OUT/gap.log" ;;
  report)
    "$PYTHON" -m bench.gpu.backend_grid "$RUNS"/*/ 2>&1 \
      | tee "$OUT/grid.md" ;;
  *)
    sed -n '2,13p' "$0"; exit 2 ;;
esac
