"""The run record (DESIGN.md section 2): a self-describing directory readable without a GPU.

Writer: results are checkpointed line by line while the run goes on, so a crash loses at most
the case in flight; `finalize` turns the checkpoint into parquet tables, `failures.json` and,
last, `run.json` with every other file's sha256. Reader: validates on load and turns every
defect into a one-line error (unreadable record) or a flagged anomaly (suspect rows).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collector.aggregate import RunResult, summarise
from collector.caseplan import Case
from collector.errors import RecordWriteError, RunRecordError
from collector.failures import FailureRecord
from collector.ops import OPS, get_op
from collector.peaks import roofline_pct
from collector.sample_checks import exclude_bad_sample_cases as check_samples

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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_failure(path: Path, exc: OSError) -> str:
    """One line for an OSError while writing part of a record."""
    code = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{path}: {reason}{f' ({code})' if code else ''}"


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stage_bytes(path: Path, data: bytes) -> Path:
    """Write `data` next to `path` under a temporary name, fsynced; the caller renames it."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the half-written file
        raise
    return tmp


def _stage_parquet(path: Path, table: pa.Table) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd")
        _fsync_path(tmp)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    _stage_bytes(path, data).replace(path)


def write_json(path: Path, data: Any) -> None:
    _atomic_write_bytes(path, _json_bytes(data))


class Checkpoint:
    """Append-only JSON lines: each finished run and each failure, fsynced as it happens.

    An append is all or nothing: a write the disk cannot take is cut back off, and a torn
    last line left by a crash is cut off when the checkpoint is opened again, so the next
    entry never fuses with it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            _cut_torn_tail(path)
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RecordWriteError(
                f"cannot open the checkpoint {write_failure(path, exc)}"
            ) from None

    def append(self, kind: str, payload: dict[str, Any]) -> None:
        if self._fd is None:
            raise RecordWriteError(f"{self.path}: checkpoint already closed")
        data = (json.dumps({"kind": kind, **payload}, separators=(",", ":")) + "\n").encode()
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise RecordWriteError(
                f"cannot append to the checkpoint {write_failure(self.path, exc)}; every entry "
                "before this one is kept: free space and rerun with --resume"
            ) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def read(path: Path) -> Iterator[dict[str, Any]]:
        """Entries in order; a torn last line (a crash mid-write) is skipped, not fatal."""
        if not path.exists():
            return
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and "kind" in entry:
                    yield entry


def _cut_torn_tail(path: Path) -> None:
    """Truncate a checkpoint after its last newline (a crash can leave half a line)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb+") as fh:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            fh.seek(start)
            chunk = fh.read(end - start)
            if start + len(chunk) == size and chunk.endswith(b"\n"):
                return  # intact
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                fh.truncate(start + cut + 1)
                return
            end = start
        fh.truncate(0)


@dataclass
class CheckpointState:
    runs: dict[str, list[RunResult]] = field(default_factory=dict)
    failures: list[FailureRecord] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> CheckpointState:
        state = cls()
        for entry in Checkpoint.read(path):
            if entry["kind"] == "run":
                result = RunResult.from_json(entry)
                state.runs.setdefault(result.case_key, []).append(result)
            elif entry["kind"] == "failure":
                state.failures.append(FailureRecord.from_json(entry))
        return state

    @property
    def failed_keys(self) -> set[str]:
        return {f.case_key for f in self.failures}


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
                **params,
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


def perf_schema(op: str) -> pa.Schema:
    spec = get_op(op)
    field_types = {int: pa.int64(), str: pa.string(), float: pa.float64()}
    cols = [(name, pa.string()) for name in IDENTITY_COLUMNS]
    cols += [(name, field_types[typ]) for name, typ in spec.fields]
    cols += list(PERF_STAT_COLUMNS)
    return pa.schema(cols)


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
    per_op = {}
    for op in meta["ops"]:
        keys = [c.key for c in cases if c.op == op]
        ok = sum(1 for k in keys if k in state.runs and k not in failed_keys)
        failed = sum(1 for k in keys if k in failed_keys)
        attempted = sum(1 for k in keys if k in state.runs or k in failed_keys)
        per_op[op] = {"planned": len(keys), "attempted": attempted, "ok": ok, "failed": failed}
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


# Fields of run.json the bot reads, with the JSON types they must have (None: may be null).
_REQUIRED_META: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "status": (str,),
    "ops": (list,),
    "files": (dict,),
    "framework": (str,),
    "framework_version": (str,),
    "device": (dict,),
}
_OPTIONAL_META: dict[str, tuple[type, ...]] = {
    "counts": (dict,),
    "protocol": (dict,),
    "command": (list,),
    "canary": (dict,),
    "image": (dict,),
    "versions": (dict,),
    "rules": (dict,),
    "shard": (list,),
    "resumed_at": (list,),
    "backend": (str,),
    "git_sha": (str,),
    "plan_hash": (str,),
    "case_set": (str,),
    "started_at": (str,),
    "finished_at": (str,),
    "source": (str,),
}
_COUNT_KEYS = ("planned", "attempted", "ok", "failed")


def _type_name(typ: type) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(typ, typ.__name__)


def _check_meta(run_json: Path, meta: dict[str, Any]) -> None:
    for key, types in _REQUIRED_META.items():
        _require(key in meta, f"{run_json}: missing field {key!r}")
        _require(
            isinstance(meta[key], types),
            f"{run_json}: field {key!r} must be {_type_name(types[0])}, not {meta[key]!r:.80}",
        )
    for key, types in _OPTIONAL_META.items():
        value = meta.get(key)
        _require(
            value is None or isinstance(value, types),
            f"{run_json}: field {key!r} must be {_type_name(types[0])} or null, not {value!r:.80}",
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
                isinstance(value, int) and not isinstance(value, bool) and value >= 0,
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
    try:
        meta = json.loads(run_json.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise RunRecordError(f"{run_json}: not valid JSON ({exc})") from None
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
        perf[op], samples[op] = check_samples(perf[op], samples[op], samples_file(op), anomalies)
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
    field_kinds = {name: {int: "int", str: "str", float: "float"}[t] for name, t in spec.fields}
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
_FAILURE_FIELDS: dict[str, tuple[type, ...]] = {
    "case_key": (str,),
    "group_key": (str,),
    "op": (str,),
    "classification": (str,),
    "exception_type": (str, type(None)),
    "message": (str, type(None)),
    "traceback": (str, type(None)),
    "params": (dict, type(None)),
    "dtype": (str, type(None)),
    "task_id": (str, type(None)),
    "exit_code": (int, type(None)),
    "signal": (str, type(None)),
    "worker": (str, type(None)),
    "device": (str, type(None)),
    "run_index": (int, type(None)),
    "timestamp": (str, type(None)),
}


def _read_failures(path: Path) -> list[FailureRecord]:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise RunRecordError(f"{path}: not valid JSON ({exc})") from None
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
                isinstance(value, types) and not isinstance(value, bool),
                f"{path}: record {i} field {key!r} has unexpected value {value!r:.80}",
            )
        op = item.get("op")
        _require(op in OPS, f"{path}: record {i} names unknown op {op!r:.80}")
        out.append(FailureRecord.from_json(item))
    return out
