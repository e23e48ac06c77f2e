#!/usr/bin/env bash
# The GPU stack's JIT caches from one device lease to the next: a bare machine compiles
# FlashInfer's block-FP8 module and each shape's kernel with nvcc (minutes, docs/benchmarks.md).
#
#   bash bench/gpu/jit_cache.sh pack OUT.tgz    # $HOME's JIT caches -> one tarball (<= 60 MiB)
#   bash bench/gpu/jit_cache.sh restore IN.tgz  # a carried tarball -> $HOME
set -uo pipefail
DIRS=(.cache/flashinfer .cache/vllm .cache/tensorrt_llm .tensorrt_llm .triton .nv/ComputeCache)
case "${1:-}" in
  pack)
    out=${2:?pack needs the tarball path}
    du -sh "$HOME"/.cache/* "$HOME"/.[!.]* /tmp/torchinductor_* 2>/dev/null | sort -h | tail -12
    present=()
    for d in "${DIRS[@]}"; do [ -e "$HOME/$d" ] && present+=("$d"); done
    [ ${#present[@]} -gt 0 ] || { echo "no JIT cache under $HOME"; exit 0; }
    tar -czf "$out" -C "$HOME" "${present[@]}" || exit 2
    size=$(stat -c %s "$out")
    if [ "$size" -gt $((60 << 20)) ]; then
      echo "JIT cache of ${present[*]} is $((size >> 20)) MiB, over what one call carries: dropped"
      rm -f "$out"
    else
      echo "JIT cache ${present[*]}: $((size >> 20)) MiB, sha256 $(sha256sum "$out" | cut -c1-16)"
    fi ;;
  restore)
    tgz=${2:?restore needs the tarball path}
    tar -xzf "$tgz" -C "$HOME" && echo "JIT cache restored into $HOME: sha256 $(sha256sum "$tgz" | cut -c1-16)" ;;
  *)
    sed -n '2,6p' "$0"; exit 2 ;;
esac
