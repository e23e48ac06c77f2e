"""The torch backend: always available, and the CPU path of every op it implements."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from collector.backends.base import Prepared
from collector.caseplan import Case

_FLOAT_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
MAX_COPIES = 6


def _generator(device: str) -> torch.Generator:
    # Data is generated where it lives: CPU-side randn of GB-sized weights takes seconds.
    return torch.Generator(device=device).manual_seed(0)


def rotation_copies(weight_bytes: int, l2_bytes: int) -> int:
    """Weight copies needed so that consecutive calls miss the cache."""
    if l2_bytes <= 0 or weight_bytes <= 0:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(2 * l2_bytes / weight_bytes)))


class TorchBackend:
    name = "torch"
    framework = "torch"

    def framework_version(self) -> str:
        return str(torch.__version__).split("+")[0]

    def supported_ops(self) -> frozenset[str]:
        return frozenset({"gemm", "context_attention", "generation_attention"})

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:
        if case.op == "gemm":
            return _prepare_gemm(case.params, device, l2_bytes)
        if case.op == "context_attention":
            return prepare_context_attention(case.params, device)
        if case.op == "generation_attention":
            return prepare_generation_attention(case.params, device, l2_bytes)
        raise NotImplementedError(f"torch backend does not implement op {case.op!r}")


def _prepare_gemm(p: dict[str, Any], device: str, l2_bytes: int) -> Prepared:
    """Activations, weights and outputs all rotate over `copies` buffers.

    On the H200, re-preparing a case moved small GEMMs by up to 15% between runs when only
    the weights rotated: where a single activation or output buffer lands in memory sets the
    speed of every call of the run. Rotating all three averages placements inside each sample
    (docs/statistics.md).
    """
    m, n, k, dtype = p["m"], p["n"], p["k"], p["gemm_dtype"]
    if dtype == "fp8_block":
        return _prepare_gemm_fp8_block(m, n, k, device, l2_bytes)
    if dtype not in _FLOAT_DTYPES and dtype != "fp8":
        raise NotImplementedError(f"torch backend has no GEMM for dtype {dtype!r}")
    gen = _generator(device)
    in_dtype = torch.float8_e4m3fn if dtype == "fp8" else _FLOAT_DTYPES[dtype]
    out_dtype = torch.bfloat16 if dtype == "fp8" else in_dtype
    copies = rotation_copies(n * k * in_dtype.itemsize, l2_bytes)
    xs = [torch.randn(m, k, generator=gen, device=device).to(in_dtype) for _ in range(copies)]
    ws = [torch.randn(n, k, generator=gen, device=device).to(in_dtype) for _ in range(copies)]
    outs = [torch.empty(m, n, device=device, dtype=out_dtype) for _ in range(copies)]
    if dtype == "fp8":
        one = torch.ones((), device=device, dtype=torch.float32)

        def call_fp8(i: int) -> torch.Tensor:
            j = i % copies
            # _scaled_mm wants the second operand column-major: a transposed row-major [n, k].
            return torch._scaled_mm(
                xs[j], ws[j].t(), scale_a=one, scale_b=one, out_dtype=out_dtype, out=outs[j]
            )

        return Prepared(call=call_fp8, copies=copies, kernel_source="torch._scaled_mm")

    def call(i: int) -> torch.Tensor:
        j = i % copies
        # x @ w.T into a preallocated output: the same cuBLAS GEMM F.linear dispatches, named
        # as the field's tables name it.
        return torch.matmul(xs[j], ws[j].t(), out=outs[j])

    return Prepared(call=call, copies=copies, kernel_source="torch.nn.functional.linear")


BLOCK = 128


def _prepare_gemm_fp8_block(m: int, n: int, k: int, device: str, l2_bytes: int) -> Prepared:
    """DeepSeek-style block scaling: 1x128 activation scales, 128x128 weight scales.

    torch's own dispatch picks the kernel (cuBLASLt block-scaled GEMM on SM 9.0); scale
    layouts follow its checks: activation scales outer-dim-major, weight scales transposed.
    """
    if not device.startswith("cuda"):
        # torch implements block-scaled _scaled_mm only in its CUDA (cuBLASLt) path.
        raise NotImplementedError("torch has no block-scaled fp8 GEMM on the CPU")
    gen = _generator(device)
    fp8 = torch.float8_e4m3fn
    kb, nb = math.ceil(k / BLOCK), math.ceil(n / BLOCK)
    copies = rotation_copies(n * k, l2_bytes)
    xqs = [torch.randn(m, k, generator=gen, device=device).to(fp8) for _ in range(copies)]
    wqs = [torch.randn(n, k, generator=gen, device=device).to(fp8) for _ in range(copies)]
    outs = [torch.empty(m, n, device=device, dtype=torch.bfloat16) for _ in range(copies)]
    scale_x = torch.ones(kb, m, device=device, dtype=torch.float32).t()
    scale_w = torch.ones(nb, kb, device=device, dtype=torch.float32).t()

    def call(i: int) -> torch.Tensor:
        j = i % copies
        return torch._scaled_mm(
            xqs[j],
            wqs[j].t(),
            scale_a=scale_x,
            scale_b=scale_w,
            out_dtype=torch.bfloat16,
            out=outs[j],
        )

    return Prepared(call=call, copies=copies, kernel_source="torch._scaled_mm[block1x128,128x128]")


_KV_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "fp8": torch.float8_e4m3fn}


def _attn_mask(queries: int, past: int, window: int, device: str) -> torch.Tensor | None:
    """Boolean mask (True = attend) for causal attention of `queries` new tokens after `past`
    cached ones, optionally windowed; None when plain top-left causal SDPA is exact."""
    if past == 0 and window <= 0:
        return None
    q_pos = torch.arange(past, past + queries, device=device)[:, None]
    k_pos = torch.arange(past + queries, device=device)[None, :]
    mask = k_pos <= q_pos
    if window > 0:
        mask &= k_pos > q_pos - window
    return mask


def _kv(
    batch: int, heads: int, length: int, dim: int, kv_dtype: str, device: str, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    if kv_dtype not in _KV_DTYPES:
        raise NotImplementedError(f"torch backend has no KV cache dtype {kv_dtype!r}")
    shape = (batch, heads, length, dim)
    k = torch.randn(*shape, generator=gen, device=device).to(_KV_DTYPES[kv_dtype])
    v = torch.randn(*shape, generator=gen, device=device).to(_KV_DTYPES[kv_dtype])
    return k, v


def _sdpa_source(kv_dtype: str, mode: str) -> str:
    # torch has no fp8-KV attention kernel: the fp8 cache is dequantised, then SDPA runs,
    # and the row says so (both steps are inside the timed call).
    source = f"torch.sdpa[{mode}]"
    return source + ("+fp8_dequant" if kv_dtype == "fp8" else "")


def prepare_context_attention(p: dict[str, Any], device: str) -> Prepared:
    if p["attn_dtype"] != "bfloat16" or p["beam_width"] != 1:
        raise NotImplementedError("torch context attention supports bfloat16, beam_width 1")
    gen = _generator(device)
    b, s, h, hkv, d = (
        p["batch_size"],
        p["isl"],
        p["num_heads"],
        p["num_key_value_heads"],
        p["head_dim"],
    )
    past, window = p["step"], p["window_size"]
    q = torch.randn(b, h, s, d, generator=gen, device=device).to(torch.bfloat16)
    k, v = _kv(b, hkv, past + s, d, p["kv_cache_dtype"], device, gen)
    mask = _attn_mask(s, past, window, device)
    dequant = p["kv_cache_dtype"] == "fp8"

    def call(i: int) -> torch.Tensor:
        kk, vv = (k.to(torch.bfloat16), v.to(torch.bfloat16)) if dequant else (k, v)
        return F.scaled_dot_product_attention(
            q, kk, vv, attn_mask=mask, is_causal=mask is None, enable_gqa=h != hkv
        )

    return Prepared(
        call=call,
        copies=1,
        kernel_source=_sdpa_source(p["kv_cache_dtype"], "causal" if mask is None else "mask"),
    )


def prepare_generation_attention(p: dict[str, Any], device: str, l2_bytes: int) -> Prepared:
    """One new token per sequence (and beam) over a contiguous cache of `step` tokens."""
    if p["attn_dtype"] != "bfloat16":
        raise NotImplementedError("torch generation attention supports bfloat16 activations")
    gen = _generator(device)
    b, h, hkv, d = (
        p["batch_size"] * p["beam_width"],
        p["num_heads"],
        p["num_key_value_heads"],
        p["head_dim"],
    )
    window = p["window_size"]
    length = p["step"] + 1
    if window > 0:
        length = min(length, window)
    kv_bytes = 2 * b * hkv * length * d * (1 if p["kv_cache_dtype"] == "fp8" else 2)
    # Rotate whole caches like GEMM weights, so decode reads HBM, not a warm L2.
    copies = rotation_copies(kv_bytes, l2_bytes)
    q = torch.randn(b, h, 1, d, generator=gen, device=device).to(torch.bfloat16)
    caches = [_kv(b, hkv, length, d, p["kv_cache_dtype"], device, gen) for _ in range(copies)]
    dequant = p["kv_cache_dtype"] == "fp8"

    def call(i: int) -> torch.Tensor:
        k, v = caches[i % copies]
        if dequant:
            k, v = k.to(torch.bfloat16), v.to(torch.bfloat16)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=h != hkv)

    return Prepared(
        call=call, copies=copies, kernel_source=_sdpa_source(p["kv_cache_dtype"], "decode")
    )
