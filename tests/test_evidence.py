"""The evidence standard of a hand-made campaign, met by the reader and the comment.

- A case with a negative, zero, NaN, infinite or repeated sample is excluded as read, with
  one anomaly naming the file and the case, shown in the comment.
- Samples more than 15% from their case's median are counted per case; cases with many are
  shown in the comment.
- A case whose kernel changed is judged as a dispatch change, not as the same kernel moving.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bot.cli import app
from collector.record import RUN_JSON, read_record, sha256_file
from collector.sample_checks import count_outliers, many_outliers
from tests.factories import gemm_case, simulated_runs, write_record

runner = CliRunner()
CASES = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32)]
SAMPLES = "gemm_samples.parquet"


def _tamper(record: Path, edit: Callable[[pa.Table], pa.Table]) -> None:
    """Rewrite the samples table and its checksum (a record that was written this way)."""
    path = record / SAMPLES
    pq.write_table(edit(pq.read_table(path)), path)
    meta = json.loads((record / RUN_JSON).read_text())
    meta["files"][SAMPLES] = sha256_file(path)
    (record / RUN_JSON).write_text(json.dumps(meta))


def _set_ms(table: pa.Table, row: int, value: float) -> pa.Table:
    ms = table.column("ms").to_pylist()
    ms[row] = value
    return table.set_column(table.schema.get_field_index("ms"), "ms", pa.array(ms, pa.float64()))


def _first_row_of(table: pa.Table, key: str) -> int:
    return int(np.flatnonzero(np.asarray(table.column("case_key").to_pylist()) == key)[0])


@pytest.mark.parametrize(
    ("what", "edit"),
    [
        ("negative", lambda t, r: _set_ms(t, r, -0.5)),
        ("zero", lambda t, r: _set_ms(t, r, 0.0)),
        ("NaN", lambda t, r: _set_ms(t, r, float("nan"))),
        ("infinite", lambda t, r: _set_ms(t, r, float("inf"))),
        ("duplicated", lambda t, r: pa.concat_tables([t, t.slice(r, 1)])),
    ],
)
def test_a_bad_sample_excludes_its_case_with_one_line_naming_file_and_case(
    tmp_path: Path,
    rng: np.random.Generator,
    what: str,
    edit: Callable[[pa.Table, int], pa.Table],
) -> None:
    base = write_record(tmp_path / "base", CASES, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(tmp_path / "cand", CASES, lambda c: simulated_runs(rng, 1.0))
    bad = CASES[2].key
    _tamper(cand, lambda t: edit(t, _first_row_of(t, bad)))
    record = read_record(cand)
    [anomaly] = record.anomalies
    assert anomaly.kind == "excluded_case" and anomaly.file == SAMPLES
    assert anomaly.detail.startswith(f"{bad}: ") and "the case is excluded" in anomaly.detail
    expected = {"zero": "zero or negative", "negative": "zero or negative"}.get(what, what)
    if what == "duplicated":
        expected = "recorded 2 times"
    assert expected in anomaly.detail
    # The case is gone from both tables; every other case is as written.
    assert bad not in record.perf["gemm"].column("case_key").to_pylist()
    assert bad not in set(record.samples["gemm"].column("case_key").to_pylist())
    assert record.perf["gemm"].num_rows == len(CASES) - 1
    # Through the CLI: the comparison carries the anomaly and the comment shows it.
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(out)])
    assert result.exit_code == 0, result.output
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["anomalies"]["cand"] == [anomaly.to_json()]
    comment = tmp_path / "comment.md"
    assert runner.invoke(app, ["render", str(out), "--out", str(comment)]).exit_code == 0
    body = comment.read_text()
    assert "### Anomalies in the records" in body
    [row] = [line for line in body.splitlines() if "`excluded_case`" in line]
    assert row.startswith("| candidate |") and SAMPLES in row and bad in row


def test_a_clean_record_has_no_excluded_case(tmp_path: Path, rng: np.random.Generator) -> None:
    record = read_record(write_record(tmp_path / "r", CASES, lambda c: simulated_runs(rng, 1.0)))
    assert record.anomalies == [] and record.perf["gemm"].num_rows == len(CASES)


def test_the_outlier_rule_is_15_percent_from_the_pooled_median() -> None:
    runs = [np.array([1.0, 1.0, 1.0, 1.14]), np.array([1.0, 1.16, 0.84, 1.0])]
    assert count_outliers(runs) == (2, 8)  # 1.16 and 0.84; 1.14 is inside
    assert count_outliers([]) == (0, 0)
    assert many_outliers(1, 20) and not many_outliers(0, 20)
    assert not many_outliers(1, 100) and many_outliers(5, 100)


def test_injected_outliers_are_counted_and_shown_in_the_comment(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    noisy = CASES[3]

    def cand_samples(case: object) -> list[list[float]]:
        runs = simulated_runs(rng, 1.0)
        if case is noisy:  # two samples of every run 40% slow (a preempted GPU)
            for run in runs:
                run[0] *= 1.4
                run[1] *= 1.4
        return runs

    base = write_record(tmp_path / "base", CASES, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(tmp_path / "cand", CASES, cand_samples)
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(out)])
    assert result.exit_code == 0, result.output
    comparison = json.loads((out / "comparison.json").read_text())
    outliers = comparison["latency"]["outliers"]
    assert outliers["cases_with_many"] == 1
    [case] = outliers["cases"]
    assert (case["key"], case["side"], case["outliers"], case["samples"]) == (
        noisy.key,
        "cand",
        12,
        48,
    )
    # Counted per case in the case table too (every case, in cases.parquet).
    table = pq.read_table(out / "cases.parquet")
    row = table.filter(pc.equal(table.column("key"), noisy.key)).to_pylist()[0]
    assert (row["cand_outliers"], row["cand_samples"], row["base_outliers"]) == (12, 48, 0)
    comment = tmp_path / "comment.md"
    assert runner.invoke(app, ["render", str(out), "--out", str(comment)]).exit_code == 0
    body = comment.read_text()
    assert "### Outliers" in body and "more than 15% from the case's median" in body
    assert f"| `{noisy.key}` | candidate | 12 | 48 | 25% |" in body


def test_a_kernel_change_is_judged_as_a_dispatch_change(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    moved, slower = CASES[0], CASES[1]  # one changes kernel, one regresses on its own kernel
    base = write_record(tmp_path / "base", CASES, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp_path / "cand",
        CASES,
        lambda c: simulated_runs(rng, 1.12 if c in (moved, slower) else 1.0),
        kernel_for=lambda c: "cutlass_new" if c is moved else "torch.nn.functional.linear",
    )
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(out)])
    assert result.exit_code == 0, result.output
    comparison = json.loads((out / "comparison.json").read_text())
    cases = {c["key"]: c for c in comparison["latency"]["cases"]}
    assert cases[moved.key]["dispatch_change"] and not cases[slower.key]["dispatch_change"]
    reasons = comparison["verdict"]["reasons"]
    assert "1 case regressed" in reasons
    assert any(r.startswith("1 case slower after a dispatch change") for r in reasons)
    assert comparison["verdict"]["headline"].startswith(
        "1 regressed, 1 slower after a dispatch change"
    )
    comment = tmp_path / "comment.md"
    assert runner.invoke(app, ["render", str(out), "--out", str(comment)]).exit_code == 0
    rows = [line for line in comment.read_text().splitlines() if "| regressed" in line]
    rows = [r for r in rows if r.endswith(("| regressed |", "| regressed · dispatch change |"))]
    [across] = [r for r in rows if "dispatch change" in r]
    assert "m=1 " in across and "torch.nn.functional.linear → cutlass_new" in across
    [same] = [r for r in rows if "dispatch change" not in r]
    assert "m=2 " in same
