"""Context and generation attention through FlashInfer's paged-KV wrappers.

- context_attention: `BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="auto")`,
  planned causal over `step + isl` cached tokens per sequence (the new tokens' K/V already
  in the cache, as after `append_paged_kv_cache`); FlashInfer's causal mask aligns the
  queries with the last keys, as the torch backend's mask does;
- generation_attention: `BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")` (FlashInfer's
  defaults: its decode kernel on CUDA cores), one query per sequence over `step + 1` keys.

The cache is one NHD tensor `[pages, 2, page_size, kv_heads, head_dim]` (bf16, fp16 or fp8
e4m3) with sequences on scattered pages (`flashinfer_support.paged_kv_layout`); a sliding
window is FlashInfer's `window_left = window_size - 1`. `plan` runs in `prepare`, outside
the timed call (FlashInfer forbids it inside a CUDA graph); the timed call is `run` alone,
into a preallocated output. Generation rotates whole caches over `copies` by the L2 rule
(as the torch backend: a decode reads HBM, not a warm L2); context keeps one copy. The
`kernel_source` names what `plan` resolved (`fa2`/`fa3` for prefill).
"""

from __future__ import annotations

from typing import Any

import torch

from collector.backends.base import Prepared
from collector.backends.flashinfer_runtime import FlashinferRuntime
from collector.backends.flashinfer_support import (
    ACT_DTYPES,
    KV_DTYPES,
    AttentionShape,
    attention_kernel_source,
    attention_shape,
    kv_cache_bytes,
    kv_cache_shape,
    page_size,
    paged_kv_layout,
)
from collector.backends.torch_backend import rotation_copies

PREFILL = "BatchPrefillWithPagedKVCacheWrapper"
DECODE = "BatchDecodeWithPagedKVCacheWrapper"


def _cache(
    shape: AttentionShape, dims: tuple[int, ...], gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    # Generated in the activation dtype on the device (no float32 temporary of a GB-sized
    # cache), then cast: fp8 caches hold e4m3 values of a unit-normal history.
    act = ACT_DTYPES[shape.act_dtype]
    data = torch.randn(dims, generator=gen, device=device, dtype=act)
    kv = KV_DTYPES[shape.kv_cache_dtype]
    return data if kv == act else data.to(kv)


def prepare_attention(rt: FlashinferRuntime, op: str, p: dict[str, Any], l2_bytes: int) -> Prepared:
    import flashinfer

    shape = attention_shape(op, p)
    dev = rt.device
    gen = torch.Generator(device=dev).manual_seed(0)
    layout = paged_kv_layout(
        shape.num_seqs, shape.kv_len, page_size(), torch.Generator().manual_seed(0)
    )
    dims = kv_cache_shape(layout, shape.num_kv_heads, shape.head_dim)
    copies = 1
    if op == "generation_attention":
        bytes_ = kv_cache_bytes(layout, shape.num_kv_heads, shape.head_dim, shape.kv_cache_dtype)
        copies = rotation_copies(bytes_, l2_bytes)
    caches = [_cache(shape, dims, gen, dev) for _ in range(copies)]
    act = ACT_DTYPES[shape.act_dtype]
    q_dims = (shape.num_tokens, shape.num_heads, shape.head_dim)
    q = torch.randn(q_dims, generator=gen, device=dev, dtype=act)
    out = torch.empty(q_dims, device=dev, dtype=act)
    common: dict[str, Any] = {
        "pos_encoding_mode": "NONE",
        "window_left": shape.window_left,
        "q_data_type": act,
        "kv_data_type": KV_DTYPES[shape.kv_cache_dtype],
        "o_data_type": act,
    }
    # The paged cache as both wrappers' `plan` takes it, in its order.
    paged = (
        layout.indptr.to(dev),
        layout.indices.to(dev),
        layout.last_page_len.to(dev),
        shape.num_heads,
        shape.num_kv_heads,
        shape.head_dim,
        layout.page_size,
    )
    wrapper: Any
    if op == "context_attention":
        name = PREFILL
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
            rt.workspace, "NHD", backend="auto"
        )
        qo_indptr = layout.qo_indptr(shape.query_len).to(dev)

        def plan() -> None:
            wrapper.plan(qo_indptr, *paged, causal=True, **common)

    else:
        name = DECODE
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(rt.workspace, "NHD")

        def plan() -> None:
            wrapper.plan(*paged, **common)

    rt.first_call(name, plan)  # JIT-compiles the variant on first use

    def call(i: int) -> torch.Tensor:
        result: torch.Tensor = wrapper.run(q, caches[i % copies], out=out)
        return result

    rt.first_call(name, lambda: call(0))
    torch.cuda.synchronize(dev)
    # The prefill wrapper has no `use_tensor_cores`: it always runs its prefill kernels.
    resolved = str(getattr(wrapper, "_backend", ""))
    source = attention_kernel_source(
        name, resolved, bool(getattr(wrapper, "use_tensor_cores", True))
    )
    return Prepared(call=call, copies=copies, kernel_source=source)
