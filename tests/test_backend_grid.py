"""The H200 backend-grid helpers (bench/gpu/backend_grid.py, bench/gpu/decode_gap.py) on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.gpu.backend_grid import grid, markdown
from bench.gpu.decode_gap import decode_cases, gap_table
from bench.gpu.gemm_gap import gap_table as gemm_gap_table
from bench.gpu.gemm_gap import gemm_cases
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import attention_params, failure, simulated_runs, write_record


def test_grid_has_a_cell_per_backend_dtype_and_head_with_rows_or_classified_failures(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    cases = [
        Case.build("generation_attention", attention_params(head_dim=h, attn_backend=b))
        for b in ("FLASH_ATTN", "FLASHINFER")
        for h in (128, 512)
    ]
    fa4 = next(c for c in cases if c.params["head_dim"] == 512 and "FLASH_ATTN" in c.key)
    run = write_record(
        tmp_path / "grid",
        cases,
        lambda c: None if c is fa4 else simulated_runs(rng, 0.01),
        failures=[
            failure(fa4, "No module named 'cutlass'", "ModuleNotFoundError", "backend_unavailable")
        ],
        kernel_for=lambda c: (
            "vllm_flashinfer_fidecode" if "FLASHINFER" in c.key else "vllm_flash_attn_fa3"
        ),
    )
    cells = grid([read_record(run)])
    assert len(cells) == 4
    failed = cells[("generation_attention", "FLASH_ATTN", "fp8", 512)]
    assert failed.rows == 0 and failed.failures == {"backend_unavailable": 1}
    fi = cells[("generation_attention", "FLASHINFER", "fp8", 512)]
    assert fi.rows == 1 and fi.kernels == {"vllm_flashinfer_fidecode"}
    text = markdown(cells)
    assert (
        "| generation_attention | FLASH_ATTN | fp8 | 512 | 1 | 0 | backend_unavailable 1 | - | - |"
        in text
    )


def test_decode_gap_joins_the_table_under_20_us_by_backend_and_variant() -> None:
    cases = decode_cases(["auto", "FLASHINFER"])
    assert len(cases) == 2 * 26 and cases[26].key.endswith(",attn_backend=FLASHINFER")
    fast, slow = cases[0].params, cases[1].params
    table = [{**fast, "latency": 0.010}, {**slow, "latency": 0.050}]  # the table times these
    rows: list[dict[str, Any]] = [
        {"params": fast, "variant": "ours", "latency_ms": 0.0085},
        {"params": fast, "variant": "quant", "latency_ms": 0.0100},
        {"params": slow, "variant": "ours", "latency_ms": 0.0400},  # over 20 us: left out
        {"params": fast, "variant": "ours_eager", "error": "boom"},  # no latency: left out
    ]
    out = {g["variant"]: g for g in gap_table(rows, table)}
    assert set(out) == {"ours", "quant"}
    assert out["ours"]["cases"] == 1 and abs(out["ours"]["median_gap_us"] - 1.5) < 1e-9
    assert abs(out["quant"]["median_ratio"] - 1.0) < 1e-9


def test_gemm_gap_takes_the_drawn_shapes_and_joins_the_table_by_dtype_and_variant() -> None:
    cases = gemm_cases(Path("bench/gpu/fleet_cases.yaml"))
    assert {c.params["gemm_dtype"] for c in cases} == {"bfloat16", "fp8"}
    fp8 = next(c.params for c in cases if c.params["gemm_dtype"] == "fp8")
    bf16 = next(c.params for c in cases if c.params["gemm_dtype"] == "bfloat16")
    table = [{**fp8, "latency": 0.010}, {**bf16, "latency": 0.020}]
    rows: list[dict[str, Any]] = [
        {"params": fp8, "variant": "ours", "latency_ms": 0.0088},
        {"params": fp8, "variant": "dynamic", "latency_ms": 0.0100},
        {"params": bf16, "variant": "ours", "latency_ms": 0.0200},
        {"params": {**fp8, "m": 999_999}, "variant": "ours", "latency_ms": 1.0},  # not in table
        {"params": bf16, "variant": "table", "error": "boom"},  # no latency: left out
    ]
    out = {(g["gemm_dtype"], g["variant"]): g for g in gemm_gap_table(rows, table)}
    assert set(out) == {("fp8", "ours"), ("fp8", "dynamic"), ("bfloat16", "ours")}
    assert out[("fp8", "ours")]["cases"] == 1
    assert abs(out[("fp8", "ours")]["median_gap_us"] - 1.2) < 1e-9
    assert abs(out[("fp8", "dynamic")]["median_ratio"] - 1.0) < 1e-9
