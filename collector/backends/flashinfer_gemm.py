"""GEMM through FlashInfer's own APIs: out[m, n] = x[m, k] @ w[n, k]^T.

- bfloat16: `flashinfer.mm_bf16(x, w.T, backend="auto")`;
- fp8: `flashinfer.bmm_fp8(x[None], w.T[None], x_scale, w_scale, bf16, backend="auto")`
  with per-tensor scales (a batch of one, B column-major as FlashInfer asks);
- fp8_block: `fp8_blockscale_gemm_sm90` (SM 9.0) or `gemm_fp8_nt_groupwise` (SM 10.x,
  12.x) on pre-quantised FP8 operands with 1x128 activation and 128x128 weight scales
  (`flashinfer_support.block_fp8_plan`); other capabilities fail as `unsupported`.

Operands are quantised for real (`quantize_fp8_*`), so the kernels see realistic data, and
every FP8 path times the GEMM alone: activation quantisation is not in the timed call (as
in the torch backend). Activations, weights and outputs rotate over `copies` buffers by
the L2 rule of the other backends. One call runs in `prepare` (JIT compilation, cuDNN
graph building, FlashInfer's dispatch observed for `kernel_source`); timed calls are
plain launches, capturable in a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from collector.backends.base import Prepared
from collector.backends.flashinfer_runtime import FlashinferRuntime, observe_dispatch
from collector.backends.flashinfer_support import (
    block_fp8_plan,
    gemm_kernel_source,
    quantize_fp8_per_token_group,
)
from collector.backends.torch_backend import rotation_copies
from collector.backends.vllm_support import quantize_fp8_per_block, quantize_fp8_per_tensor

GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block")


def _randn(rows: int, cols: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.randn(rows, cols, generator=gen, device=device, dtype=torch.float32)


def _finish(
    rt: FlashinferRuntime, api: str, calls: Callable[[int], torch.Tensor], copies: int
) -> Prepared:
    """One observed call, then the row."""
    with observe_dispatch() as seen:
        rt.first_call(api, lambda: calls(0))
    torch.cuda.synchronize(rt.device)
    return Prepared(call=calls, copies=copies, kernel_source=gemm_kernel_source(api, seen))


def _prepare_bf16(
    rt: FlashinferRuntime, m: int, n: int, k: int, copies: int, gen: torch.Generator
) -> Prepared:
    import flashinfer

    dev = rt.device
    xs = [_randn(m, k, gen, dev).to(torch.bfloat16) for _ in range(copies)]
    ws = [_randn(n, k, gen, dev).to(torch.bfloat16) for _ in range(copies)]
    outs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(copies)]

    def call(i: int) -> torch.Tensor:
        j = i % copies
        out: torch.Tensor = flashinfer.mm_bf16(xs[j], ws[j].t(), out=outs[j], backend="auto")
        return out

    return _finish(rt, "mm_bf16", call, copies)


def _prepare_fp8(
    rt: FlashinferRuntime, m: int, n: int, k: int, copies: int, gen: torch.Generator
) -> Prepared:
    import flashinfer

    dev = rt.device
    xs, ws, x_scales, w_scales = [], [], [], []
    for _ in range(copies):
        xq, xs_ = quantize_fp8_per_tensor(_randn(m, k, gen, dev))
        wq, ws_ = quantize_fp8_per_tensor(_randn(n, k, gen, dev))
        # A [1, m, k] row-major; B [1, k, n] column-major: a transposed row-major [n, k].
        xs.append(xq.unsqueeze(0))
        ws.append(wq.t().unsqueeze(0))
        x_scales.append(xs_.reshape(()))
        w_scales.append(ws_.reshape(()))
    outs = [torch.empty(1, m, n, device=dev, dtype=torch.bfloat16) for _ in range(copies)]

    def call(i: int) -> torch.Tensor:
        j = i % copies
        out: torch.Tensor = flashinfer.bmm_fp8(
            xs[j], ws[j], x_scales[j], w_scales[j], torch.bfloat16, out=outs[j], backend="auto"
        )
        return out

    return _finish(rt, "bmm_fp8", call, copies)


def _prepare_fp8_block(
    rt: FlashinferRuntime, m: int, n: int, k: int, copies: int, gen: torch.Generator
) -> Prepared:
    plan = block_fp8_plan(m, n, k, rt.capability)  # NotImplementedError off SM 9.0/10.x/12.x
    dev = rt.device
    xs, x_scales, ws, w_scales = [], [], [], []
    for _ in range(copies):
        x = torch.zeros(plan.scale_rows, k, device=dev, dtype=torch.float32)
        x[:m] = _randn(m, k, gen, dev)
        xq, xsc = quantize_fp8_per_token_group(x)  # padding rows quantise to zeros
        wq, wsc = quantize_fp8_per_block(_randn(n, k, gen, dev))
        xsc = xsc.t().contiguous()  # MN-major: [K/128, scale_rows]
        if plan.b_scale_mn_major:
            wsc = wsc.t().contiguous()
        if tuple(xsc.shape) != plan.a_scale_shape or tuple(wsc.shape) != plan.b_scale_shape:
            raise RuntimeError(
                f"scale shapes {tuple(xsc.shape)}, {tuple(wsc.shape)} differ from what "
                f"{plan.api} takes: {plan.a_scale_shape}, {plan.b_scale_shape}"
            )
        xs.append(xq[: plan.rows])
        x_scales.append(xsc)
        ws.append(wq)
        w_scales.append(wsc)
    outs = [torch.empty(plan.rows, n, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    if plan.api == "fp8_blockscale_gemm_sm90":
        from flashinfer.gemm import fp8_blockscale_gemm_sm90

        def call(i: int) -> torch.Tensor:
            j = i % copies
            out: torch.Tensor = fp8_blockscale_gemm_sm90(
                xs[j], ws[j], x_scales[j], w_scales[j], out=outs[j], out_dtype=torch.bfloat16
            )
            return out

    else:
        from flashinfer.gemm import gemm_fp8_nt_groupwise

        def call(i: int) -> torch.Tensor:
            j = i % copies
            out: torch.Tensor = gemm_fp8_nt_groupwise(
                xs[j],
                ws[j],
                x_scales[j],
                w_scales[j],
                scale_major_mode="MN",
                scale_granularity_mnk=(1, 128, 128),
                out=outs[j],
                backend="cutlass",
            )
            return out

    rt.first_call(plan.api, lambda: call(0))
    torch.cuda.synchronize(rt.device)
    return Prepared(call=call, copies=copies, kernel_source=plan.kernel_source)


def prepare_gemm(rt: FlashinferRuntime, p: dict[str, Any], l2_bytes: int) -> Prepared:
    m, n, k, dtype = int(p["m"]), int(p["n"]), int(p["k"]), str(p["gemm_dtype"])
    if dtype not in GEMM_DTYPES:
        raise NotImplementedError(f"the flashinfer backend has no GEMM for gemm_dtype {dtype!r}")
    gen = torch.Generator(device=rt.device).manual_seed(0)
    copies = rotation_copies(n * k * (2 if dtype == "bfloat16" else 1), l2_bytes)
    if dtype == "bfloat16":
        return _prepare_bf16(rt, m, n, k, copies, gen)
    if dtype == "fp8":
        return _prepare_fp8(rt, m, n, k, copies, gen)
    return _prepare_fp8_block(rt, m, n, k, copies, gen)
