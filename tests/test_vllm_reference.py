"""The realism check of vllm rows against a field table (bench/vllm_reference.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.vllm_reference import compare_rows, markdown, rows_from_smoke


def _gemm(dtype: str, m: int, latency: float, kernel: str) -> dict[str, object]:
    return {
        "gemm_dtype": dtype,
        "m": m,
        "n": 4096,
        "k": 4096,
        "latency": latency,
        "kernel_source": kernel,
    }


def test_ratios_and_kernel_agreement_per_dtype() -> None:
    ref = [_gemm("bfloat16", m, 1.0, "torch.nn.functional.linear") for m in (1, 2, 3, 4)]
    ref += [_gemm("fp8", 1, 2.0, "CutlassFP8ScaledMMLinearKernel")]
    ours = [
        _gemm("bfloat16", 1, 1.02, "torch.nn.functional.linear"),
        _gemm("bfloat16", 2, 0.97, "torch.nn.functional.linear"),
        _gemm("bfloat16", 3, 1.30, "torch.nn.functional.linear"),
        _gemm("bfloat16", 99, 5.0, "torch.nn.functional.linear"),  # not in the table
        _gemm("fp8", 1, 2.4, "torch._scaled_mm"),
    ]
    bf16, fp8 = compare_rows("gemm", ours, ref)
    assert (bf16.dtype, bf16.rows, bf16.matched) == ("bfloat16", 4, 3)
    assert bf16.median_ratio == pytest.approx(1.02)
    assert bf16.within_5pct == pytest.approx(2 / 3)
    assert bf16.kernel_agree == 3 and bf16.verdict == "within 5% at the median"
    assert fp8.median_ratio == pytest.approx(1.2) and fp8.kernel_agree == 0
    assert fp8.verdict == "outside 5% at the median"
    assert fp8.kernel_pairs == {"torch._scaled_mm | CutlassFP8ScaledMMLinearKernel": 1}
    table = markdown([bf16, fp8])
    assert "| gemm | bfloat16 | 4 (3) | 1.020 |" in table and "0/1" in table


def test_smoke_lines_become_rows(tmp_path: Path) -> None:
    params = {"gemm_dtype": "fp8", "m": 1, "n": 4096, "k": 4096}
    lines = [
        {"op": "gemm", "params": params, "latency_ms": 0.01, "kernel_source": "K"},
        {
            "op": "gemm",
            "params": params,
            "latency_ms": 0.02,
            "kernel_source": "K",
            "kv_block_size": 16,
        },
        {"op": "gemm", "params": params, "error": "boom"},
    ]
    path = tmp_path / "smoke.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    rows = rows_from_smoke(path)
    assert rows == {"gemm": [{**params, "latency": 0.01, "kernel_source": "K"}]}
