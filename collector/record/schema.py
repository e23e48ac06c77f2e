"""The run record's layout: file names, table columns and their types."""

from __future__ import annotations

import types
from typing import Any, Required, TypedDict, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

from collector.ops import get_op

SCHEMA_VERSION = 1
RUN_JSON = "run.json"
FAILURES_JSON = "failures.json"
CHECKPOINT = "checkpoint.jsonl"
STATUSES = ("complete", "partial", "failed")


class RunMeta(TypedDict, total=False):
    """run.json, as the writer leaves it and the reader checks it: a `Required` field must be
    there with its type; any other declared field may be absent or null, else of its type.
    Fields not declared here are kept and not read."""

    schema_version: Required[int]
    run_id: Required[str]
    status: Required[str]
    ops: Required[list[str]]
    files: Required[dict[str, str]]  # every other file's name and sha256
    framework: Required[str]
    framework_version: Required[str]
    device: Required[dict[str, Any]]
    counts: dict[str, Any] | None
    protocol: dict[str, Any] | None
    command: list[str] | None
    canary: dict[str, Any] | None
    image: dict[str, Any] | None
    versions: dict[str, Any] | None
    rules: dict[str, Any] | None
    shard: list[int] | None  # [i, n] of a sharded collection
    resumed_at: list[str] | None
    backend: str | None
    git_sha: str | None
    plan_hash: str | None
    case_set: str | None
    attn_backend: str | None
    started_at: str | None
    finished_at: str | None
    source: str | None  # where an imported record came from
    panel: dict[str, Any] | None
    assignment: dict[str, Any] | None


def _json_type(annotation: Any) -> type:
    """The JSON container or scalar type of an annotation: `list[str] | None` -> list."""
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    return origin if isinstance(origin, type) else annotation


# RunMeta's fields as the reader checks them: the required ones, then the rest.
# (Read from the annotations: with postponed annotations, `__required_keys__` of Python 3.11
# does not see `Required`.)
_RUN_META_HINTS = get_type_hints(RunMeta, include_extras=True)
RUN_META_REQUIRED: dict[str, type] = {
    k: _json_type(get_args(v)[0]) for k, v in _RUN_META_HINTS.items() if get_origin(v) is Required
}
RUN_META_OPTIONAL: dict[str, type] = {
    k: _json_type(v) for k, v in _RUN_META_HINTS.items() if k not in RUN_META_REQUIRED
}

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
