"""Per-case latency comparison, per-group aggregates and dispatch changes, columnar throughout.

Every matched case gets one row of a columnar table (`CaseTable`), which is written whole
to `cases.parquet`; `comparison.json` lists only the notable rows. The expensive statistics
run batched over all sampled cases; rows without samples on a side (imported tables) are
judged by size alone. With a confirmation pass (a paired re-measurement of the flagged
cases, `cases_to_confirm` below), those cases are judged again on all their runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bot.compare import cross_gpu, drift, stats
from bot.compare.contract import CASE_TABLE_SCHEMA, PARAM_PREFIX, CaseRow, case_identity
from collector import levels
from collector.ops import get_op
from collector.record import RunRecord
from collector.sample_checks import (
    MANY_OUTLIERS_SHARE,
    OUTLIER_DISTANCE,
    count_outliers,
    many_outliers,
)

SAMPLES, SIZE_ONLY = "samples", "size-only"
# First verdicts that a paired re-measurement re-judges before the comment is final:
# regressed and inconclusive (the floor) and improved (a claimed speed-up deserves
# the same scrutiny as a claimed slow-down).
CONFIRM_VERDICTS = (stats.REGRESSED, stats.INCONCLUSIVE, stats.IMPROVED)
# Cases listed per verdict in comparison.json (largest changes first); all are in the table.
NOTABLE_PER_VERDICT = 500
# Edges of the ratio histogram that the comment draws.
HISTOGRAM_EDGES = (0.9, 0.95, 0.98, 0.99, 1.01, 1.02, 1.05, 1.1)

Runs = list[np.ndarray]


def runs_by_case(samples: pa.Table, keys: pa.Array | None = None) -> dict[str, Runs]:
    """Group a samples table into {case_key: [samples of run 0, run 1, ...]}.

    `keys`, when given, restricts the grouping to those cases. Non-positive and NaN samples
    are dropped (the reader reports them); a run left empty is dropped.
    """
    if keys is not None and samples.num_rows:
        samples = samples.filter(pc.is_in(samples.column("case_key"), value_set=keys))
    if samples.num_rows == 0:
        return {}
    key_col = samples.column("case_key").combine_chunks()
    codes = pc.index_in(key_col, value_set=pc.unique(key_col)).to_numpy()
    names = pc.unique(key_col).to_pylist()
    runs = samples.column("run").to_numpy(zero_copy_only=False).astype(np.int64)
    ms = samples.column("ms").to_numpy(zero_copy_only=False).astype(float)
    order = np.lexsort((runs, codes))
    codes, runs, ms = codes[order], runs[order], ms[order]
    boundaries = np.flatnonzero((codes[1:] != codes[:-1]) | (runs[1:] != runs[:-1])) + 1
    starts = np.concatenate(([0], boundaries))
    out: dict[str, Runs] = defaultdict(list)
    for start, chunk in zip(starts, np.split(ms, boundaries), strict=True):
        valid = chunk[np.isfinite(chunk) & (chunk > 0)]
        if valid.size:
            out[names[int(codes[start])]].append(valid)
    return dict(out)


@dataclass
class CaseTable:
    """One row per matched case, as numpy arrays (object arrays for text)."""

    cols: dict[str, np.ndarray]
    fields: list[tuple[str, np.ndarray]] = field(default_factory=list)
    # Which GPUs measured the sides (bot/compare/cross_gpu.py's gpu_section).
    gpu: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["key"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def to_arrow(self) -> pa.Table:
        """cases.parquet: the declared columns (CASE_TABLE_SCHEMA), then the case fields."""
        extra = set(self.cols) ^ set(CASE_TABLE_SCHEMA.names)
        assert not extra, f"case table columns not in CASE_TABLE_SCHEMA: {sorted(extra)}"
        arrays = [_arrow(self.cols[f.name], f.type) for f in CASE_TABLE_SCHEMA]
        fields = list(CASE_TABLE_SCHEMA)
        for name, values in self.fields:
            arrays.append(_arrow(values))
            fields.append(pa.field(f"{PARAM_PREFIX}{name}", arrays[-1].type))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _arrow(values: np.ndarray, typ: pa.DataType | None = None) -> pa.Array:
    if values.dtype == object:
        return pa.array(values.tolist(), type=typ)
    if values.dtype.kind == "f":
        return pa.array(values, mask=~np.isfinite(values), type=typ)
    return pa.array(values, type=typ)


@dataclass
class _OpMatch:
    op: str
    keys: np.ndarray
    table: pa.Table  # cand perf rows of the matched cases, in key order
    base_ms: np.ndarray
    kernel_base: np.ndarray
    base_gpu: np.ndarray  # the GPU (UUID) that measured each side, None: unknown
    cand_gpu: np.ndarray
    added: int
    removed: int


def _match(base: RunRecord, cand: RunRecord, op: str) -> _OpMatch:
    """Cases of one op measured on both sides (in the candidate's plan order), and the counts
    of cases added and removed (a case that now fails is a failure finding, not removed)."""
    spec = get_op(op)
    wanted = list(dict.fromkeys(["case_key", "latency", "kernel_source", *spec.field_names]))
    b, c = base.perf[op].select(wanted), cand.perf[op].select(wanted)
    bk, ck = b.column("case_key").combine_chunks(), c.column("case_key").combine_chunks()
    idx = pc.index_in(ck, value_set=bk)
    valid = pc.is_valid(idx)
    c_rows = c.filter(valid)
    b_idx = idx.filter(valid).to_numpy(zero_copy_only=False).astype(np.int64)
    b_rows = b.select(["latency", "kernel_source"]).take(pa.array(b_idx))
    base_failed = pa.array(sorted({f.case_key for f in base.failures}), type=pa.string())
    cand_failed = pa.array(sorted({f.case_key for f in cand.failures}), type=pa.string())
    new = pc.invert(valid)
    added = pc.sum(pc.and_(new, pc.invert(pc.is_in(ck, value_set=base_failed)))).as_py()
    matched = np.zeros(len(bk), dtype=bool)
    matched[b_idx] = True
    gone = ~matched & ~pc.is_in(bk, value_set=cand_failed).to_numpy(zero_copy_only=False)
    return _OpMatch(
        op=op,
        keys=np.asarray(c_rows.column("case_key").to_pylist(), dtype=object),
        table=c_rows,
        base_ms=b_rows.column("latency").to_numpy(zero_copy_only=False).astype(float),
        kernel_base=np.asarray(b_rows.column("kernel_source").to_pylist(), dtype=object),
        base_gpu=np.asarray(
            cross_gpu.case_gpus(base, base.perf[op].take(pa.array(b_idx))), dtype=object
        ),
        cand_gpu=np.asarray(cross_gpu.case_gpus(cand, cand.perf[op].filter(valid)), dtype=object),
        added=int(added or 0),
        removed=int(np.count_nonzero(gone)),
    )


@dataclass
class _Sampled:
    """Runs of the sampled cases, by position in the case table."""

    index: list[int] = field(default_factory=list)
    base: list[Runs] = field(default_factory=list)
    cand: list[Runs] = field(default_factory=list)


def _values(runs: Runs, settings: stats.Settings) -> np.ndarray:
    return stats.run_values(runs, settings.trim)


def _pair_values(
    pairs: list[tuple[Runs, Runs]], settings: stats.Settings
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """Each pair's run values, its level-by-level ratio (NaN: the pooled estimates' ratio
    serves) and its level count (0: plain run values), collector/levels.py."""
    values: list[tuple[np.ndarray, np.ndarray]] = []
    ratio = np.full(len(pairs), np.nan)
    count = np.zeros(len(pairs), dtype=np.int64)
    for i, (b, c) in enumerate(pairs):
        found = levels.match(
            b,
            c,
            settings.level_gap,
            settings.level_min_share,
            settings.level_share_alpha,
            settings.trim,
        )
        if found is None:
            values.append((_values(b, settings), _values(c, settings)))
        else:
            values.append((found.base, found.cand))
            ratio[i], count[i] = found.ratio, found.levels
    return values, ratio, count


def _run_stats(
    pairs: list[tuple[Runs, Runs]],
    settings: stats.Settings,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """Ratio, interval, p-value and noise threshold of each (base runs, cand runs) pair, and
    the run values they came from.

    The ratio is pooled estimate over pooled estimate; the test, the noise and (both sides
    with two runs or more) the interval are on the runs' values, each run's trimmed mean
    (`stats.run_values`). A case whose sides show the same placement levels in compatible
    shares is compared level by level (`_pair_values`): its ratio and run values too."""
    n = len(pairs)
    out = {
        name: np.full(n, np.nan)
        for name in ("ratio", "lo", "hi", "p", "noise", "threshold", "base_runs", "cand_runs")
    }
    out["levels"] = np.zeros(n, dtype=np.int64)
    if not n:
        return out, []
    values, level_ratio, out["levels"] = _pair_values(pairs, settings)
    for i, ((b, c), (bm, cm)) in enumerate(zip(pairs, values, strict=True)):
        noise = stats.noise_of(bm, cm)
        out["ratio"][i] = (
            level_ratio[i]
            if np.isfinite(level_ratio[i])
            else stats.pooled_estimate(c, settings.trim) / stats.pooled_estimate(b, settings.trim)
        )
        out["noise"][i] = noise
        out["threshold"][i] = stats.threshold_for(noise, settings)
        out["base_runs"][i] = bm.size
        out["cand_runs"][i] = cm.size
    intervals = np.array(stats.ratio_intervals(pairs, settings, rng, values), dtype=float)
    out["lo"], out["hi"] = intervals[:, 0], intervals[:, 1]
    out["p"] = stats.run_test_pvalues(values)
    return out, values


def _matched_columns(
    base: RunRecord, cand: RunRecord, matches: list[_OpMatch]
) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]], _Sampled]:
    """The matched cases' identity, kernels and latencies, their case fields, and the runs
    of the cases sampled on both sides."""
    n = sum(len(m.keys) for m in matches)
    cols: dict[str, np.ndarray] = {
        "key": np.empty(n, dtype=object),
        "op": np.empty(n, dtype=object),
        "dtype": np.empty(n, dtype=object),
        "kernel_base": np.empty(n, dtype=object),
        "kernel_cand": np.empty(n, dtype=object),
        "base_ms": np.full(n, np.nan),
        "cand_ms": np.full(n, np.nan),
        "base_gpu": np.full(n, None, dtype=object),
        "cand_gpu": np.full(n, None, dtype=object),
    }
    field_names: list[str] = []
    field_values: dict[str, np.ndarray] = {}
    sampled = _Sampled()
    offset = 0
    for m in matches:
        spec = get_op(m.op)
        size = len(m.keys)
        sl = slice(offset, offset + size)
        cols["key"][sl] = m.keys
        cols["op"][sl] = m.op
        cols["dtype"][sl] = [str(v) for v in m.table.column(spec.dtype_field).to_pylist()]
        cols["kernel_base"][sl] = m.kernel_base
        cols["kernel_cand"][sl] = m.table.column("kernel_source").to_pylist()
        cols["base_ms"][sl] = m.base_ms
        cols["cand_ms"][sl] = m.table.column("latency").to_numpy(zero_copy_only=False)
        cols["base_gpu"][sl] = m.base_gpu
        cols["cand_gpu"][sl] = m.cand_gpu
        for name in spec.field_names:
            if name not in field_values:
                field_names.append(name)
                field_values[name] = np.full(n, None, dtype=object)
            field_values[name][sl] = m.table.column(name).to_pylist()
        keys = pa.array(m.keys.tolist(), type=pa.string())
        b_runs = runs_by_case(base.samples[m.op], keys) if m.op in base.samples else {}
        c_runs = runs_by_case(cand.samples[m.op], keys) if m.op in cand.samples else {}
        for i, key in enumerate(m.keys if b_runs and c_runs else ()):
            br, cr = b_runs.get(key), c_runs.get(key)
            if br and cr:
                sampled.index.append(offset + i)
                sampled.base.append(br)
                sampled.cand.append(cr)
        offset += size
    return cols, [(name, field_values[name]) for name in field_names], sampled


def build_case_table(
    base: RunRecord,
    cand: RunRecord,
    settings: stats.Settings,
    confirm: tuple[RunRecord, RunRecord] | None = None,
) -> tuple[CaseTable, dict[str, int], dict[str, int]]:
    """All matched cases with their statistics and verdicts; added and removed per op."""
    rng = np.random.default_rng(settings.seed)
    matches = [_match(base, cand, op) for op in sorted(set(base.ops) & set(cand.ops))]
    cols, fields, sampled = _matched_columns(base, cand, matches)
    n = len(cols["key"])
    # Rows without samples on a side: the size-only rule.
    ratio = cols["cand_ms"] / cols["base_ms"]
    is_sampled = np.zeros(n, dtype=bool)
    is_sampled[sampled.index] = True
    cols["method"] = np.where(is_sampled, SAMPLES, SIZE_ONLY).astype(object)
    cols["ratio"] = ratio
    cols["lo"] = ratio.copy()
    cols["hi"] = ratio.copy()
    cols["p"] = np.full(n, np.nan)
    cols["q"] = np.full(n, np.nan)
    cols["noise"] = np.full(n, np.nan)
    cols["threshold"] = np.full(n, settings.size_only_threshold)
    cols["base_runs"] = np.zeros(n, dtype=np.int64)
    cols["cand_runs"] = np.zeros(n, dtype=np.int64)
    _count_outliers(cols, sampled)
    first, values = _run_stats(list(zip(sampled.base, sampled.cand, strict=True)), settings, rng)
    base_values = [b for b, _ in values]
    cand_values = [c for _, c in values]
    idx = np.asarray(sampled.index, dtype=np.int64)
    for name in ("ratio", "lo", "hi", "p", "noise", "threshold"):
        cols[name][idx] = first[name]
    cols["levels"] = np.zeros(n, dtype=np.int64)
    for name in ("base_runs", "cand_runs", "levels"):
        cols[name][idx] = first[name].astype(np.int64)
    # Sides measured on different GPUs: corrected by the panels' offset, or not judged.
    cols["gpu_match"], fits = cross_gpu.pair_fits(base, cand, cols["base_gpu"], cols["cand_gpu"])
    calibrated = {
        int(i): (b, c)
        for i, b, c in zip(sampled.index, base_values, cand_values, strict=True)
        if cols["gpu_match"][i] == cross_gpu.CALIBRATED
    }
    cross_gpu.apply_offsets(cols, fits, calibrated, settings)
    _judge(cols, idx, settings)
    drift.mark(cols, idx, base_values, cand_values, settings)
    cols.update(_unconfirmed(n))
    if confirm is not None:
        _apply_confirmation(cols, sampled, confirm, settings, rng)
        drift.demote(cols)  # the re-judged verdicts answer to the first pass's drift too
    # Never regressed, improved or same across GPUs without a measured offset.
    cols["verdict"][cols["gpu_match"] == cross_gpu.UNCALIBRATED] = stats.INCONCLUSIVE
    table = CaseTable(cols, fields)
    table.gpu = cross_gpu.gpu_section(cols, fits, base, cand)
    added = {m.op: m.added for m in matches}
    removed = {m.op: m.removed for m in matches}
    return table, added, removed


def _unconfirmed(n: int) -> dict[str, np.ndarray]:
    """The confirmation columns before any confirmation pass."""
    figures = ("confirm_ratio", "confirm_lo", "confirm_hi", "confirm_q")
    return {
        "first_verdict": np.full(n, None, dtype=object),
        "remeasured": np.zeros(n, dtype=bool),
        "confirmed": np.zeros(n, dtype=bool),
        **{name: np.full(n, np.nan) for name in figures},
        "confirm_verdict": np.full(n, None, dtype=object),
        "confirm_base_runs": np.zeros(n, dtype=np.int64),
        "confirm_cand_runs": np.zeros(n, dtype=np.int64),
    }


def _count_outliers(cols: dict[str, np.ndarray], sampled: _Sampled) -> None:
    """Outlying samples per side of each sampled case (collector/sample_checks.py's rule)."""
    n = len(cols["key"])
    for side, runs in (("base", sampled.base), ("cand", sampled.cand)):
        outliers, samples = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for i, case_runs in zip(sampled.index, runs, strict=True):
            outliers[i], samples[i] = count_outliers(case_runs)
        cols[f"{side}_outliers"], cols[f"{side}_samples"] = outliers, samples


def outlier_summary(table: CaseTable, listed: int = 50) -> dict[str, Any]:
    """The cases with many outliers on either side, most first (at most `listed`)."""
    rows: list[dict[str, Any]] = []
    for side in ("base", "cand"):
        outliers, samples = table[f"{side}_outliers"], table[f"{side}_samples"]
        for i in np.flatnonzero(outliers > 0):
            if many_outliers(int(outliers[i]), int(samples[i])):
                counts = {"outliers": int(outliers[i]), "samples": int(samples[i])}
                rows.append({**case_identity(table.cols, i), "side": side, **counts})
    rows.sort(key=lambda r: (-int(r["outliers"]) / int(r["samples"]), r["key"], r["side"]))
    return {
        "distance": OUTLIER_DISTANCE,
        "many_share": MANY_OUTLIERS_SHARE,
        "samples_flagged": {
            side: int(table[f"{side}_outliers"].sum()) if len(table) else 0
            for side in ("base", "cand")
        },
        "cases_with_many": len(rows),
        "cases": rows[:listed],
    }


def _judge(cols: dict[str, np.ndarray], sampled_idx: np.ndarray, settings: stats.Settings) -> None:
    """Verdicts: FDR control over the sampled cases, the size rule for the others."""
    n = len(cols["key"])
    verdict = np.empty(n, dtype=object)
    size_only = cols["method"] == SIZE_ONLY
    verdict[size_only] = stats.size_only_verdicts(cols["ratio"][size_only], settings)
    if sampled_idx.size:
        q = stats.bh_qvalues(cols["p"][sampled_idx])
        cols["q"][sampled_idx] = q
        min_effect = _min_effects(cols, sampled_idx, settings)
        # Each case's threshold from its own minimum effect (per-op/dtype overrides).
        threshold = np.maximum(min_effect, settings.noise_mult * cols["noise"][sampled_idx])
        cols["threshold"][sampled_idx] = threshold
        verdict[sampled_idx] = stats.verdicts(
            cols["ratio"][sampled_idx],
            cols["lo"][sampled_idx],
            cols["hi"][sampled_idx],
            q,
            threshold,
            settings.alpha,
            min_effect,
            settings.max_same_band,
        )
    cols["verdict"] = verdict


def _min_effects(
    cols: dict[str, np.ndarray], idx: np.ndarray, settings: stats.Settings
) -> np.ndarray:
    """The minimum effect of each case in `idx`: `min_effect` unless an override matches."""
    if not settings.min_effect_overrides:
        return np.full(idx.size, settings.min_effect)
    pairs = list(zip(cols["op"][idx], cols["dtype"][idx], strict=True))
    known = {pair: settings.min_effect_for(*pair) for pair in set(pairs)}
    return np.array([known[pair] for pair in pairs], dtype=float)


def _apply_confirmation(
    cols: dict[str, np.ndarray],
    sampled: _Sampled,
    confirm: tuple[RunRecord, RunRecord],
    settings: stats.Settings,
    rng: np.random.Generator,
) -> None:
    """Re-judge the flagged cases (first verdict in CONFIRM_VERDICTS) that the confirmation
    records re-measured, on all their runs; a call stands only if replicated.

    The re-measurement is an independent replication: regressed (improved) on the pooled
    runs is final only if the replication alone points the same way with an interval that
    excludes no change; else the case is inconclusive. Inconclusive cases get the extra runs,
    which is what resolves them.
    """
    conf_base, conf_cand = confirm
    position = {int(i): j for j, i in enumerate(sampled.index)}
    keys = pa.array([str(k) for k in cols["key"]], type=pa.string())
    conf_runs: dict[int, tuple[Runs, Runs]] = {}
    for op in sorted(set(conf_base.ops) & set(conf_cand.ops)):
        b_runs = runs_by_case(conf_base.samples[op], keys)
        c_runs = runs_by_case(conf_cand.samples[op], keys)
        flagged = (cols["op"] == op) & np.isin(cols["verdict"], CONFIRM_VERDICTS)
        for i in np.flatnonzero(flagged):
            key = cols["key"][i]
            if key in b_runs and key in c_runs and int(i) in position:
                conf_runs[int(i)] = (b_runs[key], c_runs[key])
    if not conf_runs:
        return
    ids = np.array(sorted(conf_runs), dtype=np.int64)
    replication, _ = _run_stats([conf_runs[int(i)] for i in ids], settings, rng)
    rep_q = stats.bh_qvalues(replication["p"])
    rep_verdict = stats.verdicts(
        replication["ratio"],
        replication["lo"],
        replication["hi"],
        rep_q,
        replication["threshold"],
        settings.alpha,
        settings.min_effect,
        settings.max_same_band,
    )
    with np.errstate(invalid="ignore"):
        rep_up = replication["lo"] > 1.0
        rep_down = replication["hi"] < 1.0
    pooled, _ = _run_stats(
        [
            (
                sampled.base[position[int(i)]] + conf_runs[int(i)][0],
                sampled.cand[position[int(i)]] + conf_runs[int(i)][1],
            )
            for i in ids
        ],
        settings,
        rng,
    )
    first_verdict = cols["verdict"].copy()
    for name in ("ratio", "lo", "hi", "p", "noise", "threshold"):
        cols[name][ids] = pooled[name]
    cols["base_runs"][ids] = pooled["base_runs"].astype(np.int64)
    cols["cand_runs"][ids] = pooled["cand_runs"].astype(np.int64)
    cols["levels"][ids] = pooled["levels"]
    _judge(cols, np.asarray(sampled.index, dtype=np.int64), settings)
    final = cols["verdict"]
    replicated = np.where(
        final[ids] == stats.REGRESSED,
        rep_up,
        np.where(final[ids] == stats.IMPROVED, rep_down, True),
    )
    final[ids[~replicated]] = stats.INCONCLUSIVE
    cols["first_verdict"][ids] = first_verdict[ids]
    cols["remeasured"][ids] = True
    # Every regressed/improved verdict of a re-measured case held on all its runs and was
    # replicated by the re-measurement alone: that is what "confirmed" means.
    cols["confirmed"][ids] = np.isin(final[ids], [stats.REGRESSED, stats.IMPROVED])
    replication.update(q=rep_q, verdict=rep_verdict)
    for name in ("ratio", "lo", "hi", "q", "verdict", "base_runs", "cand_runs"):
        cols[f"confirm_{name}"][ids] = replication[name]


def _counts(verdicts: np.ndarray) -> dict[str, int]:
    return {v: int(np.count_nonzero(verdicts == v)) for v in stats.VERDICTS}


def _summary(table: CaseTable, added: dict[str, int], removed: dict[str, int]) -> dict[str, Any]:
    return {
        "matched": len(table),
        "added": sum(added.values()),
        "removed": sum(removed.values()),
        "added_by_op": added,
        "removed_by_op": removed,
        "verdicts": _counts(table["verdict"]),
        "size_only": int(np.count_nonzero(table["method"] == SIZE_ONLY)),
        "sampled": int(np.count_nonzero(table["method"] == SAMPLES)),
        "level_matched": int(np.count_nonzero(table["levels"] > 0)),
    }


def _codes(*columns: np.ndarray) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Group codes of rows over several text columns, and each code's values (sorted)."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    dictionaries = []
    for values in columns:
        text = pc.fill_null(pa.array(values.tolist(), type=pa.string()), "unknown")
        encoded = pc.dictionary_encode(text)
        dictionary = encoded.dictionary.to_pylist()
        combined = combined * (len(dictionary) + 1) + encoded.indices.to_numpy(zero_copy_only=False)
        dictionaries.append(dictionary)
    uniques, inverse = np.unique(combined, return_inverse=True)
    labels = []
    for code in uniques:
        parts = []
        for dictionary in reversed(dictionaries):
            code, index = divmod(int(code), len(dictionary) + 1)
            parts.append(str(dictionary[index]))
        labels.append(tuple(reversed(parts)))
    order = sorted(range(len(labels)), key=lambda i: labels[i])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse], [labels[i] for i in order]


def _grouped(
    table: CaseTable,
    by: tuple[tuple[str, str], ...],
    settings: stats.Settings,
    rng: np.random.Generator,
) -> list[dict[str, Any]]:
    """Geometric-mean ratio with an interval over cases, per group of `by` (column, name)."""
    if not len(table):
        return []
    codes, labels = _codes(*(table[column] for column, _ in by))
    logs = np.log(table["ratio"])
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    out = []
    for label, members in zip(labels, np.split(order, bounds), strict=True):
        point, lo, hi = stats.geomean_interval(logs[members], settings, rng)
        row: dict[str, Any] = dict(zip((name for _, name in by), label, strict=True))
        row.update(
            cases=int(members.size),
            geomean=point,
            lo=lo,
            hi=hi,
            verdicts=_counts(table["verdict"][members]),
        )
        out.append(row)
    return out


def _dispatch_changes(table: CaseTable) -> list[dict[str, Any]]:
    changed = np.flatnonzero(table["kernel_base"] != table["kernel_cand"])
    if not changed.size:
        return []
    codes, labels = _codes(
        table["op"][changed], table["kernel_base"][changed], table["kernel_cand"][changed]
    )
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    out = []
    for (op, frm, to), members in zip(labels, np.split(order, bounds), strict=True):
        rows = changed[members]
        out.append(
            {
                "op": op,
                "from": frm,
                "to": to,
                "count": int(rows.size),
                "geomean": float(np.exp(np.mean(np.log(table["ratio"][rows])))),
                "sample_cases": [str(table["key"][i]) for i in rows[:5]],
                # Verdicts across two kernels: a dispatch change, not the same kernel moving.
                "verdicts": _counts(table["verdict"][rows]),
            }
        )
    return sorted(out, key=lambda d: (-d["count"], d["op"], d["from"], d["to"]))


def _histogram(ratios: np.ndarray) -> dict[str, Any]:
    finite = ratios[np.isfinite(ratios)]
    counts = np.bincount(
        np.searchsorted(np.asarray(HISTOGRAM_EDGES), finite, side="right"),
        minlength=len(HISTOGRAM_EDGES) + 1,
    )
    return {"edges": list(HISTOGRAM_EDGES), "counts": [int(c) for c in counts]}


def _case_dict(table: CaseTable, i: int) -> CaseRow:
    def num(name: str) -> Any:
        return _py(table[name][i])

    row: CaseRow = {
        "key": str(table["key"][i]),
        "op": str(table["op"][i]),
        "dtype": str(table["dtype"][i]),
        "params": {name: _py(values[i]) for name, values in table.fields if values[i] is not None},
        "kernel_base": str(table["kernel_base"][i]),
        "kernel_cand": str(table["kernel_cand"][i]),
        "base_ms": num("base_ms"),
        "cand_ms": num("cand_ms"),
        "ratio": num("ratio"),
        "lo": num("lo"),
        "hi": num("hi"),
        "p": num("p"),
        "q": num("q"),
        "noise": num("noise"),
        "threshold": num("threshold"),
        "method": str(table["method"][i]),
        "base_runs": int(table["base_runs"][i]),
        "cand_runs": int(table["cand_runs"][i]),
        "verdict": str(table["verdict"][i]),
        "dispatch_change": str(table["kernel_base"][i]) != str(table["kernel_cand"][i]),
        "outliers": {
            name: int(table[f"{side}_{what}"][i])
            for side in ("base", "cand")
            for what, name in (("outliers", side), ("samples", f"{side}_samples"))
        },
        "gpu": {
            "base": num("base_gpu"),
            "cand": num("cand_gpu"),
            "match": str(table["gpu_match"][i]),
            "offset": num("offset"),
            "offset_sd": num("offset_sd"),
            "raw_ratio": num("raw_ratio"),
        },
        "remeasured": bool(table["remeasured"][i]),
        "confirmed": bool(table["confirmed"][i]),
    }
    if table["levels"][i] > 0:
        row["levels"] = int(table["levels"][i])
    if (trend := drift.case_drift(table.cols, i)) is not None:
        row["drift"] = trend
    if row["remeasured"]:
        row["first_verdict"] = str(table["first_verdict"][i])
        # The replication's figures, from the confirm_ columns of the same names.
        row["confirmation"] = {
            **{name: num(f"confirm_{name}") for name in ("ratio", "lo", "hi", "q")},
            "verdict": str(table["confirm_verdict"][i]),
            "base_runs": int(table["confirm_base_runs"][i]),
            "cand_runs": int(table["confirm_cand_runs"][i]),
        }
    return row


def _py(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def notable_indices(table: CaseTable, per_verdict: int = NOTABLE_PER_VERDICT) -> np.ndarray:
    """Cases worth listing: every non-same or re-measured case, the largest changes first,
    at most `per_verdict` per verdict."""
    size = np.abs(np.log(np.where(np.isfinite(table["ratio"]), table["ratio"], 1.0)))
    chosen = []
    for v in (stats.REGRESSED, stats.IMPROVED, stats.INCONCLUSIVE, stats.SAME):
        mask = table["verdict"] == v
        if v == stats.SAME:
            mask &= table["remeasured"]
        members = np.flatnonzero(mask)
        members = members[np.argsort(-size[members], kind="stable")][:per_verdict]
        chosen.append(members)
    return np.concatenate(chosen) if chosen else np.array([], dtype=np.int64)


def cases_to_confirm(table: CaseTable) -> list[str]:
    """Keys of the sampled cases whose verdict a re-measurement should confirm."""
    mask = np.isin(table["verdict"], CONFIRM_VERDICTS) & (table["method"] == SAMPLES)
    return [str(k) for k in table["key"][mask]]


def compare_latency(
    base: RunRecord,
    cand: RunRecord,
    settings: stats.Settings,
    confirm: tuple[RunRecord, RunRecord] | None = None,
) -> tuple[dict[str, Any], CaseTable]:
    """The latency section of a comparison and the full per-case table."""
    table, added, removed = build_case_table(base, cand, settings, confirm)
    rng = np.random.default_rng(settings.seed + 1)
    listed = notable_indices(table)
    section = {
        "cases": [_case_dict(table, int(i)) for i in listed],
        "cases_listed": int(listed.size),
        "cases_total": len(table),
        "summary": _summary(table, added, removed),
        "groups": _grouped(
            table,
            (("op", "op"), ("dtype", "dtype"), ("kernel_cand", "kernel_source")),
            settings,
            rng,
        ),
        "by_dtype": _grouped(table, (("op", "op"), ("dtype", "dtype")), settings, rng),
        "dispatch_changes": _dispatch_changes(table),
        "histogram": _histogram(table["ratio"]),
        "outliers": outlier_summary(table),
        "drift": drift.summary(table.cols, settings),
        "gpu": table.gpu,
    }
    return section, table
