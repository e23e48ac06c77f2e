"""`finalize`: the checkpoint into parquet tables, failures.json and, last, run.json."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from collector.aggregate import RunResult, summarise
from collector.caseplan import Case
from collector.errors import RecordWriteError
from collector.ops import get_op
from collector.peaks import roofline_pct
from collector.record.checkpoint import CheckpointState
from collector.record.files import (
    _fsync_path,
    _json_bytes,
    _stage_bytes,
    _stage_parquet,
    sha256_file,
    write_failure,
)
from collector.record.schema import (
    CHECKPOINT,
    FAILURES_JSON,
    RUN_JSON,
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    STATUSES,
    perf_file,
    perf_schema,
    samples_file,
)


def build_tables(
    cases: Iterable[Case],
    runs: dict[str, list[RunResult]],
    identity: dict[str, str],
    unverified: Collection[str] = (),
) -> dict[str, tuple[pa.Table, pa.Table]]:
    """Per op, the perf table (one row per case with results) and the samples table."""
    by_op: dict[str, list[Case]] = {}
    for case in cases:
        by_op.setdefault(case.op, []).append(case)
    out: dict[str, tuple[pa.Table, pa.Table]] = {}
    for op, op_cases in by_op.items():
        spec = get_op(op)
        perf_rows: list[dict[str, Any]] = []
        sample_cols: dict[str, list[Any]] = {name: [] for name in SAMPLE_SCHEMA.names}
        for case in op_cases:
            case_runs = sorted(runs.get(case.key, []), key=lambda r: r.run)
            if not case_runs:
                continue
            stats = summarise(case_runs)
            params = case.params
            flops, nbytes = spec.flops(params), spec.bytes_moved(params)
            seconds = stats["latency"] / 1e3
            pct, pct_clock = roofline_pct(
                identity["device"],
                spec.compute_dtype_of(params),
                flops,
                nbytes,
                stats["latency"],
                stats["sm_mhz_mean"],
            )
            row = {
                "framework": identity["framework"],
                "version": identity["version"],
                "device": identity["device"],
                "op_name": op,
                "kernel_source": stats.pop("kernel_source"),
                **spec.with_defaults(params),
                **stats,
                "case_key": case.key,
                "flops": flops,
                "bytes": nbytes,
                "tflops": flops / seconds / 1e12 if seconds > 0 else None,
                "gbps": nbytes / seconds / 1e9 if seconds > 0 else None,
                "roofline_pct": pct,
                "roofline_pct_at_clock": pct_clock,
                "unverified": case.key in unverified,
            }
            perf_rows.append(row)
            for r in case_runs:
                for i, ms in enumerate(r.ms):
                    sample_cols["case_key"].append(case.key)
                    sample_cols["run"].append(r.run)
                    sample_cols["sample"].append(i)
                    sample_cols["ms"].append(ms)
                    sample_cols["sm_mhz"].append(r.sm_mhz[i])
                    sample_cols["power_w"].append(r.power_w[i])
                    sample_cols["throttled"].append(r.throttled[i])
                    sample_cols["clock_mhz"].append(
                        r.clock_mhz[i] if i < len(r.clock_mhz) else None
                    )
        schema = perf_schema(op)
        perf = pa.Table.from_pylist(perf_rows, schema=schema)
        samples = pa.Table.from_pydict(sample_cols, schema=SAMPLE_SCHEMA)
        out[op] = (perf, samples)
    return out


def _counts_per_op(
    ops: list[str], cases: list[Case], state: CheckpointState
) -> dict[str, dict[str, int]]:
    """Planned, attempted, ok and failed cases of each op (a case that failed in any run is
    failed)."""
    failed_keys = state.failed_keys
    per_op = {}
    for op in ops:
        keys = [c.key for c in cases if c.op == op]
        ok = sum(1 for k in keys if k in state.runs and k not in failed_keys)
        failed = sum(1 for k in keys if k in failed_keys)
        attempted = sum(1 for k in keys if k in state.runs or k in failed_keys)
        per_op[op] = {"planned": len(keys), "attempted": attempted, "ok": ok, "failed": failed}
    return per_op


def finalize(
    out_dir: Path,
    meta: dict[str, Any],
    cases: list[Case],
    state: CheckpointState,
    status: str,
) -> Path:
    """Write the record's tables, failures.json and, last, run.json. Safe to call again.

    Every file is first written under a temporary name and fsynced; only when all of them
    are on disk are they renamed into place, run.json last, and only then is a complete run's
    checkpoint removed. A write that fails (a full disk) leaves the previous record as it was,
    consistent with its checksums, and the checkpoint untouched: `--resume` continues.
    """
    assert status in STATUSES
    identity = {
        "framework": str(meta["framework"]),
        "version": str(meta["framework_version"]),
        "device": str(meta["device"].get("name", "unknown")),
    }
    # A case that failed in any run is a failure, not a row built from its earlier runs.
    failed_keys = state.failed_keys
    ok_runs = {k: v for k, v in state.runs.items() if k not in failed_keys}
    unverified = set((meta.get("rules") or {}).get("unverified_keys", []))
    tables = build_tables(cases, ok_runs, identity, unverified)
    # Ops with no rows still get (empty) tables: a zero-row op is a finding, not a gap.
    for op in meta["ops"]:
        if op not in tables:
            tables[op] = (perf_schema(op).empty_table(), SAMPLE_SCHEMA.empty_table())
    per_op = _counts_per_op(meta["ops"], cases, state)
    counts = {
        key: sum(v[key] for v in per_op.values())
        for key in ("planned", "attempted", "ok", "failed")
    }
    files: dict[str, str] = {}
    staged: list[tuple[Path, Path]] = []
    target = out_dir
    try:
        for op, (perf, samples) in tables.items():
            for name, table in ((perf_file(op), perf), (samples_file(op), samples)):
                target = out_dir / name
                staged.append((_stage_parquet(target, table), target))
                files[name] = sha256_file(staged[-1][0])
        target = out_dir / FAILURES_JSON
        staged.append(
            (_stage_bytes(target, _json_bytes([f.to_json() for f in state.failures])), target)
        )
        files[FAILURES_JSON] = sha256_file(staged[-1][0])
        record = {
            **meta,
            "schema_version": SCHEMA_VERSION,
            "status": status,
            "counts": {**counts, "per_op": per_op},
            "files": dict(sorted(files.items())),
        }
        target = out_dir / RUN_JSON
        staged.append((_stage_bytes(target, _json_bytes(record)), target))
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise RecordWriteError(
            f"cannot write the run record: {write_failure(target, exc)}; the record in "
            f"{out_dir} keeps its previous state and the checkpoint every finished run: "
            "free space and rerun with --resume"
        ) from None
    try:
        for tmp, final in staged:  # run.json is the last rename: the record's commit point
            tmp.replace(final)
        _fsync_path(out_dir, directory=True)
    except OSError as exc:
        raise RecordWriteError(
            f"cannot write the run record: {write_failure(out_dir, exc)}; the checkpoint "
            "keeps every finished run: rerun with --resume"
        ) from None
    checkpoint = out_dir / CHECKPOINT
    if status == "complete" and checkpoint.exists():
        checkpoint.unlink()
    return out_dir / RUN_JSON
