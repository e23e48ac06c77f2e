"""`read_record`: load a run record, validate it, and report every defect."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector import jsonfile
from collector.errors import RunRecordError
from collector.failures import FailureRecord
from collector.ops import OPS, get_op
from collector.record.files import sha256_file
from collector.record.schema import (
    _SAMPLE_REQUIRED,
    CHECKPOINT,
    FAILURES_JSON,
    PERF_STAT_COLUMNS,
    RUN_JSON,
    RUN_META_OPTIONAL,
    RUN_META_REQUIRED,
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    STATUSES,
    perf_file,
    samples_file,
)
from collector.sample_checks import EXCLUDED_CASE
from collector.sample_checks import exclude_bad_sample_cases as check_samples


@dataclass
class Anomaly:
    """A defect in a readable record: reported by the comparison, never silently dropped."""

    kind: str
    file: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "file": self.file, "detail": self.detail}


@dataclass
class RunRecord:
    path: Path
    meta: dict[str, Any]
    perf: dict[str, pa.Table]
    samples: dict[str, pa.Table]
    failures: list[FailureRecord]
    anomalies: list[Anomaly]

    @property
    def status(self) -> str:
        return str(self.meta.get("status"))

    @property
    def ops(self) -> list[str]:
        return list(self.meta.get("ops", []))

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        return read_record(path)


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise RunRecordError(message)


_COUNT_KEYS = ("planned", "attempted", "ok", "failed")


def _type_name(typ: type) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(typ, typ.__name__)


def _check_meta(run_json: Path, meta: dict[str, Any]) -> None:
    for key, typ in RUN_META_REQUIRED.items():
        _require(key in meta, f"{run_json}: missing field {key!r}")
        _require(
            isinstance(meta[key], typ),
            f"{run_json}: field {key!r} must be {_type_name(typ)}, not {meta[key]!r:.80}",
        )
    for key, typ in RUN_META_OPTIONAL.items():
        value = meta.get(key)
        _require(
            value is None or isinstance(value, typ),
            f"{run_json}: field {key!r} must be {_type_name(typ)} or null, not {value!r:.80}",
        )
    _require(meta["status"] in STATUSES, f"{run_json}: unknown status {meta['status']!r:.80}")
    for op in meta["ops"]:
        _require(isinstance(op, str) and op in OPS, f"{run_json}: unknown op {op!r:.80}")
    for name, digest in meta["files"].items():
        _require(
            "/" not in name and "\0" not in name and name not in ("", ".", ".."),
            f"{run_json}: bad file name {name!r:.80}",
        )
        _require(isinstance(digest, str), f"{run_json}: checksum of {name!r:.80} is not a string")
    counts = meta.get("counts") or {}
    per_op = counts.get("per_op") or {}
    _require(isinstance(per_op, dict), f"{run_json}: field 'counts.per_op' must be an object")
    blocks = [("counts", counts), *((f"counts.per_op.{k}", v) for k, v in per_op.items())]
    for where, block in blocks:
        _require(isinstance(block, dict), f"{run_json}: field {where!r:.80} must be an object")
        for key in _COUNT_KEYS:
            value = block.get(key, 0)
            _require(
                jsonfile.is_json_type(value, int) and value >= 0,
                f"{run_json}: field '{where}.{key}' must be a count, not {value!r:.80}",
            )
    shard = meta.get("shard")
    if shard is not None:
        _require(
            len(shard) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
            and 1 <= shard[0] <= shard[1],
            f"{run_json}: field 'shard' must be [i, n] with 1 <= i <= n, not {shard!r:.80}",
        )
    unverified = (meta.get("rules") or {}).get("unverified_keys", [])
    _require(
        isinstance(unverified, list) and all(isinstance(k, str) for k in unverified),
        f"{run_json}: field 'rules.unverified_keys' must be a list of case keys",
    )


def read_record(path: Path) -> RunRecord:
    _require(path.is_dir(), f"{path}: run record directory not found")
    run_json = path / RUN_JSON
    _require(run_json.is_file(), f"{run_json}: missing (not a run record, or the run died early)")
    meta = jsonfile.read(run_json, error=RunRecordError)
    _require(isinstance(meta, dict), f"{run_json}: must hold a JSON object")
    version = meta.get("schema_version")
    _require(
        version == SCHEMA_VERSION and not isinstance(version, bool),
        f"{run_json}: unknown schema_version {version!r:.80} (this reader knows {SCHEMA_VERSION})",
    )
    _check_meta(run_json, meta)
    files = meta["files"]
    for name, digest in files.items():
        target = path / name
        _require(target.is_file(), f"{target}: listed in run.json but missing")
        _require(not target.is_symlink(), f"{target}: is a symbolic link; refusing to follow it")
        actual = sha256_file(target)
        _require(
            actual == digest,
            f"{target}: checksum mismatch "
            f"(run.json says {str(digest)[:12]}, file is {actual[:12]})",
        )
    anomalies: list[Anomaly] = []
    allowed = set(files) | {RUN_JSON, CHECKPOINT}
    for extra in sorted(p.name for p in path.iterdir() if p.name not in allowed):
        if not extra.startswith("."):
            anomalies.append(Anomaly("extra_file", extra, "not listed in run.json"))
    perf: dict[str, pa.Table] = {}
    samples: dict[str, pa.Table] = {}
    for op in meta["ops"]:
        for name in (perf_file(op), samples_file(op)):
            _require(name in files, f"{run_json}: op {op!r} has no {name} listed")
        perf[op] = _read_perf(path / perf_file(op), op, anomalies)
        samples[op] = _read_samples(path / samples_file(op), anomalies)
        perf[op], samples[op], excluded = check_samples(perf[op], samples[op])
        anomalies += [Anomaly(EXCLUDED_CASE, samples_file(op), line) for line in excluded]
    failures = _read_failures(path / FAILURES_JSON) if FAILURES_JSON in files else []
    return RunRecord(path, meta, perf, samples, failures, anomalies)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_null(t):
        return "null"
    return str(t)


# What each expected kind of column accepts (an all-null column fits any).
_ACCEPTS = {
    "int": {"int", "null"},
    "float": {"float", "int", "null"},
    "str": {"str", "null"},
    "bool": {"bool", "null"},
}
_CONCRETE = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
_SAMPLE_KINDS = {f.name: _kind(f.type) for f in SAMPLE_SCHEMA}
_SAMPLE_KINDS["case_key"] = "str"
_STAT_KINDS = {name: _kind(t) for name, t in PERF_STAT_COLUMNS}
_REQUIRED_PERF = ("case_key", "latency", "kernel_source")


def _read_table(
    path: Path, kinds: dict[str, str], required: Iterable[str] | None = None
) -> pa.Table:
    """Read a table; `required` columns (default: all of `kinds`) must exist, and every
    column of `kinds` that exists must hold values of its kind."""
    try:
        table = pq.read_table(path)
        table.validate(full=True)  # e.g. strings that are not UTF-8
        names = table.column_names
    except (OSError, pa.ArrowException, UnicodeDecodeError, ValueError) as exc:
        raise RunRecordError(f"{path}: not a readable parquet file ({exc})") from None
    needed = list(kinds) if required is None else list(required)
    missing = [c for c in needed if c not in names]
    _require(not missing, f"{path}: missing column {missing[0]!r}" if missing else "")
    _require(len(set(names)) == len(names), f"{path}: a column name appears twice")
    for name, kind in kinds.items():
        if name in names:
            actual = _kind(table.schema.field(name).type)
            _require(
                actual in _ACCEPTS[kind],
                f"{path}: column {name!r} holds {table.schema.field(name).type}, expected {kind}",
            )
            if actual == "null" or (kind == "float" and actual == "int"):
                # Give what follows one type per column: an all-null column its own, an
                # integer column of a float field float64 (huge values lose precision, they
                # do not fail).
                i = table.schema.get_field_index(name)
                column = pc.cast(table.column(name), _CONCRETE[kind], safe=False)
                table = table.set_column(i, name, column)
    return table


def _read_samples(path: Path, anomalies: list[Anomaly]) -> pa.Table:
    """Samples without a case key, run or time cannot be placed: dropped and reported."""
    table = _read_table(path, _SAMPLE_KINDS, _SAMPLE_REQUIRED)
    if table.num_rows == 0:
        return table
    placed = pc.and_(
        pc.and_(pc.is_valid(table.column("case_key")), pc.is_valid(table.column("run"))),
        pc.is_valid(table.column("ms")),
    )
    dropped = table.num_rows - pc.sum(pc.cast(placed, pa.int64())).as_py()
    if dropped:
        anomalies.append(
            Anomaly("invalid_sample", path.name, f"{dropped} samples without case_key, run or ms")
        )
        table = table.filter(placed)
    return table


def _read_perf(path: Path, op: str, anomalies: list[Anomaly]) -> pa.Table:
    """Drop (and report) repeated case keys and non-positive or NaN latencies, column-wise:
    a 100k-row table reads in milliseconds."""
    spec = get_op(op)
    typed = [*spec.fields, *((f.name, f.type) for f in spec.optional)]
    field_kinds = {name: {int: "int", str: "str", float: "float"}[t] for name, t in typed}
    kinds = {**_STAT_KINDS, "kernel_source": "str", **field_kinds, "case_key": "str"}
    table = _read_table(path, kinds, (*_REQUIRED_PERF, *spec.field_names))
    n = table.num_rows
    if n == 0:
        return table
    has_key = pc.fill_null(pc.not_equal(table.column("case_key"), ""), False)
    has_key = has_key.combine_chunks().to_numpy(zero_copy_only=False)
    keys = pc.fill_null(table.column("case_key").combine_chunks(), "")
    codes = pc.index_in(keys, value_set=pc.unique(keys)).to_numpy(zero_copy_only=False)
    is_first = np.zeros(n, dtype=bool)
    is_first[np.unique(codes, return_index=True)[1]] = True
    lat = pc.cast(table.column("latency"), pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(lat) & (lat > 0)
    keep = is_first & valid & has_key
    if keep.all():
        return table
    for i in np.flatnonzero(~keep):
        key = keys[int(i)].as_py()
        if not has_key[i]:
            anomalies.append(Anomaly("invalid_row", path.name, f"row {int(i)} has no case_key"))
        elif not is_first[i]:
            anomalies.append(Anomaly("duplicate_case", path.name, f"{key} appears more than once"))
        else:
            value = table.column("latency")[int(i)].as_py()
            anomalies.append(Anomaly("invalid_latency", path.name, f"{key}: latency {value!r}"))
    return table.filter(pa.array(keep))


# failures.json fields and their JSON types (None: may be null).
_NULLABLE_TEXT = (str, type(None))
_FAILURE_FIELDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("case_key", "group_key", "op", "classification"), (str,)),
    # What failed, then where and when it ran.
    **dict.fromkeys(("exception_type", "message", "traceback", "dtype", "signal"), _NULLABLE_TEXT),
    **dict.fromkeys(("task_id", "worker", "device", "timestamp"), _NULLABLE_TEXT),
    **dict.fromkeys(("exit_code", "run_index"), (int, type(None))),
    "params": (dict, type(None)),
}


def _read_failures(path: Path) -> list[FailureRecord]:
    data = jsonfile.read(path, error=RunRecordError)
    _require(isinstance(data, list), f"{path}: must hold a JSON list of failure records")
    out = []
    for i, item in enumerate(data):
        _require(
            isinstance(item, dict) and "case_key" in item and "group_key" in item,
            f"{path}: record {i} lacks case_key or group_key",
        )
        for key, types in _FAILURE_FIELDS.items():
            value = item.get(key, "" if str in types else None)
            _require(
                jsonfile.is_json_type(value, *types),
                f"{path}: record {i} field {key!r} has unexpected value {value!r:.80}",
            )
        op = item.get("op")
        _require(op in OPS, f"{path}: record {i} names unknown op {op!r:.80}")
        out.append(FailureRecord.from_json(item))
    return out
