"""The flashinfer backend's pure rules, on CPU with real torch (no FlashInfer needed).

The paged layout is checked against contiguous K/V, FlashInfer's mask rule against the
torch backend's, a full paged attention against torch SDPA, and the block-FP8 scale layouts
against a float reference GEMM.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from collector.backends.flashinfer_support import (
    DEFAULT_PAGE_SIZE,
    FP8_E4M3_MAX,
    PAGE_SIZE_ENV,
    attention_kernel_source,
    attention_shape,
    block_fp8_plan,
    flashinfer_mask,
    gather_kv,
    gemm_kernel_source,
    kv_cache_bytes,
    kv_cache_shape,
    page_size,
    paged_kv_layout,
    quantize_fp8_per_token_group,
    runner_backend,
    scatter_kv,
    unsupported_message,
)
from collector.backends.torch_backend import _attn_mask
from collector.backends.vllm_support import quantize_fp8_per_block
from collector.failures import UNSUPPORTED, classify_exception
from collector.ops import get_op
from tests.factories import attention_params

H100, H200, B200 = (9, 0), (9, 0), (10, 0)


def _attn(op: str = "generation_attention", **over: Any) -> dict[str, object]:
    if op == "context_attention":
        over = {"isl": 24, "step": 0, **over}
    return attention_params(**over)


# --- case mapping -------------------------------------------------------------------------


def test_generation_maps_beams_to_sequences_and_counts_the_new_token() -> None:
    shape = attention_shape("generation_attention", _attn(beam_width=2, step=100))
    assert (shape.num_seqs, shape.query_len, shape.kv_len) == (6, 1, 101)
    assert shape.num_tokens == 6 and shape.window_left == -1
    windowed = attention_shape("generation_attention", _attn(window_size=128))
    assert windowed.window_left == 127


def test_context_maps_prompt_after_history() -> None:
    shape = attention_shape("context_attention", _attn("context_attention", step=40, isl=24))
    assert (shape.num_seqs, shape.query_len, shape.kv_len) == (3, 24, 64)
    assert shape.num_tokens == 72


@pytest.mark.parametrize(
    ("op", "over", "match"),
    [
        ("context_attention", {"beam_width": 2}, "beam_width 1"),
        ("generation_attention", {"attn_dtype": "float32"}, "attn_dtype"),
        ("generation_attention", {"kv_cache_dtype": "int4"}, "kv_cache_dtype"),
        ("moe", {}, "op 'moe'"),
    ],
)
def test_unsupported_cases_are_classified_unsupported(
    op: str, over: dict[str, Any], match: str
) -> None:
    with pytest.raises(NotImplementedError, match=match) as info:
        attention_shape(op, _attn(**over))
    assert classify_exception(info.value) == UNSUPPORTED


def test_malformed_cases_are_errors() -> None:
    with pytest.raises(ValueError, match="not a multiple"):
        attention_shape("generation_attention", _attn(num_heads=7))
    with pytest.raises(ValueError, match="isl=4"):
        attention_shape("generation_attention", _attn(isl=4))


def test_page_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert page_size({}) == DEFAULT_PAGE_SIZE == 16
    assert page_size({PAGE_SIZE_ENV: " 64 "}) == 64
    assert page_size({PAGE_SIZE_ENV: "1"}) == 1
    for bad in ("0", "-16", "sixteen", "16.0"):
        with pytest.raises(ValueError, match=PAGE_SIZE_ENV):
            page_size({PAGE_SIZE_ENV: bad})
    monkeypatch.setenv(PAGE_SIZE_ENV, "32")
    assert page_size() == 32


# --- paged layout -------------------------------------------------------------------------


@pytest.mark.parametrize(("kv_len", "page"), [(37, 16), (32, 16), (1, 16), (100, 1), (5, 64)])
def test_layout_is_a_csr_page_table(kv_len: int, page: int) -> None:
    layout = paged_kv_layout(4, kv_len, page, torch.Generator().manual_seed(3))
    per_seq = math.ceil(kv_len / page)
    assert layout.indptr.tolist() == [s * per_seq for s in range(5)]
    assert layout.indptr.dtype == layout.indices.dtype == layout.last_page_len.dtype == torch.int32
    assert sorted(layout.indices.tolist()) == list(range(4 * per_seq))  # every page once
    assert layout.num_pages == 4 * per_seq
    assert set(layout.last_page_len.tolist()) == {kv_len - (per_seq - 1) * page}
    assert 1 <= int(layout.last_page_len[0]) <= page
    assert layout.seq_lens().tolist() == [kv_len] * 4
    assert layout.qo_indptr(3).tolist() == [0, 3, 6, 9, 12]


def test_pages_are_scattered_like_a_long_running_server() -> None:
    layout = paged_kv_layout(8, 16 * 32, 16, torch.Generator().manual_seed(0))
    pages = layout.indices.tolist()
    adjacent = sum(b == a + 1 for a, b in itertools.pairwise(pages))
    assert adjacent < len(pages) // 4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_layout_gathers_back_to_the_contiguous_cache(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(5)
    seqs, kv_len, heads, dim = 3, 45, 2, 8
    layout = paged_kv_layout(seqs, kv_len, 16, gen)
    k = torch.randn(seqs, kv_len, heads, dim, generator=gen).to(dtype)
    v = torch.randn(seqs, kv_len, heads, dim, generator=gen).to(dtype)
    cache = torch.zeros(kv_cache_shape(layout, heads, dim), dtype=dtype)
    assert cache.shape == (9, 2, 16, heads, dim)
    scatter_kv(cache, k, v, layout)
    k2, v2 = gather_kv(cache, layout)
    assert torch.equal(k2.float(), k.float()) and torch.equal(v2.float(), v.float())
    # Token t of sequence s sits where the CSR rule says.
    s, t = 2, 33
    page = int(layout.indices[int(layout.indptr[s]) + t // 16])
    assert torch.equal(cache[page, 0, t % 16].float(), k[s, t].float())
    assert torch.equal(cache[page, 1, t % 16].float(), v[s, t].float())


def test_cache_bytes_match_the_ops_kv_byte_count() -> None:
    p = _attn(batch_size=4, step=63, kv_cache_dtype="bfloat16")  # 64 tokens: whole pages
    shape = attention_shape("generation_attention", p)
    layout = paged_kv_layout(shape.num_seqs, shape.kv_len, 16)
    spec = get_op("generation_attention")
    q_and_o = 2 * 4 * 8 * 64 * 2
    assert kv_cache_bytes(layout, 2, 64, "bfloat16") == spec.bytes_moved(p) - q_and_o
    # A part-filled last page costs a whole page, never less than the op's count.
    p = _attn(batch_size=4, step=64, kv_cache_dtype="fp8")
    shape = attention_shape("generation_attention", p)
    layout = paged_kv_layout(shape.num_seqs, shape.kv_len, 16)
    kv_only = spec.bytes_moved(p) - q_and_o
    assert kv_only < kv_cache_bytes(layout, 2, 64, "fp8") <= kv_only + 4 * 2 * 16 * 2 * 64


# --- masks and a paged reference attention ------------------------------------------------


@pytest.mark.parametrize(
    ("queries", "past", "window"),
    [(8, 0, 0), (8, 5, 0), (1, 40, 0), (8, 0, 3), (6, 10, 4), (1, 40, 16), (5, 2, 100)],
)
def test_flashinfer_mask_equals_the_torch_backends(queries: int, past: int, window: int) -> None:
    ours = flashinfer_mask(queries, past + queries, window - 1 if window > 0 else -1)
    torch_mask = _attn_mask(queries, past, window, "cpu")
    if torch_mask is None:  # plain top-left causal
        torch_mask = torch.ones(queries, queries, dtype=torch.bool).tril()
    assert torch.equal(ours, torch_mask)


def _paged_reference(
    q: torch.Tensor, cache: torch.Tensor, layout: object, query_len: int, window_left: int
) -> torch.Tensor:
    """Attention as FlashInfer defines it, read through the page table."""
    k, v = gather_kv(cache, layout)  # type: ignore[arg-type]
    seqs, kv_len, kv_heads, _ = k.shape
    heads = q.shape[1]
    mask = flashinfer_mask(query_len, kv_len, window_left)
    outs = []
    for s in range(seqs):
        qs = q[s * query_len : (s + 1) * query_len].float().transpose(0, 1)  # [h, q, d]
        ks = k[s].float().transpose(0, 1).repeat_interleave(heads // kv_heads, 0)
        vs = v[s].float().transpose(0, 1).repeat_interleave(heads // kv_heads, 0)
        scores = qs @ ks.transpose(1, 2) / math.sqrt(qs.shape[-1])
        probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        outs.append((probs @ vs).transpose(0, 1))
    return torch.cat(outs)


@pytest.mark.parametrize(
    ("op", "over"),
    [("context_attention", {"step": 20}), ("generation_attention", {"window_size": 9})],
)
def test_paged_attention_matches_torch_sdpa(op: str, over: dict[str, object]) -> None:
    p = _attn(op, kv_cache_dtype="bfloat16", **over)
    shape = attention_shape(op, p)
    gen = torch.Generator().manual_seed(11)
    layout = paged_kv_layout(shape.num_seqs, shape.kv_len, 16, gen)
    dims = (shape.num_seqs, shape.kv_len, shape.num_kv_heads, shape.head_dim)
    k, v = torch.randn(dims, generator=gen), torch.randn(dims, generator=gen)
    cache = torch.zeros(kv_cache_shape(layout, shape.num_kv_heads, shape.head_dim))
    scatter_kv(cache, k, v, layout)
    q = torch.randn(shape.num_tokens, shape.num_heads, shape.head_dim, generator=gen)
    ours = _paged_reference(q, cache, layout, shape.query_len, shape.window_left)
    # The torch backend's view of the same case: [b, h, s, d] with its own mask.
    qt = q.view(shape.num_seqs, shape.query_len, shape.num_heads, -1).transpose(1, 2)
    past = shape.kv_len - shape.query_len
    mask = _attn_mask(shape.query_len, past, shape.window, "cpu")
    ref = F.scaled_dot_product_attention(
        qt,
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=mask,
        is_causal=mask is None,
        enable_gqa=True,
    )
    ref = ref.transpose(1, 2).reshape(shape.num_tokens, shape.num_heads, -1)
    assert torch.allclose(ours, ref, atol=1e-5, rtol=1e-4)


# --- block FP8 ----------------------------------------------------------------------------


def test_block_fp8_on_sm90_swaps_ab_below_32_rows_and_pads_scales() -> None:
    small = block_fp8_plan(1, 4096, 7168, H200)
    assert small.api == "fp8_blockscale_gemm_sm90" and small.rows == 1
    assert small.scale_rows == 4 and small.a_scale_shape == (56, 4)
    assert small.b_scale_shape == (32, 56) and not small.b_scale_mn_major
    assert small.kernel_source == "flashinfer.fp8_blockscale_gemm_sm90[w8a8,swapAB]"
    assert block_fp8_plan(31, 4096, 4096, H100).kernel_source.endswith("[w8a8,swapAB]")
    big = block_fp8_plan(32, 4160, 4096, H200)
    assert big.kernel_source == "flashinfer.fp8_blockscale_gemm_sm90[w8a8]"
    assert big.a_scale_shape == (32, 32) and big.b_scale_shape == (33, 32)


def test_block_fp8_on_blackwell_is_groupwise_with_padded_rows() -> None:
    plan = block_fp8_plan(5, 1024, 2048, B200)
    assert plan.api == "gemm_fp8_nt_groupwise"
    assert (plan.rows, plan.scale_rows) == (8, 8)
    assert plan.a_scale_shape == (16, 8) and plan.b_scale_shape == (16, 8)
    assert plan.b_scale_mn_major
    assert plan.kernel_source == "flashinfer.gemm_fp8_nt_groupwise[cutlass,1x128x128]"
    for cap in [(10, 3), (12, 0), (12, 1)]:
        assert block_fp8_plan(8, 128, 128, cap).api == "gemm_fp8_nt_groupwise"


@pytest.mark.parametrize("cap", [(8, 0), (8, 9), (11, 0), (9, 1)])
def test_block_fp8_elsewhere_is_unsupported_naming_the_capability(cap: tuple[int, int]) -> None:
    with pytest.raises(NotImplementedError) as info:
        block_fp8_plan(16, 4096, 4096, cap)
    assert f"compute capability {cap[0]}.{cap[1]}" in str(info.value)
    assert classify_exception(info.value) == UNSUPPORTED


def test_per_token_group_quantisation_round_trips() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(5, 300, generator=gen) * 4
    x[0, :128] *= 1000  # a loud group must not flatten its neighbours
    q, scale = quantize_fp8_per_token_group(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == x.shape
    assert scale.shape == (5, 3) and scale.dtype == torch.float32
    assert q[0, :128].float().abs().max().item() == pytest.approx(FP8_E4M3_MAX)
    back = q.float() * scale.repeat_interleave(128, dim=1)[:, :300]
    assert (back - x).abs().max() <= x.abs().amax(dim=1, keepdim=True).max() * 2**-3
    assert (back[0, 128:] - x[0, 128:]).abs().max() < 1.0
    q0, s0 = quantize_fp8_per_token_group(torch.zeros(4, 128))
    assert torch.isfinite(s0).all() and q0.float().abs().sum() == 0


@pytest.mark.parametrize("cap", [H200, B200])
def test_block_fp8_operands_reproduce_the_float_gemm(cap: tuple[int, int]) -> None:
    """Operands built as the backend builds them, read back in the layout the kernel reads."""
    m, n, k = 6, 256, 384
    plan = block_fp8_plan(m, n, k, cap)
    gen = torch.Generator().manual_seed(9)
    x = torch.zeros(plan.scale_rows, k)
    x[:m] = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen)
    xq, xs = quantize_fp8_per_token_group(x)
    wq, ws = quantize_fp8_per_block(w)
    xs_mn = xs.t().contiguous()
    ws_passed = ws.t().contiguous() if plan.b_scale_mn_major else ws
    assert tuple(xs_mn.shape) == plan.a_scale_shape
    assert tuple(ws_passed.shape) == plan.b_scale_shape
    # The kernel's view: activation scale of (row r, group g) at xs_mn[g, r] (column-major
    # over rows padded to 4); weight scale of block (i, g) at [i, g] or, MN-major, [g, i].
    flat = xs_mn.reshape(-1)
    a_scale = torch.stack(
        [flat[g * plan.scale_rows : g * plan.scale_rows + m] for g in range(3)], 1
    )
    w_blocks = ws_passed.t() if plan.b_scale_mn_major else ws_passed
    xd = xq[:m].float() * a_scale.repeat_interleave(128, dim=1)
    wd = wq.float() * w_blocks.repeat_interleave(128, 0).repeat_interleave(128, 1)
    got, want = xd @ wd.t(), x[:m] @ w.t()
    rel = (got - want).norm() / want.norm()
    assert rel < 0.06


# --- names --------------------------------------------------------------------------------


def test_runner_names_map_to_flashinfers_backend_names() -> None:
    assert runner_backend("CudnnBf16GemmRunner") == "cudnn"
    assert runner_backend("CublasFp8GemmRunner") == "cublas"
    assert runner_backend("TinyGemmBf16GemmRunner") == "tinygemm"
    assert runner_backend("SomeFutureRunner") == "SomeFutureRunner"
    assert gemm_kernel_source("mm_bf16", ["CudnnBf16GemmRunner"]) == "flashinfer.mm_bf16[cudnn]"
    assert gemm_kernel_source("bmm_fp8", []) == "flashinfer.bmm_fp8[auto]"
    two = gemm_kernel_source("mm_bf16", ["TinyGemmBf16GemmRunner", "CudnnBf16GemmRunner"])
    assert two == "flashinfer.mm_bf16[cudnn+tinygemm]"


def test_attention_kernel_names() -> None:
    wrapper = "BatchPrefillWithPagedKVCacheWrapper"
    assert attention_kernel_source(wrapper, "fa3") == f"flashinfer.{wrapper}[fa3]"
    decode = "BatchDecodeWithPagedKVCacheWrapper"
    assert (
        attention_kernel_source(decode, "auto", use_tensor_cores=False)
        == f"flashinfer.{decode}[batch_decode]"
    )
    assert attention_kernel_source(decode, "fa2", use_tensor_cores=True).endswith("[fa2]")
    with pytest.raises(RuntimeError, match="without resolving"):
        attention_kernel_source(wrapper, "auto")


def test_unsupported_message_is_one_line_naming_capability() -> None:
    msg = unsupported_message("mm_bf16", (8, 6), "No suitable auto backends\nfound for mm_bf16")
    assert msg == (
        "flashinfer.mm_bf16 is not supported on compute capability 8.6: No suitable auto backends"
    )
    assert classify_exception(NotImplementedError(msg)) == UNSUPPORTED
