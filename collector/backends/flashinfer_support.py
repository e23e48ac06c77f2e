"""Pure helpers of the flashinfer backend: no FlashInfer import, so they run (and are tested)
on a CPU.

Each rule is read from FlashInfer 0.6.12's source, with the place it comes from, so that a
version bump can be checked rule by rule:

- how an attention case maps to a batch of paged sequences (`AttentionShape`), and how the
  paged KV cache lays them out (`indptr`, `indices`, `last_page_len`: the CSR page table of
  `BatchPrefillWithPagedKVCacheWrapper.plan` and `BatchDecodeWithPagedKVCacheWrapper.plan`);
- the NHD cache tensor `[num_pages, 2, page_size, num_kv_heads, head_dim]` and how a token
  is found in it (`gather_kv`, the reference the layout is tested against);
- which block-scaled FP8 GEMM FlashInfer offers per compute capability, with its scale
  shapes (`block_fp8_plan`);
- how the runner FlashInfer's AutoTuner picked is named (`runner_backend`), and the
  `kernel_source` names of the backend's rows.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import torch

# The paged KV cache's page size: FlashInfer's documented examples and vLLM's serving
# default on CUDA use 16 tokens per page; any positive size is accepted.
PAGE_SIZE_ENV = "COLLECTBOT_FLASHINFER_PAGE_SIZE"
DEFAULT_PAGE_SIZE = 16
# The float workspace of the attention wrappers. FlashInfer's docstrings suggest 128 MB, but
# on the H200 a split-KV fp8 prefill with 64 query heads overflowed it (docs/benchmarks.md);
# vLLM 0.24.0 gives FlashInfer 394 MiB (VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE), and so do we.
WORKSPACE_BYTES = 394 * 1024 * 1024
# DeepSeek-style block scaling: 1x128 activation groups, 128x128 weight blocks.
FP8_BLOCK = 128
# flashinfer/data/csrc/nv_internal/.../fp8_blockscale_gemm_kernel.cuh, `gemm_dispatch`:
# `m_threshold = 32`; below it the DeepGEMM kernel runs with A and B swapped (swapAB).
SM90_SWAP_AB_M_THRESHOLD = 32
# flashinfer/gemm/gemm_base.py, `gemm_fp8_nt_groupwise`: "The m should be padded to a
# multiple of 4 before calling this function, to accommodate the kernel's requirement."
GROUPWISE_M_MULTIPLE = 4
# `_cutlass_gemm_fp8_nt_groupwise_requirement`: @supported_compute_capability([100, 103,
# 120, 121]); `fp8_blockscale_gemm_sm90`: `_match_sm_version(device, ["90", "90a"])`.
GROUPWISE_SMS = frozenset({100, 103, 120, 121})
SM90 = 90
# torch.finfo(torch.float8_e4m3fn).max
FP8_E4M3_MAX = 448.0

ACT_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
KV_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "fp8": torch.float8_e4m3fn}

# Runner classes of flashinfer/gemm/gemm_base.py -> the backend name FlashInfer's own API
# uses for them (`mm_bf16(backend=...)`, `bmm_fp8(backend=...)`).
RUNNER_BACKENDS = {
    "CudnnBf16GemmRunner": "cudnn",
    "CublasltBf16GemmRunner": "cublaslt",
    "CutlassBf16GemmRunner": "cutlass",
    "TGVGemmRunner": "tgv",
    "TinyGemmBf16GemmRunner": "tinygemm",
    "CublasFp8GemmRunner": "cublas",
    "CudnnFp8GemmRunner": "cudnn",
    "CutlassFp8GemmRunner": "cutlass",
}


def page_size(environ: dict[str, str] | None = None) -> int:
    """The page size from $COLLECTBOT_FLASHINFER_PAGE_SIZE (default 16)."""
    raw = (os.environ if environ is None else environ).get(PAGE_SIZE_ENV, "").strip()
    if not raw:
        return DEFAULT_PAGE_SIZE
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"${PAGE_SIZE_ENV} must be a positive integer, got {raw!r}")
    return int(raw)


def sm_number(capability: tuple[int, int]) -> int:
    major, minor = capability
    return major * 10 + minor


# --- attention ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionShape:
    """An attention case as a batch of sequences in a paged KV cache."""

    num_seqs: int
    query_len: int  # new tokens per sequence
    kv_len: int  # tokens in the KV cache per sequence, the new ones included
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window: int  # 0: no sliding window
    act_dtype: str
    kv_cache_dtype: str

    @property
    def num_tokens(self) -> int:
        return self.num_seqs * self.query_len

    @property
    def window_left(self) -> int:
        """FlashInfer's `window_left`: keys to the left of the query's own, -1 for none.

        A window of W keys (the op's `window_size`, the query's own key included, as the
        torch backend's mask) is `window_left = W - 1`.
        """
        return self.window - 1 if self.window > 0 else -1


def attention_shape(op: str, p: dict[str, Any]) -> AttentionShape:
    """Map a case to the batch FlashInfer runs, as the torch backend does.

    Context: `batch_size` sequences of `isl` new tokens after `step` cached ones.
    Generation: one new token for each of `batch_size * beam_width` sequences over `step`
    cached tokens (each beam its own cache, as in the torch backend).
    """
    act, kv = str(p["attn_dtype"]), str(p["kv_cache_dtype"])
    if act not in ACT_DTYPES:
        raise NotImplementedError(f"the flashinfer backend has no attn_dtype {act!r}")
    if kv not in KV_DTYPES:
        raise NotImplementedError(f"the flashinfer backend has no kv_cache_dtype {kv!r}")
    heads, kv_heads = int(p["num_heads"]), int(p["num_key_value_heads"])
    if heads % kv_heads:
        raise ValueError(f"num_heads {heads} is not a multiple of {kv_heads} KV heads")
    isl, step, beams = int(p["isl"]), int(p["step"]), int(p["beam_width"])
    if op == "context_attention":
        if beams != 1:
            raise NotImplementedError("flashinfer context attention collects beam_width 1 only")
        seqs, q_len = int(p["batch_size"]), isl
    elif op == "generation_attention":
        if isl != 1:
            raise ValueError(f"generation_attention decodes one token per sequence; isl={isl}")
        seqs, q_len = int(p["batch_size"]) * beams, 1
    else:
        raise NotImplementedError(f"the flashinfer backend does not implement op {op!r}")
    return AttentionShape(
        num_seqs=seqs,
        query_len=q_len,
        kv_len=step + q_len,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=int(p["head_dim"]),
        window=int(p["window_size"]),
        act_dtype=act,
        kv_cache_dtype=kv,
    )


@dataclass
class PagedKV:
    """FlashInfer's CSR page table of a batch (CPU int32 tensors).

    Sequence s owns pages `indices[indptr[s]:indptr[s + 1]]`, in order; its last page
    holds `last_page_len[s]` tokens (1..page_size). Token t of sequence s lives in page
    `indices[indptr[s] + t // page_size]` at slot `t % page_size`.
    """

    indptr: torch.Tensor  # [num_seqs + 1]
    indices: torch.Tensor  # [indptr[-1]]
    last_page_len: torch.Tensor  # [num_seqs]
    page_size: int
    num_pages: int  # pages of the cache tensor

    def qo_indptr(self, query_len: int) -> torch.Tensor:
        """Query offsets of `query_len` new tokens per sequence: `[num_seqs + 1]`."""
        seqs = self.last_page_len.numel()
        return torch.arange(0, seqs + 1, dtype=torch.int32, device="cpu") * query_len

    def seq_lens(self) -> torch.Tensor:
        pages = self.indptr[1:] - self.indptr[:-1]
        return (pages - 1) * self.page_size + self.last_page_len


def paged_kv_layout(
    num_seqs: int, kv_len: int, page_size: int, generator: torch.Generator | None = None
) -> PagedKV:
    """Give every sequence its pages, scattered as after allocator churn.

    The pages are a random permutation of the cache, so consecutive pages of a sequence
    are not adjacent in memory (as in a long-running server, and as the vllm backend's
    block table).
    """
    if page_size <= 0:
        raise ValueError(f"page_size must be positive, got {page_size}")
    if num_seqs <= 0 or kv_len <= 0:
        raise ValueError(f"a paged batch needs sequences and tokens, got {num_seqs} x {kv_len}")
    per_seq = math.ceil(kv_len / page_size)
    total = num_seqs * per_seq
    indices = torch.randperm(total, generator=generator, device="cpu").to(torch.int32)
    indptr = torch.arange(0, num_seqs + 1, dtype=torch.int32, device="cpu") * per_seq
    last = kv_len - (per_seq - 1) * page_size
    last_page_len = torch.full((num_seqs,), last, dtype=torch.int32, device="cpu")
    return PagedKV(indptr, indices, last_page_len, page_size, total)


def kv_cache_shape(layout: PagedKV, num_kv_heads: int, head_dim: int) -> tuple[int, ...]:
    """The NHD cache tensor: `[num_pages, 2, page_size, num_kv_heads, head_dim]`, K at
    index 0 and V at 1 of dim 1 (prefill.py/decode.py `run`, `paged_kv_cache`)."""
    return (layout.num_pages, 2, layout.page_size, num_kv_heads, head_dim)


def kv_cache_bytes(layout: PagedKV, num_kv_heads: int, head_dim: int, kv_dtype: str) -> int:
    """Bytes of the cache tensor (what one rotation copy occupies)."""
    return math.prod(kv_cache_shape(layout, num_kv_heads, head_dim)) * KV_DTYPES[kv_dtype].itemsize


def _token_slots(layout: PagedKV) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per sequence: (page of each token, slot in the page)."""
    out = []
    lens = layout.seq_lens().tolist()
    for s, length in enumerate(lens):
        t = torch.arange(int(length), dtype=torch.int64)
        pages = layout.indices[int(layout.indptr[s]) :][: math.ceil(length / layout.page_size)]
        out.append((pages.to(torch.int64)[t // layout.page_size], t % layout.page_size))
    return out


def scatter_kv(cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: PagedKV) -> None:
    """Write contiguous K and V (`[num_seqs, kv_len, num_kv_heads, head_dim]`) into the
    NHD cache, as `append_paged_kv_cache` would have."""
    for s, (pages, slots) in enumerate(_token_slots(layout)):
        cache[pages, 0, slots] = k[s, : pages.numel()].to(cache.dtype)
        cache[pages, 1, slots] = v[s, : pages.numel()].to(cache.dtype)


def gather_kv(cache: torch.Tensor, layout: PagedKV) -> tuple[torch.Tensor, torch.Tensor]:
    """Read each sequence's K and V back in token order: `[num_seqs, kv_len, heads, dim]`
    (all sequences of a layout have one length)."""
    ks, vs = [], []
    for pages, slots in _token_slots(layout):
        ks.append(cache[pages, 0, slots])
        vs.append(cache[pages, 1, slots])
    return torch.stack(ks), torch.stack(vs)


def flashinfer_mask(query_len: int, kv_len: int, window_left: int) -> torch.Tensor:
    """FlashInfer's causal mask of one sequence (True = attend), `[query_len, kv_len]`.

    Causal attention aligns the queries with the last keys: query i sees key j when
    `j <= i + kv_len - query_len`; a sliding window also needs
    `j + query_len + window_left >= kv_len + i` (include/flashinfer/attention/variants.cuh,
    `REGISTER_LOGITS_MASK`); `window_left < 0` is no window.
    """
    i = torch.arange(query_len)[:, None]
    j = torch.arange(kv_len)[None, :]
    mask = j <= i + (kv_len - query_len)
    if window_left >= 0:
        mask &= j + query_len + window_left >= kv_len + i
    return mask


def attention_kernel_source(wrapper: str, backend: str, use_tensor_cores: bool = True) -> str:
    """`kernel_source` of an attention row: the wrapper and the kernel family that ran.

    Prefill: the backend `plan` resolved `auto` to (`fa2`, `fa3`, `cudnn`, `trtllm-gen`).
    Decode without tensor cores (FlashInfer's default): its own decode kernel, named by its
    JIT module family `batch_decode`; with tensor cores: the prefill family it runs.
    """
    if not use_tensor_cores and backend in ("auto", ""):
        return f"flashinfer.{wrapper}[batch_decode]"
    if backend in ("auto", ""):
        raise RuntimeError(f"FlashInfer's {wrapper} planned without resolving its backend")
    return f"flashinfer.{wrapper}[{backend}]"


# --- GEMM ---------------------------------------------------------------------------------


def runner_backend(runner_class: str) -> str:
    """The backend name of a GEMM runner FlashInfer's AutoTuner chose (its class name when
    the runner is not one this version is known to have)."""
    return RUNNER_BACKENDS.get(runner_class, runner_class)


def gemm_kernel_source(api: str, chosen: list[str]) -> str:
    """`flashinfer.<api>[<backend>]` from the runners observed during the first call.

    No observation means FlashInfer's dispatch was not seen (it did not go through its
    AutoTuner): the row then says `auto`, what was asked for.
    """
    names = sorted({runner_backend(c) for c in chosen})
    return f"flashinfer.{api}[{'+'.join(names) if names else 'auto'}]"


@dataclass(frozen=True)
class BlockFp8Plan:
    """FlashInfer's block-scaled FP8 GEMM for a capability, and the operands it takes.

    Activation scales are MN-major, `[ceil(K/128), scale_rows]` with M padded to a multiple
    of 4 (`scale_rows`): the layout both kernels read. Weight scales are `[ceil(N/128),
    ceil(K/128)]` for SM 9.0 (the shape its binding checks) and MN-major `[ceil(K/128),
    ceil(N/128)]` for the groupwise CUTLASS kernel.
    """

    api: str
    rows: int  # activation rows passed (padded where FlashInfer asks for it)
    scale_rows: int  # M padded to a multiple of 4: columns of the activation scales
    a_scale_shape: tuple[int, int]
    b_scale_shape: tuple[int, int]
    b_scale_mn_major: bool
    kernel_source: str


def block_fp8_plan(m: int, n: int, k: int, capability: tuple[int, int]) -> BlockFp8Plan:
    """Which FlashInfer function runs a 1x128 / 128x128 block-FP8 GEMM here, with its scale
    shapes; other capabilities have none (NotImplementedError naming the capability).

    SM 9.0 - `fp8_blockscale_gemm_sm90` with FP8 input (W8A8). Its docstring says input
      scales are `(M, K/128)`, but its binding does not check them and the DeepGEMM kernel
      reads them column-major over M padded to 4 (`make_2d_tma_scales_a_desc`; FlashInfer's
      own quantiser `scale_1x128_kernel` writes them with stride `align(M, 4)`), so they
      are passed as `[K/128, align(M, 4)]`. Below M = 32 the kernel runs swapAB.
    SM 10.0/10.3/12.0/12.1 - `gemm_fp8_nt_groupwise(backend="cutlass")`,
      `scale_granularity_mnk=(1, 128, 128)`, `scale_major_mode="MN"`; M padded to a multiple
      of 4 as its docstring asks.
    """
    sm = sm_number(capability)
    kb, nb = math.ceil(k / FP8_BLOCK), math.ceil(n / FP8_BLOCK)
    scale_rows = math.ceil(m / GROUPWISE_M_MULTIPLE) * GROUPWISE_M_MULTIPLE

    def plan(api: str, leaf: str, rows: int, mn_major: bool) -> BlockFp8Plan:
        # Both kernels read the same activation scales; weight scales are MN-major or not.
        return BlockFp8Plan(
            api=api,
            rows=rows,
            scale_rows=scale_rows,
            a_scale_shape=(kb, scale_rows),
            b_scale_shape=(kb, nb) if mn_major else (nb, kb),
            b_scale_mn_major=mn_major,
            kernel_source=f"flashinfer.{api}[{leaf}]",
        )

    if sm == SM90:
        leaf = "w8a8,swapAB" if m < SM90_SWAP_AB_M_THRESHOLD else "w8a8"
        return plan("fp8_blockscale_gemm_sm90", leaf, rows=m, mn_major=False)
    if sm in GROUPWISE_SMS:
        return plan("gemm_fp8_nt_groupwise", "cutlass,1x128x128", rows=scale_rows, mn_major=True)
    major, minor = capability
    raise NotImplementedError(
        f"FlashInfer has no block-scaled FP8 GEMM for compute capability {major}.{minor} "
        "(fp8_blockscale_gemm_sm90 needs 9.0; gemm_fp8_nt_groupwise 10.0, 10.3, 12.0, 12.1)"
    )


def quantize_fp8_per_token_group(
    x: torch.Tensor, group: int = FP8_BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """1x`group` activation quantisation: (e4m3 `[M, K]`, float32 scales `[M, ceil(K/group)]`).

    `q.float() * scale` (each scale repeated over its group) approximates `x`; an all-zero
    group gets a tiny positive scale, never a division by zero.
    """
    rows, k = x.shape
    groups = math.ceil(k / group)
    padded = torch.zeros(rows, groups * group, dtype=torch.float32, device=x.device)
    padded[:, :k] = x.float()
    tiles = padded.view(rows, groups, group)
    scale = tiles.abs().amax(dim=2).clamp(min=1e-12) / FP8_E4M3_MAX
    q = (tiles / scale[:, :, None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    q8 = q.view(rows, groups * group)[:, :k].contiguous().to(torch.float8_e4m3fn)
    return q8, scale.contiguous()


def unsupported_message(api: str, capability: tuple[int, int], detail: str) -> str:
    """One line for a FlashInfer `BackendSupportedError`: the API, the capability, why."""
    major, minor = capability
    first = detail.strip().splitlines()[0] if detail.strip() else "no suitable backend"
    return f"flashinfer.{api} is not supported on compute capability {major}.{minor}: {first}"
