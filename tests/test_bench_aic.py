"""Real scale (issue 5): the vLLM 0.19.0 and 0.24.0 H200 GEMM tables, imported and compared.

Reads the tables from the folder `$COLLECTBOT_AIC_DATA` names, at run time (they are never
copied into the repository); skipped where it is unset or lacks them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import reference_data
from bench.bench_import_aic import NEW, OLD, run
from tests.schema_check import assert_valid_comparison

DATA = reference_data.default_dir() or Path("unset")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DATA / OLD).is_file() or not (DATA / NEW).is_file(),
        reason=f"{reference_data.ENV}: the aiconfigurator tables are not there",
    ),
]


def test_import_and_compare_100k_cases(tmp_path: Path) -> None:
    figures = run(DATA, tmp_path)
    assert figures["rows"] == {"0.19.0": 101004, "0.24.0": 107225}
    assert (figures["matched"], figures["added"], figures["removed"]) == (101003, 6222, 1)
    dtypes = {g["dtype"] for g in figures["by_dtype"]}
    assert dtypes == {"bfloat16", "fp8", "fp8_block"}
    changes = {d["to"] for d in figures["dispatch_changes"]}
    assert "DeepGemmFp8BlockScaledMMKernel" in changes
    data = assert_valid_comparison(tmp_path / "cmp")
    assert len(data["latency"]["cases"]) <= 1500  # notable cases only; all are in the parquet
    assert (tmp_path / "cmp" / "comparison.json").stat().st_size < 2_000_000
    assert int(figures["comment_chars"]) < 65536
