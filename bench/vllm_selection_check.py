"""Check the SM90 selection rules against vLLM itself, on a CPU, against a pretend H200.

For every attention case of the shipped case sets (under its own `attn_backend`, and under
each backend for a case left at `auto`), builds the case's Attention layer the way the vllm
backend does (engine arguments -> config -> `Attention`, so vLLM's selector runs as written)
and compares the backend and FlashAttention version vLLM resolved with what
`collector/backends/vllm_selection.py` says. Needs the mirror venv of `bench.vllm_dry_run`
(Python 3.12, the image's torch, vLLM from the bundle):

    PYTHONPATH=/tmp/vsite:. /tmp/mirror/bin/python -m bench.vllm_selection_check
"""

from __future__ import annotations

import sys
import traceback

from bench.vllm_dry_run import _pretend_h200, cpu_runtime

SETS = ("vllm", "vllm-fp8-flashinfer", "vllm-backends")
OPS = ("context_attention", "generation_attention")
# vLLM's backend name and resolved FA version -> the kernel family of vllm_selection.
FAMILY = {
    "FLASHINFER": "flashinfer",
    "TRITON_ATTN": "triton_attn",
    "FLEX_ATTENTION": "flex_attention",
}


def main() -> int:
    _pretend_h200()
    from collector.attn_backends import AUTO, VLLM_ATTN_BACKENDS
    from collector.backends.vllm_runtime import AttentionKey, block_size
    from collector.backends.vllm_selection import sm90_kernel
    from collector.backends.vllm_support import attention_shape
    from collector.caseplan import Case, build_plan

    rt = cpu_runtime("selection-check")
    cases: dict[str, Case] = {}
    for name in SETS:
        for case in build_plan(OPS, case_set=name).cases:
            named = case.params.get("attn_backend", AUTO)
            for backend in (named,) if named != AUTO else (AUTO, *VLLM_ATTN_BACKENDS):
                c = case if backend == named else case.with_values({"attn_backend": backend})
                cases.setdefault(c.key, c)
    seen: dict[tuple[str, str, int, str], tuple[str, str]] = {}
    for case in cases.values():
        shape = attention_shape(case.op, case.params)
        group = (shape.attn_backend, shape.kv_cache_dtype, shape.head_dim, str(shape.window))
        if group in seen:
            continue
        key = AttentionKey(
            shape.num_heads,
            shape.num_kv_heads,
            shape.head_dim,
            shape.act_dtype,
            shape.vllm_cache_dtype,
            shape.window,
            block_size(),
            shape.vllm_attention_backend,
        )
        try:
            expected = sm90_kernel(case.params)
        except ValueError:
            expected = "refused"
        try:
            entry = rt.attention_entry(key)
            name = entry.backend.get_name()
            version = getattr(entry.layer.impl, "vllm_flash_attn_version", None)
            got = f"fa{version}" if name == "FLASH_ATTN" else FAMILY.get(name, name.lower())
        except Exception as exc:
            got = f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            traceback.print_exc(limit=-2, file=sys.stderr)
        seen[group] = (expected, got)
    wrong = 0
    for (backend, kv, head, window), (expected, got) in sorted(seen.items()):
        ok = expected == got or (expected == "refused" and got.startswith("refused:"))
        wrong += not ok
        flag = "ok  " if ok else "DIFF"
        print(f"{flag} {backend:14s} kv={kv:8s} head_dim={head:3d} window={window:3s} "
              f"expected {expected:14s} vLLM: {got}")  # fmt: skip
    print(f"{len(seen) - wrong} of {len(seen)} agree")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
