from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.stats import trim_mean

from collector.errors import RunRecordError
from collector.record import CHECKPOINT, Checkpoint, CheckpointState, read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record


def _record(tmp_path: Path, rng: np.random.Generator) -> Path:
    cases = [gemm_case(m) for m in (1, 16, 256)]
    return write_record(
        tmp_path / "run",
        cases,
        lambda c: None if c.params["m"] == 256 else simulated_runs(rng, 0.1 * c.params["m"]),
        failures=[failure(cases[2], "CUDA error: an illegal memory access", cls="cuda_fatal")],
    )


def test_round_trip_keeps_rows_samples_failures_and_counts(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    rec = read_record(_record(tmp_path, rng))
    perf = rec.perf["gemm"]
    assert perf.num_rows == 2
    assert set(perf.column("case_key").to_pylist()) == {gemm_case(1).key, gemm_case(16).key}
    assert rec.samples["gemm"].num_rows == 2 * 6 * 8
    assert [f.classification for f in rec.failures] == ["cuda_fatal"]
    counts = rec.meta["counts"]
    assert counts["planned"] == 3 and counts["ok"] == 2 and counts["failed"] == 1
    assert rec.anomalies == []
    row = perf.to_pylist()[0]
    # Latency is the 10% trimmed mean of all the stored samples of the case, over its runs.
    samples = rec.samples["gemm"].to_pylist()
    mine = [s["ms"] for s in samples if s["case_key"] == row["case_key"]]
    assert len(mine) == 6 * 8
    assert row["latency"] == pytest.approx(float(trim_mean(mine, 0.1)), rel=1e-12)
    assert row["p10"] <= row["latency"] <= row["p90"]
    assert row["tflops"] == pytest.approx(row["flops"] / (row["latency"] / 1e3) / 1e12)


def test_checksum_mismatch_is_a_one_line_error_naming_the_file(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    path = _record(tmp_path, rng)
    failures = path / "failures.json"
    failures.write_text(failures.read_text().replace("illegal", "legal"))
    with pytest.raises(RunRecordError, match=r"failures\.json: checksum mismatch"):
        read_record(path)


def test_missing_file_unknown_schema_and_missing_dir(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    path = _record(tmp_path, rng)
    (path / "gemm_samples.parquet").unlink()
    with pytest.raises(
        RunRecordError, match=r"gemm_samples\.parquet: listed in run\.json but missing"
    ):
        read_record(path)
    meta = json.loads((path / "run.json").read_text())
    meta["schema_version"] = 99
    (path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunRecordError, match="unknown schema_version 99"):
        read_record(path)
    with pytest.raises(RunRecordError, match="not found"):
        read_record(tmp_path / "nope")
    (path / "run.json").write_text("{")
    with pytest.raises(RunRecordError, match="not valid JSON"):
        read_record(path)


def test_duplicate_and_invalid_rows_become_anomalies_not_crashes(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    import pyarrow as pa

    from collector.record import sha256_file

    path = _record(tmp_path, rng)
    perf_path = path / "gemm_perf.parquet"
    table = pq.read_table(perf_path)
    bad = table.slice(0, 1).set_column(
        table.schema.get_field_index("latency"), "latency", pa.array([float("nan")])
    )
    bad = bad.set_column(table.schema.get_field_index("case_key"), "case_key", pa.array(["gemm:x"]))
    pq.write_table(pa.concat_tables([table, table.slice(1, 1), bad]), perf_path)
    meta = json.loads((path / "run.json").read_text())
    meta["files"]["gemm_perf.parquet"] = sha256_file(perf_path)
    (path / "run.json").write_text(json.dumps(meta))
    (path / "stray.txt").write_text("x")
    rec = read_record(path)
    kinds = sorted(a.kind for a in rec.anomalies)
    assert kinds == ["duplicate_case", "extra_file", "invalid_latency"]
    assert rec.perf["gemm"].num_rows == 2


def test_checkpoint_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT
    cp = Checkpoint(path)
    cp.append(
        "run",
        {
            "case_key": "gemm:a",
            "run": 0,
            "ms": [1.0],
            "sm_mhz": [None],
            "power_w": [None],
            "throttled": [False],
            "inner": 1,
            "timing_mode": "cpu",
            "kernel_source": "k",
            "copies": 1,
        },
    )
    cp.close()
    with path.open("a") as fh:
        fh.write('{"kind": "run", "case_ke')
    state = CheckpointState.load(path)
    assert list(state.runs) == ["gemm:a"]


def test_partial_status_is_kept(tmp_path: Path, rng: np.random.Generator) -> None:
    path = write_record(
        tmp_path / "p", [gemm_case(1)], lambda c: simulated_runs(rng, 1.0), status="partial"
    )
    assert read_record(path).status == "partial"


def test_a_torn_last_line_is_cut_before_new_entries_are_appended(tmp_path: Path) -> None:
    """A crash mid-append, then a resume that appends again: the new entry must not fuse with
    the torn line (it would be unreadable, and its run measured a second time)."""
    path = tmp_path / CHECKPOINT
    entry = {
        "case_key": "gemm:a", "run": 0, "ms": [1.0], "sm_mhz": [None], "power_w": [None],
        "throttled": [False], "inner": 1, "timing_mode": "cpu", "kernel_source": "k", "copies": 1,
    }  # fmt: skip
    cp = Checkpoint(path)
    cp.append("run", entry)
    cp.close()
    with path.open("a") as fh:
        fh.write('{"kind": "run", "case_key": "gemm:b", "ru')  # the crash
    cp = Checkpoint(path)  # the resume
    cp.append("run", {**entry, "run": 1})
    cp.close()
    state = CheckpointState.load(path)
    assert [r.run for r in state.runs["gemm:a"]] == [0, 1]
    assert path.read_text().count("\n") == 2 and "gemm:b" not in path.read_text()


def test_measured_clocks_reach_the_samples_table_and_old_records_still_read(
    tmp_path: Path,
) -> None:
    import pyarrow.parquet as pq

    from collector.aggregate import RunResult
    from collector.record import CheckpointState, finalize, read_record, sha256_file
    from tests.factories import gemm_case

    case = gemm_case(16, 1024)
    state = CheckpointState()
    state.runs[case.key] = [
        RunResult(
            case_key=case.key,
            run=0,
            ms=[0.01, 0.011],
            sm_mhz=[1980.0, 1980.0],
            power_w=[300.0, 300.0],
            throttled=[False, False],
            inner=64,
            timing_mode="graph",
            kernel_source="k",
            copies=6,
            clock_mhz=[1961.5, None],
        )
    ]
    meta = {
        "run_id": "r",
        "backend": "torch",
        "framework": "torch",
        "framework_version": "2.11.0",
        "ops": ["gemm"],
        "device": {"name": "GPU"},
    }
    (tmp_path / "new").mkdir()
    finalize(tmp_path / "new", meta, [case], state, "complete")
    rec = read_record(tmp_path / "new")
    assert rec.samples["gemm"].column("clock_mhz").to_pylist() == [1961.5, None]
    # A record written before the column existed reads as before.
    old = tmp_path / "new" / "gemm_samples.parquet"
    pq.write_table(pq.read_table(old).drop_columns(["clock_mhz"]), old)
    run_json = tmp_path / "new" / "run.json"
    doc = json.loads(run_json.read_text())
    doc["files"][old.name] = sha256_file(old)
    run_json.write_text(json.dumps(doc))
    assert "clock_mhz" not in read_record(tmp_path / "new").samples["gemm"].column_names
