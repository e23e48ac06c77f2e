"""The vllm backend's pure rules, on CPU with real torch (no vLLM needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from collector.backends.vllm_support import (
    FP8_E4M3_MAX,
    PROBE_ARCHITECTURE,
    align_model_dtype_for_flashinfer,
    attention_kernel_source,
    attention_shape,
    block_fp8_leaf,
    dequantize_fp8_per_block,
    kv_cache_tensor,
    model_hf_config,
    paged_layout,
    quantize_fp8_per_block,
    quantize_fp8_per_tensor,
)
from tests.factories import attention_params

DYNAMIC = "FlashInferFp8DeepGEMMDynamicBlockScaledKernel"
FI, DG = "FlashInferFp8BlockScaledMMKernel", "DeepGemmFp8BlockScaledMMKernel"


def _attn(**over: object) -> dict[str, object]:
    return attention_params(**over)


def test_per_tensor_fp8_round_trip() -> None:
    w = torch.randn(64, 96, generator=torch.Generator().manual_seed(1)) * 3.0
    q, scale = quantize_fp8_per_tensor(w)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w.shape
    assert scale.shape == (1,) and scale.dtype == torch.float32
    # The largest magnitude maps to the top of the e4m3 range.
    assert q.float().abs().max().item() == pytest.approx(FP8_E4M3_MAX)
    err = (q.float() * scale - w).abs().max().item()
    assert err <= w.abs().max().item() * 2**-3  # e4m3 keeps 3 mantissa bits


def test_per_block_fp8_scales_each_tile_independently() -> None:
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(300, 200, generator=gen)
    w[:128, :128] *= 1000.0  # one loud tile must not flatten the others
    q, scale = quantize_fp8_per_block(w)
    assert q.shape == w.shape and q.dtype == torch.float8_e4m3fn
    assert scale.shape == (3, 2)  # ceil(300/128) x ceil(200/128)
    assert scale[0, 0] > 500 * scale[1, 1]
    back = dequantize_fp8_per_block(q, scale)
    rel = ((back - w).abs() / w.abs().clamp(min=1e-3)).median().item()
    assert rel < 0.07
    quiet_tile = (back[128:256, 128:] - w[128:256, 128:]).abs().max().item()
    assert quiet_tile < 0.5


def test_zero_weights_do_not_divide_by_zero() -> None:
    q, scale = quantize_fp8_per_tensor(torch.zeros(4, 4))
    assert torch.isfinite(scale).all() and q.float().abs().sum().item() == 0.0
    q, scale = quantize_fp8_per_block(torch.zeros(4, 4))
    assert torch.isfinite(scale).all() and q.float().abs().sum().item() == 0.0


@pytest.mark.parametrize(
    ("m", "batch_invariant", "leaf"),
    [(1, False, FI), (31, False, FI), (32, False, DG), (4096, False, DG), (1, True, DG)],
)
def test_dynamic_block_fp8_leaf_follows_vllm_threshold(
    m: int, batch_invariant: bool, leaf: str
) -> None:
    assert block_fp8_leaf(DYNAMIC, m, FI, DG, batch_invariant) == leaf


def test_static_block_kernels_are_their_own_leaf() -> None:
    for kernel in ("CutlassFp8BlockScaledMMKernel", DG, "TritonFp8BlockScaledMMKernel"):
        assert block_fp8_leaf(kernel, 1, FI, DG, False) == kernel


def test_attention_kernel_source_naming() -> None:
    assert attention_kernel_source("FLASH_ATTN", fa_version=3) == "vllm_flash_attn_fa3"
    assert attention_kernel_source("FLASHINFER", phase_metadata="FIDecode") == (
        "vllm_flashinfer_fidecode"
    )
    assert attention_kernel_source("TRITON_ATTN") == "vllm_triton_attn"
    with pytest.raises(RuntimeError, match="no FA version"):
        attention_kernel_source("FLASH_ATTN")
    with pytest.raises(RuntimeError, match="neither a prefill nor a decode"):
        attention_kernel_source("FLASHINFER")


def test_flashinfer_dtype_alignment_only_where_vllm_asserts() -> None:
    cfg = SimpleNamespace(dtype=torch.bfloat16)
    # An FP8 spec without a KV quant mode reaches FlashInfer's equality assert: align.
    assert align_model_dtype_for_flashinfer(cfg, torch.float8_e4m3fn, "FLASHINFER", False)
    assert cfg.dtype == torch.float8_e4m3fn
    # A quantized spec takes vLLM's quantized branch; other backends never assert.
    cfg = SimpleNamespace(dtype=torch.bfloat16)
    assert not align_model_dtype_for_flashinfer(cfg, torch.uint8, "FLASHINFER", True)
    assert not align_model_dtype_for_flashinfer(cfg, torch.uint8, "FLASH_ATTN", False)
    assert cfg.dtype == torch.bfloat16
    # Already equal: nothing to do.
    assert not align_model_dtype_for_flashinfer(cfg, torch.bfloat16, "FLASHINFER", False)


def test_attention_shape_maps_case_fields() -> None:
    s = attention_shape("generation_attention", _attn())
    assert (s.num_seqs, s.query_len, s.past_len, s.seq_len, s.num_tokens) == (3, 1, 37, 38, 3)
    assert s.vllm_cache_dtype == "fp8"
    assert (
        attention_shape("generation_attention", _attn(kv_cache_dtype="bfloat16")).vllm_cache_dtype
        == "auto"
    )
    ctx = attention_shape("context_attention", _attn(isl=512, step=0))
    assert (ctx.query_len, ctx.past_len, ctx.num_tokens) == (512, 0, 1536)


@pytest.mark.parametrize(
    ("over", "error", "match"),
    [
        ({"beam_width": 2}, NotImplementedError, "beam_width"),
        ({"attn_dtype": "float32"}, NotImplementedError, "attn_dtype"),
        ({"kv_cache_dtype": "int8"}, NotImplementedError, "kv_cache_dtype"),
        ({"num_key_value_heads": 3}, ValueError, "multiple"),
        ({"isl": 4}, ValueError, "one token"),
    ],
)
def test_attention_shape_rejects_what_vllm_cannot_run(
    over: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        attention_shape("generation_attention", _attn(**over))


def test_paged_layout_places_every_token_in_its_own_slot() -> None:
    shape = attention_shape("context_attention", _attn(isl=20, step=45, batch_size=4))
    block = 16
    layout = paged_layout(shape, block, torch.Generator().manual_seed(0))
    per_seq = -(-shape.seq_len // block)
    assert layout.block_table.shape == (4, per_seq) and layout.block_table.dtype == torch.int32
    blocks = layout.block_table.flatten()
    assert blocks.min().item() >= 1  # block 0 is vLLM's null block
    assert len(set(blocks.tolist())) == blocks.numel()
    assert layout.num_blocks == blocks.numel() + 1
    assert not torch.equal(blocks, torch.sort(blocks).values)  # scattered, as after churn
    assert layout.slot_mapping.shape == (4 * 20,) and layout.history_slots.shape == (4 * 45,)
    every = torch.cat([layout.history_slots, layout.slot_mapping])
    assert len(set(every.tolist())) == every.numel()
    assert layout.query_start_loc.tolist() == [0, 20, 40, 60, 80]
    assert layout.seq_lens.tolist() == [65] * 4
    # New token t of sequence s sits at block_table[s, t // block] * block + t % block.
    s, t = 2, 45 + 7
    expected = layout.block_table[s, t // block].item() * block + t % block
    assert layout.slot_mapping[s * 20 + 7].item() == expected


class _FlashAttentionLayout:
    """vLLM's FlashAttentionBackend layout rules (0.24.0): logical shape, HND stride order."""

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, heads: int, dim: int, cache_dtype_str: str = "auto"
    ) -> tuple[int, ...]:
        return (num_blocks, 2, block_size, heads, dim)

    @staticmethod
    def get_kv_cache_stride_order() -> tuple[int, ...]:
        return (0, 1, 3, 2, 4)


def test_kv_cache_tensor_has_logical_shape_and_physical_strides() -> None:
    spec = SimpleNamespace(block_size=16, num_kv_heads=4, head_size=8, dtype=torch.uint8)
    cache = kv_cache_tensor(_FlashAttentionLayout(), spec, 5, "fp8", torch.device("cpu"))
    assert cache.shape == (5, 2, 16, 4, 8) and cache.dtype == torch.uint8
    # Heads outside tokens in memory: the head stride spans a whole block of tokens.
    assert cache.stride(3) == 16 * 8 and cache.stride(2) == 8
    assert int(cache.sum()) == 0


def test_model_config_describes_the_case_attention() -> None:
    cfg = model_hf_config(64, 8, 128, 4096, window=128)
    assert cfg["architectures"] == [PROBE_ARCHITECTURE]
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (64, 8, 128)
    assert cfg["hidden_size"] == 64 * 128 and cfg["max_position_embeddings"] == 4096
    assert cfg["sliding_window"] == 128
    assert "sliding_window" not in model_hf_config(8, 8, 64, 128)
