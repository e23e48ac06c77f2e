"""One pass over the FlashInfer 0.6.12 paths the flashinfer backend builds on, on a GPU.

Each step is tried on its own; a line per step goes to OUT/fi_probe.jsonl with its wall
time (JIT compilation included on first use), a CUDA-event latency, and the error if any.

    PYTHONPATH=/tmp/fisite python3 bench/gpu/flashinfer_probe.py --out $OUT/fi_probe.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def latency_us(fn: Callable[[], Any], graph: bool) -> float:
    fn()
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn()
        step: Callable[[], Any] = g.replay
    else:
        step = fn
    for _ in range(10):
        step()
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for _ in range(50):
        step()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1000 / 50


def paged(batch: int, kv_len: int, page: int, kv_heads: int, hd: int, dtype: torch.dtype) -> Any:
    pages_per = (kv_len + page - 1) // page
    indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * pages_per
    indices = torch.arange(0, batch * pages_per, dtype=torch.int32, device="cuda")
    last = torch.full((batch,), kv_len - (pages_per - 1) * page, dtype=torch.int32, device="cuda")
    cache = torch.randn(batch * pages_per, 2, page, kv_heads, hd, device="cuda").to(dtype)
    return indptr, indices, last, cache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    lines: list[dict[str, Any]] = []

    def step(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"step": name}
        try:
            rec.update(fn())
            rec["ok"] = True
        except BaseException as exc:
            rec["ok"] = False
            rec["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            rec["trace"] = traceback.format_exc()[-3000:]
        rec["wall_s"] = round(time.perf_counter() - t0, 2)
        lines.append(rec)
        print(json.dumps({k: v for k, v in rec.items() if k != "trace"}), flush=True)
        args.out.write_text("".join(json.dumps(x) + "\n" for x in lines))

    import flashinfer

    step(
        "env",
        lambda: {
            "flashinfer": flashinfer.__version__,
            "ninja": shutil.which("ninja"),
            "nvcc": shutil.which("nvcc"),
            "cuda_home": os.environ.get("CUDA_HOME"),
            "device": torch.cuda.get_device_name(0),
        },
    )
    ws = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    qh, kvh, hd, page = 32, 8, 128, 16

    for kv_dtype in (torch.bfloat16, torch.float8_e4m3fn):
        tag = "bf16" if kv_dtype == torch.bfloat16 else "fp8"

        def decode(kv_dtype: torch.dtype = kv_dtype) -> dict[str, Any]:
            batch, kv_len = 8, 2048
            indptr, indices, last, cache = paged(batch, kv_len, page, kvh, hd, kv_dtype)
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
            w.plan(
                indptr,
                indices,
                last,
                qh,
                kvh,
                hd,
                page,
                pos_encoding_mode="NONE",
                q_data_type=torch.bfloat16,
                kv_data_type=kv_dtype,
            )
            q = torch.randn(batch, qh, hd, device="cuda", dtype=torch.bfloat16)
            eager = latency_us(lambda: w.run(q, cache), graph=False)
            graphed = latency_us(lambda: w.run(q, cache), graph=True)
            return {
                "eager_us": eager,
                "graph_us": graphed,
                "wrapper_backend": getattr(w, "_backend", None),
            }

        def prefill(kv_dtype: torch.dtype = kv_dtype) -> dict[str, Any]:
            batch, seq = 2, 1024
            indptr, indices, last, cache = paged(batch, seq, page, kvh, hd, kv_dtype)
            qo_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * seq
            w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="auto")
            w.plan(
                qo_indptr,
                indptr,
                indices,
                last,
                qh,
                kvh,
                hd,
                page,
                causal=True,
                q_data_type=torch.bfloat16,
                kv_data_type=kv_dtype,
            )
            q = torch.randn(batch * seq, qh, hd, device="cuda", dtype=torch.bfloat16)
            eager = latency_us(lambda: w.run(q, cache), graph=False)
            graphed = latency_us(lambda: w.run(q, cache), graph=True)
            return {
                "eager_us": eager,
                "graph_us": graphed,
                "wrapper_backend": getattr(w, "_backend", None),
            }

        step(f"decode_{tag}", decode)
        step(f"prefill_{tag}", prefill)

    m, n, k = 128, 4096, 4096

    def mm_bf16() -> dict[str, Any]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        out: dict[str, Any] = {}
        for backend in ("cudnn", "cutlass", "auto"):
            try:
                fn = lambda b=backend: flashinfer.mm_bf16(a, w.t(), backend=b)  # noqa: E731
                out[backend] = latency_us(fn, graph=True)
            except Exception as exc:
                out[backend] = f"{type(exc).__name__}: {exc}"[:400]
        return out

    def bmm_fp8() -> dict[str, Any]:
        a = torch.randn(1, m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(1, n, k, device="cuda").to(torch.float8_e4m3fn).transpose(-2, -1)
        sa = torch.tensor(1.0, device="cuda")
        sb = torch.tensor(1.0, device="cuda")
        out: dict[str, Any] = {}
        for backend in ("cublas", "cudnn", "cutlass", "auto"):
            try:
                fn = lambda be=backend: flashinfer.bmm_fp8(a, b, sa, sb, torch.bfloat16, backend=be)  # noqa: E731
                out[backend] = latency_us(fn, graph=True)
            except Exception as exc:
                out[backend] = f"{type(exc).__name__}: {exc}"[:400]
        return out

    def block_fp8() -> dict[str, Any]:
        from flashinfer.gemm import fp8_blockscale_gemm_sm90

        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        ws_ = torch.ones(n // 128, k // 128, device="cuda", dtype=torch.float32)
        a8 = a.to(torch.float8_e4m3fn)
        sa = torch.ones(m, k // 128, device="cuda", dtype=torch.float32)
        out: dict[str, Any] = {}
        out["bf16_act"] = latency_us(lambda: fp8_blockscale_gemm_sm90(a, w, None, ws_), True)
        try:
            out["fp8_act"] = latency_us(lambda: fp8_blockscale_gemm_sm90(a8, w, sa, ws_), True)
        except Exception as exc:
            out["fp8_act"] = f"{type(exc).__name__}: {exc}"[:400]
        return out

    step("mm_bf16", mm_bf16)
    step("bmm_fp8", bmm_fp8)
    step("fp8_blockscale_gemm_sm90", block_fp8)


if __name__ == "__main__":
    main()
