"""Combine run records into one: the cases and runs that the shard merge (bot/merge.py) and
the campaign's rounds merge (bot/campaign/merge.py) both hand to `finalize`.

Runs are rebuilt from each record's samples table (run indices shifted by an offset, so
rounds can be renumbered); a case is described by the first record that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from collector.aggregate import RunResult
from collector.caseplan import Case
from collector.ops import get_op
from collector.record.checkpoint import CheckpointState
from collector.record.files import sha256_file
from collector.record.reader import RunRecord
from collector.record.schema import RUN_JSON, STATUSES
from collector.record.writer import finalize

# run.json fields the writer sets itself: never copied from a source record.
WRITER_FIELDS = ("schema_version", "status", "counts", "files")


def case_from_row(op: str, row: dict[str, Any]) -> Case:
    return Case.build(op, get_op(op).case_params(row))


def _sample_groups(record: RunRecord, op: str) -> tuple[dict[str, list[Any]], dict[Any, list[int]]]:
    """The samples' columns and, by (case key, run), the row positions in sample order."""
    samples = record.samples[op]
    names = ["case_key", "run", "ms", "sm_mhz", "power_w", "throttled"]
    names += [c for c in ("clock_mhz",) if c in samples.column_names]
    cols = samples.select(names).to_pydict()
    keys = np.asarray(cols["case_key"], dtype=object)
    runs = np.asarray(cols["run"], dtype=np.int64)
    groups: dict[Any, list[int]] = {}
    for i in np.lexsort((np.arange(len(runs)), runs, keys)):
        groups.setdefault((str(keys[i]), int(runs[i])), []).append(int(i))
    return cols, groups


def record_runs(record: RunRecord, op: str, offset: int = 0) -> dict[str, list[RunResult]]:
    """The record's runs of one op rebuilt from its samples, run indices shifted by `offset`.

    A row's redo count and device time are kept on the case's first run, so the sums the
    writer computes come out the same.
    """
    perf = record.perf[op]
    wanted = ["case_key", "inner", "timing_mode", "kernel_source", "copies"]
    wanted += [
        c
        for c in ("redos", "device_seconds", "gpu_index", "gpu_uuid", "gpu_name")
        if c in perf.column_names
    ]
    info = {row["case_key"]: row for row in perf.select(wanted).to_pylist()}
    out: dict[str, list[RunResult]] = {}
    if record.samples[op].num_rows == 0:
        return out
    cols, groups = _sample_groups(record, op)
    for (key, run), rows in groups.items():
        row = info.get(key)
        if row is None:  # samples of a case without a row: the reader's anomaly, not ours
            continue
        first = key not in out
        series = {
            name: [cols[name][i] for i in rows] if name in cols else []
            for name in ("ms", "sm_mhz", "power_w", "clock_mhz")
        }
        out.setdefault(key, []).append(
            RunResult.from_json(
                {
                    "case_key": key,
                    "run": offset + run,
                    **series,
                    "throttled": [bool(cols["throttled"][i]) for i in rows],
                    "inner": int(row["inner"] or 1),
                    "timing_mode": str(row["timing_mode"]),
                    "kernel_source": str(row["kernel_source"]),
                    "copies": int(row["copies"] or 1),
                    "redos": int(row.get("redos") or 0) if first else 0,
                    "wall_s": float(row.get("device_seconds") or 0.0) if first else 0.0,
                    "device_index": row.get("gpu_index"),
                    "device_uuid": str(row.get("gpu_uuid") or ""),
                    "device_name": str(row.get("gpu_name") or ""),
                }
            )
        )
    return out


@dataclass
class Combined:
    """What the records hold together: every case once, every run, the failures."""

    cases: dict[str, Case] = field(default_factory=dict)
    state: CheckpointState = field(default_factory=CheckpointState)
    # How many of the records each failed case failed in.
    failed_in: dict[str, int] = field(default_factory=dict)

    def add(self, record: RunRecord, offset: int = 0, *, every_failure: bool = True) -> None:
        """Add one record's cases and runs (run indices shifted by `offset`) and failures:
        all of them, or with `every_failure=False` only a case's first failure."""
        for op in record.ops:
            for row in record.perf[op].to_pylist():
                self.cases.setdefault(row["case_key"], case_from_row(op, row))
            for key, results in record_runs(record, op, offset).items():
                self.state.runs.setdefault(key, []).extend(results)
        for failure in record.failures:
            self.cases.setdefault(failure.case_key, Case.build(failure.op, failure.params))
            if every_failure or failure.case_key not in self.failed_in:
                self.state.failures.append(failure)
            self.failed_in[failure.case_key] = self.failed_in.get(failure.case_key, 0) + 1

    def write(self, out: Path, meta: dict[str, Any], status: str) -> Path:
        """The combined record, written by the ordinary writer into `out`."""
        assert status in STATUSES
        out.mkdir(parents=True, exist_ok=True)
        finalize(out, meta, list(self.cases.values()), self.state, status)
        return out


def inherited_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A source record's run.json without the fields the writer sets again."""
    return {k: v for k, v in meta.items() if k not in WRITER_FIELDS}


def source_entry(record: RunRecord) -> dict[str, Any]:
    """How a combined record cites one of its sources (its run.json's checksum included)."""
    return {
        "path": str(record.path),
        "run_id": record.meta.get("run_id"),
        "status": record.status,
        "started_at": record.meta.get("started_at"),
        "finished_at": record.meta.get("finished_at"),
        "run_json_sha256": sha256_file(record.path / RUN_JSON),
    }
