"""The flashinfer reference check (bench/flashinfer_reference.py) over real run records."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.flashinfer_reference import compare, load_rows, record_dir
from tests.factories import gemm_case, write_record

ROOT = Path(__file__).resolve().parent.parent
CASES = [gemm_case(m) for m in (16, 64, 256)] + [gemm_case(64, dtype="fp8")]


def _record(path: Path, backend: str, scale: float, kernel: str) -> Path:
    def samples(case: object) -> list[list[float]]:
        base = {16: 0.010, 64: 0.020, 256: 0.050}[case.params["m"]]  # type: ignore[attr-defined]
        return [[base * scale] * 4, [base * scale] * 4]

    return write_record(
        path,
        CASES,
        samples,
        kernel_for=lambda c: kernel,
        meta_extra={"backend": backend, "framework": backend, "framework_version": "0.6.12"},
    )


def _tar(directory: Path) -> Path:
    path = directory.with_suffix(".tar")
    with tarfile.open(path, "w") as tar:
        tar.add(directory, arcname=directory.name)
    return path


def test_records_from_dirs_and_tars_compare_per_dtype(tmp_path: Path) -> None:
    fi = _record(tmp_path / "fi", "flashinfer", 1.1, "flashinfer.mm_bf16[cudnn]")
    torch_rec = _record(tmp_path / "torch", "torch", 1.0, "torch.nn.functional.linear")
    ours, labels = load_rows([_tar(fi)])
    assert labels == ["flashinfer 0.6.12"]
    reference, _ = load_rows([torch_rec])
    bf16, fp8 = compare(ours, reference)
    assert (bf16.dtype, bf16.rows, bf16.matched) == ("bfloat16", 3, 3)
    assert bf16.median_ratio == pytest.approx(1.1)
    assert bf16.kernel_pairs == {"flashinfer.mm_bf16[cudnn] | torch.nn.functional.linear": 3}
    assert fp8.matched == 1 and fp8.verdict == "outside 5% at the median"


def test_a_tar_without_exactly_one_record_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="holds 0 run records"), record_dir(_tar(empty)):
        pass
    junk = tmp_path / "junk.tar"
    junk.write_text("not a tar")
    with pytest.raises(SystemExit, match="neither a run record"), record_dir(junk):
        pass


@pytest.mark.slow
def test_cli_writes_markdown_and_json_against_records_and_tables(tmp_path: Path) -> None:
    fi = _record(tmp_path / "fi", "flashinfer", 0.9, "flashinfer.bmm_fp8[cublas]")
    torch_rec = _record(tmp_path / "torch", "torch", 1.0, "torch._scaled_mm")
    tables = tmp_path / "tables"
    tables.mkdir()
    row = {"gemm_dtype": "bfloat16", "m": 64, "n": 1024, "k": 1024}
    pq.write_table(
        pa.Table.from_pylist([{**row, "latency": 0.018, "kernel_source": "cublas"}]),
        tables / "h200_sxm_gemm_vllm_0.24.0_gemm_perf.parquet",
    )
    md, js = tmp_path / "out.md", tmp_path / "out.json"
    cmd = [sys.executable, "-m", "bench.flashinfer_reference", str(_tar(fi))]
    cmd += ["--against", str(torch_rec), "--reference-dir", str(tables)]
    cmd += ["--markdown", str(md), "--json", str(js)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    assert "### flashinfer vs torch 0.6.12 (torch)" in text
    assert "### flashinfer vs aiconfigurator H200 vLLM 0.24.0 tables" in text
    data = json.loads(js.read_text())
    table = data["aiconfigurator H200 vLLM 0.24.0 tables"]
    assert [(g["dtype"], g["matched"]) for g in table] == [("bfloat16", 1), ("fp8", 0)]
    assert table[0]["median_ratio"] == pytest.approx(0.9 * 0.020 / 0.018)
