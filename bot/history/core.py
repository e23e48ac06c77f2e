"""Each case's trend across a series of stored runs, as arrays of cases x runs.

A point is one stored run's estimate of one case: the 10% trimmed mean of its samples pooled
over the record's runs (the collector's `latency` and the comparison's estimate), with a
two-level bootstrap interval (`bot.compare.stats.bootstrap_batch`; the comparison's interval
where a side has a single run). Cases whose records hold no samples (imported tables) get
the record's latency and no interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bot.compare.stats import Settings, bootstrap_batch, pack_runs
from bot.history.source import Selection, StoredRun, Warn
from bot.keys import Series
from collector.aggregate import trimmed_mean
from collector.caseplan import Case, CaseSelector
from collector.ops import OPS, get_op
from collector.record import RunRecord

_DEFAULTS = Settings()


@dataclass(frozen=True)
class HistorySettings:
    # Replicates of each point's bootstrap: 2,000 cases x 20 runs are 40,000 intervals, and
    # a displayed 95% interval needs fewer replicates than a verdict (docs/history.md).
    bootstrap: int = 400
    confidence: float = _DEFAULTS.confidence
    trim: float = _DEFAULTS.trim
    seed: int = _DEFAULTS.seed


@dataclass(frozen=True)
class RunInfo:
    """Where a point came from: the stored entry and its record's provenance."""

    index: int  # 1-based, oldest first
    entry: str
    run_id: str
    ref: str | None
    status: str
    git_sha: str | None
    stored_at: str | None
    started_at: str | None
    framework_version: str
    case_set: str | None
    plan_hash: str | None
    image_digest: str | None
    image_ref: str | None
    versions: dict[str, str | None]
    gpu: dict[str, str | None]

    @property
    def commit(self) -> str:
        return (self.git_sha or "")[:12] or "unknown"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CaseInfo:
    key: str
    op: str
    dtype: str
    params: dict[str, Any]

    @property
    def case(self) -> Case:
        return Case(self.op, tuple(self.params.items()))


@dataclass
class History:
    """Points of every case in every run: NaN (or None) where a run has no point."""

    series: Series
    runs: list[RunInfo]
    cases: list[CaseInfo]
    ms: np.ndarray  # (cases, runs) estimate
    lo: np.ndarray  # (cases, runs) interval, NaN without samples
    hi: np.ndarray
    kernel: np.ndarray  # (cases, runs) object: kernel name or None
    failure: np.ndarray  # (cases, runs) object: "classification: type: message" or None
    skipped: list[dict[str, str]] = field(default_factory=list)

    def select(self, selector: CaseSelector | None) -> History:
        if selector is None:
            return self
        keep = np.array([selector.matches(c.case) for c in self.cases], dtype=bool)
        return self.subset(keep)

    def subset(self, keep: np.ndarray) -> History:
        idx = np.flatnonzero(keep)
        return History(
            self.series,
            self.runs,
            [self.cases[i] for i in idx],
            self.ms[idx],
            self.lo[idx],
            self.hi[idx],
            self.kernel[idx],
            self.failure[idx],
            self.skipped,
        )


def run_info(index: int, stored: StoredRun, meta: dict[str, Any]) -> RunInfo:
    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    image = meta.get("image") or {}
    device = meta.get("device") or {}
    return RunInfo(
        index=index,
        entry=stored.name,
        run_id=str(meta.get("run_id")),
        ref=stored.ref,
        status=str(meta.get("status")),
        git_sha=text(meta.get("git_sha")),
        stored_at=stored.stored_at,
        started_at=text(meta.get("started_at")),
        framework_version=str(meta.get("framework_version")),
        case_set=text(meta.get("case_set")),
        plan_hash=text(meta.get("plan_hash")),
        image_digest=text(image.get("digest")),
        image_ref=text(image.get("ref")),
        versions={str(k): text(v) for k, v in sorted((meta.get("versions") or {}).items())},
        gpu={k: text(device.get(k)) for k in ("name", "uuid", "driver", "cuda")},
    )


@dataclass
class PointStats:
    """Estimate and interval of each case of one samples table."""

    keys: list[str]
    ms: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def sample_points(
    samples: pa.Table, settings: HistorySettings, rng: np.random.Generator
) -> PointStats:
    """Pooled trimmed mean and bootstrap interval of every case in a samples table.

    Cases whose runs all hold the same number of samples are packed by shape without a
    Python loop and bootstrapped a shape at a time; ragged cases go one by one."""
    ms = samples.column("ms").to_numpy(zero_copy_only=False).astype(float)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(ms) & (ms > 0)
    if not valid.any():
        return PointStats([], np.empty(0), np.empty(0), np.empty(0))
    key_col = samples.column("case_key").combine_chunks()
    names = pc.unique(key_col)
    codes = pc.index_in(key_col, value_set=names).to_numpy(zero_copy_only=False)
    runs = samples.column("run").to_numpy(zero_copy_only=False).astype(np.int64)
    order_in_run = samples.column("sample").to_numpy(zero_copy_only=False).astype(np.int64)
    codes, runs, order_in_run, ms = (a[valid] for a in (codes, runs, order_in_run, ms))
    order = np.lexsort((order_in_run, runs, codes))
    codes, runs, ms = codes[order], runs[order], ms[order]
    n = ms.size
    run_starts = np.flatnonzero(np.r_[True, (codes[1:] != codes[:-1]) | (runs[1:] != runs[:-1])])
    widths = np.diff(np.r_[run_starts, n])
    run_code = codes[run_starts]
    first_run = np.flatnonzero(np.r_[True, run_code[1:] != run_code[:-1]])
    n_runs = np.diff(np.r_[first_run, run_starts.size])
    width_max = np.maximum.reduceat(widths, first_run)
    width_min = np.minimum.reduceat(widths, first_run)
    start = run_starts[first_run]
    count = len(first_run)
    est, lo, hi = np.full(count, np.nan), np.full(count, np.nan), np.full(count, np.nan)
    tail = (1.0 - settings.confidence) / 2.0 * 100.0
    uniform = width_max == width_min
    shapes = np.unique(np.stack([n_runs[uniform], width_max[uniform]], axis=1), axis=0)
    for n_run, width in shapes:
        members = np.flatnonzero(uniform & (n_runs == n_run) & (width_max == width))
        size = int(n_run * width)
        flat = ms[start[members][:, None] + np.arange(size)]
        cut = int(settings.trim * size)
        est[members] = np.sort(flat, axis=1)[:, cut : size - cut].mean(axis=1)
        packed = flat.reshape(members.size, int(n_run), int(width))
        lengths = np.full((members.size, int(n_run)), int(width))
        boots = bootstrap_batch(packed, lengths, settings.bootstrap, rng, settings.trim)
        bounds = np.percentile(boots, [tail, 100.0 - tail], axis=1)
        lo[members], hi[members] = bounds[0], bounds[1]
    for i in np.flatnonzero(~uniform):
        first, last = first_run[i], first_run[i] + n_runs[i]
        case_runs = [ms[run_starts[j] : run_starts[j] + widths[j]] for j in range(first, last)]
        est[i] = trimmed_mean(np.concatenate(case_runs), settings.trim)
        packed_one, lengths_one = pack_runs(case_runs)
        boots = bootstrap_batch(
            packed_one[None], lengths_one[None], settings.bootstrap, rng, settings.trim
        )[0]
        lo[i], hi[i] = np.percentile(boots, [tail, 100.0 - tail])
    keys = names.take(pa.array(run_code[first_run])).to_pylist()
    return PointStats([str(k) for k in keys], est, lo, hi)


@dataclass
class _RunPoints:
    keys: list[str]
    ms: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    kernels: list[str | None]
    failures: dict[str, str]


def _op_cases(record: RunRecord, op: str, into: dict[str, CaseInfo]) -> None:
    spec = get_op(op)
    table = record.perf[op]
    if not table.num_rows:
        return
    keys = table.column("case_key").to_pylist()
    missing = [k for k in keys if k not in into]
    if not missing:
        return
    fields = {name: table.column(name).to_pylist() for name in spec.field_names}
    for i, key in enumerate(keys):
        if key in into:
            continue
        params = {name: fields[name][i] for name in spec.field_names}
        into[key] = CaseInfo(key, op, spec.dtype_of(params), params)


def _failure_case(op: str, key: str, params: dict[str, Any] | None) -> CaseInfo:
    spec = get_op(op)
    params = params or {}
    if all(name in params for name in spec.field_names):
        ordered = {name: params[name] for name in spec.field_names}
        try:
            return CaseInfo(key, op, spec.dtype_of(ordered), ordered)
        except (KeyError, TypeError, ValueError):
            pass
    return CaseInfo(key, op, "", {})


def record_points(
    record: RunRecord,
    settings: HistorySettings,
    rng: np.random.Generator,
    cases: dict[str, CaseInfo],
) -> _RunPoints:
    """One record's points (every case with a row), failures, and new cases into `cases`."""
    keys: list[str] = []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    kernels: list[str | None] = []
    for op in record.ops:
        table = record.perf[op]
        _op_cases(record, op, cases)
        if not table.num_rows:
            continue
        op_keys = [str(k) for k in table.column("case_key").to_pylist()]
        latency = table.column("latency").to_numpy(zero_copy_only=False).astype(float)
        ms, lo, hi = latency.copy(), np.full(latency.size, np.nan), np.full(latency.size, np.nan)
        points = sample_points(record.samples[op], settings, rng)
        if points.keys:
            where = pc.index_in(
                pa.array(op_keys, pa.string()), value_set=pa.array(points.keys, pa.string())
            ).to_numpy(zero_copy_only=False)
            found = np.flatnonzero(~np.isnan(where.astype(float)))
            src = where[found].astype(np.int64)
            ms[found], lo[found], hi[found] = points.ms[src], points.lo[src], points.hi[src]
        keys += op_keys
        parts.append((ms, lo, hi))
        kernels += table.column("kernel_source").to_pylist()
    failures: dict[str, str] = {}
    for f in record.failures:
        if f.op not in OPS:
            continue
        if f.case_key not in cases:
            cases[f.case_key] = _failure_case(f.op, f.case_key, f.params)
        text = f"{f.classification}: {f.exception_type}: {f.message}".strip()
        failures.setdefault(f.case_key, text[:300])

    def cat(i: int) -> np.ndarray:
        return np.concatenate([p[i] for p in parts]) if parts else np.empty(0)

    return _RunPoints(keys, cat(0), cat(1), cat(2), kernels, failures)


def build_history(
    series: Series,
    loaded: Iterable[tuple[StoredRun, RunRecord]],
    settings: HistorySettings | None = None,
    skipped: list[dict[str, str]] | None = None,
) -> History:
    """The history of a series from its records (oldest first), one record at a time."""
    settings = settings or HistorySettings()
    cases: dict[str, CaseInfo] = {}
    runs: list[RunInfo] = []
    per_run: list[_RunPoints] = []
    for stored, record in loaded:
        rng = np.random.default_rng([settings.seed, len(runs)])
        runs.append(run_info(len(runs) + 1, stored, record.meta))
        per_run.append(record_points(record, settings, rng, cases))
    ordered = sorted(cases.values(), key=lambda c: (c.op, c.key))
    index = {c.key: i for i, c in enumerate(ordered)}
    shape = (len(ordered), len(runs))
    ms, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    kernel = np.full(shape, None, dtype=object)
    failure = np.full(shape, None, dtype=object)
    for r, points in enumerate(per_run):
        rows = np.array([index[k] for k in points.keys], dtype=np.int64)
        if rows.size:
            ms[rows, r], lo[rows, r], hi[rows, r] = points.ms, points.lo, points.hi
            kernel[rows, r] = np.array(points.kernels, dtype=object)
        for key, text in points.failures.items():
            failure[index[key], r] = text
    return History(series, runs, ordered, ms, lo, hi, kernel, failure, list(skipped or []))


def read_history(
    url: str,
    series: Series,
    stored: list[StoredRun],
    settings: HistorySettings | None = None,
    warn: Warn | None = None,
) -> History:
    """The history of `stored` (one series' entries): damaged runs skipped with a warning."""
    from bot.history import source

    skipped: list[dict[str, str]] = []
    say = warn or source.warn_stderr

    def note(message: str) -> None:
        skipped.append({"reason": message})
        say(message)

    return build_history(series, source.read_runs(url, stored, warn=note), settings, skipped)


def load_history(
    url: str,
    selection: Selection,
    settings: HistorySettings | None = None,
    warn: Warn | None = None,
) -> History:
    """The one series `selection` names in the store at `url`."""
    from bot.history import source

    series, stored = source.one_series(url, selection)
    return read_history(url, series, stored, settings, warn)
