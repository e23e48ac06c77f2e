"""The run record's layout: file names, table columns and their types."""

from __future__ import annotations

import pyarrow as pa

from collector.ops import get_op

SCHEMA_VERSION = 1
RUN_JSON = "run.json"
FAILURES_JSON = "failures.json"
CHECKPOINT = "checkpoint.jsonl"
STATUSES = ("complete", "partial", "failed")

# Columns every perf table has, after the identity columns and the op's case fields.
PERF_STAT_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("latency", pa.float64()),
    ("case_key", pa.string()),
    ("p10", pa.float64()),
    ("p90", pa.float64()),
    ("robust_cv", pa.float64()),
    ("run_cv", pa.float64()),
    ("runs", pa.int32()),
    ("samples", pa.int32()),
    ("inner", pa.int32()),
    ("copies", pa.int32()),
    ("timing_mode", pa.string()),
    ("sm_mhz_mean", pa.float64()),
    ("throttled", pa.bool_()),
    ("redos", pa.int32()),
    ("retakes", pa.int32()),
    ("placements", pa.int32()),
    ("processes", pa.int32()),
    ("device_seconds", pa.float64()),
    ("flops", pa.float64()),
    ("bytes", pa.float64()),
    ("tflops", pa.float64()),
    ("gbps", pa.float64()),
    ("roofline_pct", pa.float64()),
    ("roofline_pct_at_clock", pa.float64()),
    ("unverified", pa.bool_()),
    # The device that measured the case (records before docs/fleet.md lack them).
    ("gpu_index", pa.int32()),
    ("gpu_uuid", pa.string()),
    ("gpu_name", pa.string()),
)
IDENTITY_COLUMNS = ("framework", "version", "device", "op_name", "kernel_source")
SAMPLE_SCHEMA = pa.schema(
    [
        ("case_key", pa.string()),
        ("run", pa.int32()),
        ("sample", pa.int32()),
        ("ms", pa.float64()),
        ("sm_mhz", pa.float64()),
        ("power_w", pa.float64()),
        ("throttled", pa.bool_()),
        # The SM clock measured on the GPU around the sample (records before 2026-11-30
        # lack the column).
        ("clock_mhz", pa.float64()),
    ]
)
_SAMPLE_REQUIRED = tuple(n for n in SAMPLE_SCHEMA.names if n != "clock_mhz")


def perf_file(op: str) -> str:
    return f"{op}_perf.parquet"


def samples_file(op: str) -> str:
    return f"{op}_samples.parquet"


def perf_schema(op: str) -> pa.Schema:
    spec = get_op(op)
    field_types = {int: pa.int64(), str: pa.string(), float: pa.float64()}
    cols = [(name, pa.string()) for name in IDENTITY_COLUMNS]
    cols += [(name, field_types[typ]) for name, typ in spec.fields]
    cols += [(f.name, field_types[f.type]) for f in spec.optional]
    cols += list(PERF_STAT_COLUMNS)
    return pa.schema(cols)
