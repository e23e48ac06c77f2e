"""Context and generation attention through a real vLLM Attention layer.

The layer is built as a model builds it (`vllm.model_executor.layers.attention.Attention`,
under a config made from engine arguments), so vLLM's own selector picks the backend and
the impl; the KV cache spec is the layer's own (`get_kv_cache_spec`); the KV cache tensor
is shaped and strided as the model runner reshapes it; the metadata comes from the
backend's own builder over a paged batch; the cached history is written by the backend's
own writer. A timed call is what the layer's two custom ops do per forward:
`unified_kv_cache_update` (this step's K/V into the cache) and
`unified_attention_with_output` (the attention kernel). With an FP8 KV cache the query is
quantised once beforehand by the layer's own `query_quant`, as the layer does ahead of
those ops.
"""

from __future__ import annotations

from typing import Any

import torch

from collector.backends.base import Prepared
from collector.backends.vllm_runtime import AttentionKey, VllmRuntime, block_size
from collector.backends.vllm_support import (
    ACT_DTYPES,
    AttentionShape,
    align_model_dtype_for_flashinfer,
    attention_kernel_source,
    attention_shape,
    check_selected_backend,
    kv_cache_tensor,
    kv_spec_quantized,
    paged_layout,
)

# Cached history is written in chunks of this many tokens (bounds temporary memory).
HISTORY_CHUNK_TOKENS = 1 << 18


def _common_metadata(layout: Any, shape: AttentionShape, device: torch.device) -> Any:
    from vllm.v1.attention.backend import CommonAttentionMetadata

    seq_lens_cpu = layout.seq_lens
    query_lens = torch.full((shape.num_seqs,), shape.query_len, dtype=torch.int32, device="cpu")
    return CommonAttentionMetadata(
        query_start_loc=layout.query_start_loc.to(device),
        query_start_loc_cpu=layout.query_start_loc,
        seq_lens=seq_lens_cpu.to(device),
        num_reqs=shape.num_seqs,
        num_actual_tokens=shape.num_tokens,
        max_query_len=shape.query_len,
        max_seq_len=shape.seq_len,
        block_table_tensor=layout.block_table.to(device),
        slot_mapping=layout.slot_mapping.to(device),
        causal=True,
        seq_lens_cpu_upper_bound=seq_lens_cpu,
        _seq_lens_cpu=seq_lens_cpu,
        _num_computed_tokens_cpu=seq_lens_cpu - query_lens,
    )


def _write_history(
    impl: Any, layer: Any, kv_cache: Any, slots: Any, shape: AttentionShape, gen: Any
) -> None:
    """Fill the cached tokens through the backend's production writer."""
    dtype = ACT_DTYPES[shape.act_dtype]
    device = kv_cache.device
    for start in range(0, slots.numel(), HISTORY_CHUNK_TOKENS):
        chunk = slots[start : start + HISTORY_CHUNK_TOKENS].to(device)
        dims = (chunk.numel(), shape.num_kv_heads, shape.head_dim)
        k = torch.randn(dims, generator=gen, device=device, dtype=dtype)
        v = torch.randn(dims, generator=gen, device=device, dtype=dtype)
        impl.do_kv_cache_update(layer, k, v, kv_cache, chunk)


def _phase_metadata_name(metadata: Any) -> str | None:
    part = metadata.prefill if getattr(metadata, "num_prefills", 0) > 0 else metadata.decode
    return type(part).__name__ if part is not None else None


def prepare_attention(
    rt: VllmRuntime,
    op: str,
    p: dict[str, Any],
    l2_bytes: int = 0,
    *,
    timed_query_quant: bool = False,
) -> Prepared:
    """One vLLM attention case ready to time (`l2_bytes`, of the backends' shared signature,
    goes unused: one copy, no rotation). `timed_query_quant` (bench/gpu/decode_gap.py only)
    puts the FP8-KV query quantisation into the timed call, as a layer's forward runs it."""
    shape = attention_shape(op, p)
    key = AttentionKey(
        num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        act_dtype=shape.act_dtype,
        cache_dtype=shape.vllm_cache_dtype,
        window=shape.window,
        block_size=block_size(),
        attention_backend=shape.vllm_attention_backend,
    )
    entry = rt.attention_entry(key)
    cfg, layer, backend = entry.vllm_config, entry.layer, entry.backend
    check_selected_backend(shape.attn_backend, backend.get_name())
    impl = layer.impl
    device = rt.device
    dtype = ACT_DTYPES[shape.act_dtype]
    gen = torch.Generator(device=device).manual_seed(0)
    cpu_gen = torch.Generator().manual_seed(0)

    with rt.building(cfg, dtype):
        spec = layer.get_kv_cache_spec(cfg)
        layout = paged_layout(shape, spec.block_size, cpu_gen)
        kv_cache = kv_cache_tensor(
            backend, spec, layout.num_blocks, cfg.cache_config.cache_dtype, device
        )
        if layout.history_slots.numel():
            _write_history(impl, layer, kv_cache, layout.history_slots, shape, gen)
        align_model_dtype_for_flashinfer(
            cfg.model_config, spec.dtype, backend.get_name(), kv_quantized=kv_spec_quantized(spec)
        )
        builder = backend.get_builder_cls()(spec, [entry.layer_name], cfg, device)
        metadata = builder.build(
            common_prefix_len=0, common_attn_metadata=_common_metadata(layout, shape, device)
        )

        q_dims = (shape.num_tokens, shape.num_heads, shape.head_dim)
        kv_dims = (shape.num_tokens, shape.num_kv_heads, shape.head_dim)
        query = torch.randn(q_dims, generator=gen, device=device, dtype=dtype)
        key_t = torch.randn(kv_dims, generator=gen, device=device, dtype=dtype)
        value = torch.randn(kv_dims, generator=gen, device=device, dtype=dtype)
        output = torch.empty(q_dims, device=device, dtype=dtype)
        raw_query = query
        if layer.query_quant is not None:
            flat, _ = layer.query_quant(query.view(shape.num_tokens, -1), layer._q_scale)
            query = flat.view(q_dims)
    quant_each_call = timed_query_quant and layer.query_quant is not None
    slot_mapping = metadata.slot_mapping if hasattr(metadata, "slot_mapping") else None
    if slot_mapping is None:
        slot_mapping = layout.slot_mapping.to(device)
    update = not backend.forward_includes_kv_cache_update

    def call(i: int) -> torch.Tensor:
        q = query
        if quant_each_call:
            q = layer.query_quant(raw_query.view(shape.num_tokens, -1), layer._q_scale)[0]
            q = q.view(q_dims)
        if update:
            impl.do_kv_cache_update(layer, key_t, value, kv_cache, slot_mapping)
        impl.forward(layer, q, key_t, value, kv_cache, metadata, output=output)
        return output

    name = backend.get_name()
    source = attention_kernel_source(
        name,
        fa_version=getattr(impl, "vllm_flash_attn_version", None),
        phase_metadata=_phase_metadata_name(metadata) if name == "FLASHINFER" else None,
    )
    return Prepared(call=call, copies=1, kernel_source=source)
