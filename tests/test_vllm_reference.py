"""The realism check of vllm rows against a field table (bench/vllm_reference.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.vllm_reference import compare_rows, markdown, offset_fit, rows_from_smoke


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


def test_offset_fit_tells_a_per_token_pass_from_a_fixed_cost() -> None:
    shapes = [(m, n, k) for m in (16, 512, 4096) for n, k in ((1024, 512), (4096, 7168))]
    shapes += [(2048, 128, 32), (32768, 1536, 512)]

    def row(dtype: str, m: int, n: int, k: int, latency: float) -> dict[str, object]:
        return {"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": latency}

    ours, table = [], []
    for i, (m, n, k) in enumerate(shapes):
        ms = 0.01 + 0.002 * i
        for dtype, added_us in (
            ("fp8", 1.5 * m * k / 1e6 + 5.0),  # a pass over m x k plus a few launches
            ("int8", 4.0 * m / 1e3 + 1.3 * m * k / 1e6 + 0.5),  # per row and per element
            ("fp8_block", 50.0 + (-1) ** i * 0.5),  # a fixed per-call cost, some noise
            ("bfloat16", 0.0),
        ):
            ours.append(row(dtype, m, n, k, ms))
            table.append(row(dtype, m, n, k, ms + added_us / 1e3))
    fits = {f.dtype: f for f in offset_fit(ours, table)}
    fp8, per_token = fits["fp8"], fits["int8"]
    assert fp8.matched == len(shapes)
    assert fp8.per_k_tokens_us == pytest.approx(0.0, abs=1e-9)
    assert fp8.slope_us_per_m == pytest.approx(1.5)
    assert fp8.intercept_us == pytest.approx(5.0) and fp8.r2 == pytest.approx(1.0)
    # Rows and elements apart: a fit on m x k alone would leave most of this gap unexplained.
    assert per_token.per_k_tokens_us == pytest.approx(4.0)
    assert per_token.slope_us_per_m == pytest.approx(1.3)
    assert per_token.intercept_us == pytest.approx(0.5) and per_token.r2 == pytest.approx(1.0)
    assert fits["fp8_block"].intercept_us == pytest.approx(50.0, abs=1.0)
    assert abs(fits["fp8_block"].slope_us_per_m) < 0.1 and fits["fp8_block"].r2 < 0.5
    assert "bfloat16" not in fits  # no gap at all: nothing to fit (zero variance)


def test_offset_fit_falls_back_to_a_line_when_m_and_m_k_move_together() -> None:
    # One k for every shape: m and m x k are proportional, so only the line is fitted.
    ms = (8, 64, 512, 4096)
    ours = [{"gemm_dtype": "fp8", "m": m, "n": 256, "k": 1024, "latency": 0.01} for m in ms]
    table = [
        {**r, "latency": 0.01 + (2.0 * m * 1024 / 1e6 + 3.0) / 1e3}
        for r, m in zip(ours, ms, strict=True)
    ]
    (fit,) = offset_fit(ours, table)
    assert fit.per_k_tokens_us == 0.0
    assert fit.slope_us_per_m == pytest.approx(2.0)
    assert fit.intercept_us == pytest.approx(3.0)
