"""import-aic: the field's perf tables as run records (tests make their own tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_runs
from bot.importers.aic import import_aic
from collector.caseplan import Case
from collector.errors import UserError
from collector.record import read_record
from tests.schema_check import assert_valid_comparison

runner = CliRunner()
IDENTITY = {"framework": "VLLM", "device": "NVIDIA H200", "op_name": "gemm"}
# Per dtype: (kernel in the old table, kernel in the new one, latency factor new/old).
DTYPES = {
    "bfloat16": ("vllm_default", "torch.nn.functional.linear", 0.9),
    "fp8": ("vllm_default", "CutlassFP8ScaledMMLinearKernel", 1.2),
}


def gemm_table(path: Path, version: str, new: bool, extra: Sequence[dict[str, Any]] = ()) -> Path:
    rows = []
    for dtype, (old_kernel, new_kernel, factor) in DTYPES.items():
        for m in (1, 16, 256):
            for n in (1024, 4096):
                base = 0.01 * m + 0.002 * n / 1024
                rows.append(
                    {
                        **IDENTITY,
                        "version": version,
                        "kernel_source": new_kernel if new else old_kernel,
                        "gemm_dtype": dtype,
                        "m": m,
                        "n": n,
                        "k": 2048,
                        "latency": base * (factor if new else 1.0),
                    }
                )
    rows += list(extra)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def attention_table(path: Path, op: str) -> Path:
    rows = [
        {
            **IDENTITY,
            "op_name": op,
            "version": "0.24.0",
            "kernel_source": "vllm_flash_attn_fa3",
            "batch_size": b,
            "isl": 1 if op == "generation_attention" else 1024,
            "num_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "beam_width": 1,
            "attn_dtype": "bfloat16",
            "kv_cache_dtype": kv,
            "step": 512 if op == "generation_attention" else 0,
            "window_size": 0,
            "latency": 0.02 * b,
        }
        for b in (1, 8)
        for kv in ("bfloat16", "fp8")
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_import_writes_a_valid_record_with_our_case_keys(tmp_path: Path) -> None:
    table = gemm_table(tmp_path / "x_gemm_perf.parquet", "0.24.0", new=True)
    record = read_record(import_aic([table], tmp_path / "run"))
    assert record.meta["source"] == "aiconfigurator"
    assert record.meta["status"] == "complete"
    assert (record.meta["backend"], record.meta["framework_version"]) == ("vllm", "0.24.0")
    assert record.meta["device"]["name"] == "NVIDIA H200"
    assert record.meta["counts"]["per_op"]["gemm"]["planned"] == 12
    perf = record.perf["gemm"]
    expected = Case.build("gemm", {"gemm_dtype": "fp8", "m": 16, "n": 4096, "k": 2048}).key
    assert expected in perf.column("case_key").to_pylist()
    assert record.samples["gemm"].num_rows == 0
    assert record.anomalies == []


def test_two_imported_tables_compare_by_size_with_dispatch_findings(tmp_path: Path) -> None:
    old = gemm_table(tmp_path / "old_gemm_perf.parquet", "0.19.0", new=False)
    extra = [
        {
            **IDENTITY,
            "version": "0.24.0",
            "kernel_source": "k",
            "gemm_dtype": "fp8",
            "m": 9,
            "n": 9,
            "k": 9,
            "latency": 0.01,
        }
    ]
    new = gemm_table(tmp_path / "new_gemm_perf.parquet", "0.24.0", new=True, extra=extra)
    base = read_record(import_aic([old], tmp_path / "a"))
    cand = read_record(import_aic([new], tmp_path / "b"))
    result = compare_runs(base, cand)
    data = assert_valid_comparison(result.data)
    assert data["baseline"]["kind"] == "imported-table"
    assert data["baseline"]["has_samples"] is False
    summary = data["latency"]["summary"]
    assert (summary["matched"], summary["added"], summary["removed"]) == (12, 1, 0)
    assert summary["size_only"] == 12
    assert summary["verdicts"] == {"regressed": 6, "improved": 6, "inconclusive": 0, "same": 0}
    by_dtype = {g["dtype"]: g for g in data["latency"]["by_dtype"]}
    assert math.isclose(by_dtype["bfloat16"]["geomean"], 0.9)
    assert math.isclose(by_dtype["fp8"]["geomean"], 1.2)
    changes = {(d["from"], d["to"]): d["count"] for d in data["latency"]["dispatch_changes"]}
    assert changes == {
        ("vllm_default", "torch.nn.functional.linear"): 6,
        ("vllm_default", "CutlassFP8ScaledMMLinearKernel"): 6,
    }
    assert any("judged by size alone" in w for w in data["warnings"])
    assert all(
        c["method"] == "size-only" and c["lo"] == c["ratio"] for c in data["latency"]["cases"]
    )


def test_attention_tables_and_the_collection_meta_sidecar(tmp_path: Path) -> None:
    ctx = attention_table(
        tmp_path / "h200_vllm_context_attention_perf.parquet", "context_attention"
    )
    gen = attention_table(
        tmp_path / "h200_vllm_generation_attention_perf.parquet", "generation_attention"
    )
    (tmp_path / "h200_vllm_collection_meta.yaml").write_text(
        "schema_version: 1\nruntime: {framework: vllm, version: 0.24.0}\n"
        "tables:\n  context_attention_perf: {status: complete}\n"
        "  generation_attention_perf: {status: partial}\n"
    )
    record = read_record(import_aic([ctx, gen], tmp_path / "run"))
    assert record.ops == ["context_attention", "generation_attention"]
    assert record.status == "partial"
    assert record.meta["imported"]["incomplete_tables"] == ["generation_attention_perf"]


def test_duplicates_and_bad_latencies_become_anomalies(tmp_path: Path) -> None:
    dup = {
        **IDENTITY,
        "version": "0.24.0",
        "kernel_source": "k",
        "gemm_dtype": "fp8",
        "m": 1,
        "n": 1024,
        "k": 2048,
        "latency": 0.5,
    }
    nan = {**dup, "m": 7, "latency": float("nan")}
    table = gemm_table(tmp_path / "g_gemm_perf.parquet", "0.24.0", new=True, extra=[dup, nan])
    record = read_record(import_aic([table], tmp_path / "run"))
    assert sorted(a.kind for a in record.anomalies) == ["duplicate_case", "invalid_latency"]
    assert record.perf["gemm"].num_rows == 12


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_bad_tables_are_one_line_errors(tmp_path: Path) -> None:
    good = gemm_table(tmp_path / "good_gemm_perf.parquet", "0.24.0", new=True)
    other = gemm_table(tmp_path / "other_gemm_perf.parquet", "0.19.0", new=True)
    row = {
        **IDENTITY,
        "version": "0.24.0",
        "kernel_source": "k",
        "gemm_dtype": "fp8",
        "m": 1,
        "n": 1,
        "k": 1,
        "latency": 1.0,
    }
    no_k = _write(tmp_path / "nok.parquet", [{k: v for k, v in row.items() if k != "k"}])
    unknown = _write(tmp_path / "conv.parquet", [{**row, "op_name": "conv"}])
    no_latency = _write(
        tmp_path / "nolat.parquet", [{k: v for k, v in row.items() if k != "latency"}]
    )
    cases = [
        ([str(no_k)], "nok.parquet: missing column 'k' of op 'gemm'"),
        ([str(unknown)], "conv.parquet: column 'op_name' has unknown op 'conv'"),
        ([str(no_latency)], "nolat.parquet: missing column 'latency'"),
        ([str(good), str(other)], "column 'version' must hold one value"),
        ([str(tmp_path / "none.parquet")], "none.parquet: perf table not found"),
    ]
    for i, (tables, needle) in enumerate(cases):
        result = runner.invoke(app, ["import-aic", *tables, "--out", str(tmp_path / f"o{i}")])
        assert result.exit_code == 2, result.output
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    with pytest.raises(UserError, match="not empty"):
        import_aic([good], tmp_path)


def test_cli_import_then_compare(tmp_path: Path) -> None:
    old = gemm_table(tmp_path / "old_gemm_perf.parquet", "0.19.0", new=False)
    new = gemm_table(tmp_path / "new_gemm_perf.parquet", "0.24.0", new=True)
    for table, out in ((old, "a"), (new, "b")):
        result = runner.invoke(app, ["import-aic", str(table), "--out", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    # Every case changed kernel (vllm_default -> the named kernels): dispatch changes.
    assert result.output.startswith("red: 6 slower after a dispatch change, 6 improved")
    data = assert_valid_comparison(tmp_path / "c")
    assert data["candidate"]["source"] == "aiconfigurator"
    cases = pq.read_table(tmp_path / "c" / "cases.parquet")
    assert cases.num_rows == 12
    assert set(cases.column("param_gemm_dtype").to_pylist()) == {"bfloat16", "fp8"}
