"""The comparison's contracts, typed: comparison.json (`ComparisonDoc`), one of its listed
cases (`CaseRow`), and the columns of the case table written whole to cases.parquet
(`CASE_TABLE_SCHEMA`). tests/test_contracts.py holds the first two to
comparison.schema.json, key for key.
"""

from __future__ import annotations

from typing import Any, Required, SupportsIndex, TypedDict

import pyarrow as pa

# A case table's column of the case's field NAME (m, n, dtype...): `param_NAME`, one per field
# of the ops compared, after the declared columns.
PARAM_PREFIX = "param_"

_F, _I, _S, _B = pa.float64(), pa.int64(), pa.string(), pa.bool_()
# cases.parquet: one row per matched case. NaN stands for "not computed" in memory and is
# written as null.
CASE_TABLE_SCHEMA = pa.schema(
    [
        ("key", _S),
        ("op", _S),
        ("dtype", _S),
        ("kernel_base", _S),
        ("kernel_cand", _S),
        ("base_ms", _F),
        ("cand_ms", _F),
        # The GPU (UUID) that measured each side, null when unknown.
        ("base_gpu", _S),
        ("cand_gpu", _S),
        # "samples" (judged on the runs) or "size-only" (imported tables, no samples).
        ("method", _S),
        ("ratio", _F),
        ("lo", _F),
        ("hi", _F),
        ("p", _F),
        ("q", _F),
        ("noise", _F),
        ("threshold", _F),
        ("base_runs", _I),
        ("cand_runs", _I),
        # Placement levels compared level by level (collector/levels.py); 0: none.
        ("levels", _I),
        ("base_outliers", _I),
        ("base_samples", _I),
        ("cand_outliers", _I),
        ("cand_samples", _I),
        # Same GPU, calibrated across GPUs (ratio divided by `offset`) or uncalibrated.
        ("gpu_match", _S),
        ("offset", _F),
        ("offset_sd", _F),
        ("raw_ratio", _F),
        # Each side's trend across its runs (bot/compare/drift.py); NaN: not tested.
        ("base_drift", _F),
        ("base_drift_q", _F),
        ("cand_drift", _F),
        ("cand_drift_q", _F),
        ("drifting", _B),
        ("verdict", _S),
        # With a confirmation pass: the verdict before it, and the replication's own figures.
        ("first_verdict", _S),
        ("remeasured", _B),
        ("confirmed", _B),
        ("confirm_ratio", _F),
        ("confirm_lo", _F),
        ("confirm_hi", _F),
        ("confirm_q", _F),
        ("confirm_verdict", _S),
        ("confirm_base_runs", _I),
        ("confirm_cand_runs", _I),
    ]
)

# Columns added after cases.parquet was first written: a reader accepts a table without them.
LATER_CASE_COLUMNS = frozenset(
    {"base_drift", "base_drift_q", "cand_drift", "cand_drift_q", "drifting", "levels"}
)


def case_identity(cols: dict[str, Any], i: SupportsIndex) -> dict[str, str]:
    """Row `i`'s key, op and dtype, which head each listed case (outliers, drift)."""
    return {name: str(cols[name][i]) for name in ("key", "op", "dtype")}


class CaseRow(TypedDict, total=False):
    """A case as comparison.json lists it (latency.cases[], `$defs/case` of the schema)."""

    key: Required[str]
    op: Required[str]
    dtype: Required[str]
    params: Required[dict[str, Any]]
    kernel_base: Required[str]
    kernel_cand: Required[str]
    base_ms: Required[float | None]
    cand_ms: Required[float | None]
    ratio: Required[float | None]
    lo: Required[float | None]
    hi: Required[float | None]
    p: Required[float | None]
    q: Required[float | None]
    noise: Required[float | None]
    threshold: Required[float | None]
    method: Required[str]
    base_runs: Required[int]
    cand_runs: Required[int]
    verdict: Required[str]
    remeasured: Required[bool]
    confirmed: Required[bool]
    dispatch_change: bool
    outliers: dict[str, int]
    gpu: dict[str, Any]
    drift: dict[str, Any]
    levels: int
    first_verdict: str
    confirmation: dict[str, Any]


class ComparisonDoc(TypedDict, total=False):
    """comparison.json: its top-level sections (each section's shape is in the schema)."""

    schema_version: Required[int]
    generated_at: Required[str]
    tool: Required[dict[str, Any]]
    baseline: Required[dict[str, Any]]
    candidate: Required[dict[str, Any]]
    settings: Required[dict[str, Any]]
    settings_source: str | None
    history: dict[str, Any]
    failure_groups: Required[dict[str, Any]]
    coverage: Required[dict[str, Any]]
    latency: Required[dict[str, Any]]
    confirmation: Required[dict[str, Any]]
    anomalies: Required[dict[str, Any]]
    warnings: Required[list[str]]
    verdict: Required[dict[str, Any]]
