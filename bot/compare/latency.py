"""Per-case latency comparison and per-group aggregates."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa

from bot.compare import stats
from collector.ops import get_op
from collector.record import RunRecord


def runs_by_case(samples: pa.Table) -> dict[str, list[np.ndarray]]:
    """Group a samples table into {case_key: [samples of run 0, run 1, ...]}."""
    if samples.num_rows == 0:
        return {}
    keys = np.asarray(samples.column("case_key").to_pylist(), dtype=object)
    runs = samples.column("run").to_numpy()
    ms = samples.column("ms").to_numpy(zero_copy_only=False).astype(float)
    order = np.lexsort((runs, keys))
    keys, runs, ms = keys[order], runs[order], ms[order]
    boundaries = np.flatnonzero((keys[1:] != keys[:-1]) | (runs[1:] != runs[:-1])) + 1
    out: dict[str, list[np.ndarray]] = defaultdict(list)
    for chunk_keys, chunk_ms in zip(
        np.split(keys, boundaries), np.split(ms, boundaries), strict=True
    ):
        valid = chunk_ms[np.isfinite(chunk_ms) & (chunk_ms > 0)]
        if valid.size:
            out[str(chunk_keys[0])].append(valid)
    return dict(out)


def perf_rows(record: RunRecord, op: str) -> dict[str, dict[str, Any]]:
    table = record.perf.get(op)
    if table is None:
        return {}
    spec = get_op(op)
    wanted = ["case_key", "latency", "kernel_source", *spec.field_names]
    cols = {name: table.column(name).to_pylist() for name in wanted}
    return {key: {name: cols[name][i] for name in wanted} for i, key in enumerate(cols["case_key"])}


def compare_latency(base: RunRecord, cand: RunRecord, settings: stats.Settings) -> dict[str, Any]:
    rng = np.random.default_rng(settings.seed)
    cases: list[dict[str, Any]] = []
    sampled: list[tuple[dict[str, Any], list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]]
    sampled = []
    added: dict[str, int] = {}
    removed: dict[str, int] = {}
    for op in sorted(set(base.ops) & set(cand.ops)):
        spec = get_op(op)
        b_rows, c_rows = perf_rows(base, op), perf_rows(cand, op)
        b_runs = runs_by_case(base.samples[op]) if op in base.samples else {}
        c_runs = runs_by_case(cand.samples[op]) if op in cand.samples else {}
        matched = sorted(set(b_rows) & set(c_rows))
        # A case that now fails is a failure-group finding, not a removed case.
        cand_failed = {f.case_key for f in cand.failures}
        base_failed = {f.case_key for f in base.failures}
        added[op] = len(set(c_rows) - set(b_rows) - base_failed)
        removed[op] = len(set(b_rows) - set(c_rows) - cand_failed)
        for key in matched:
            b, c = b_rows[key], c_rows[key]
            entry: dict[str, Any] = {
                "key": key,
                "op": op,
                "dtype": str(c[spec.dtype_field]),
                "params": {name: c[name] for name in spec.field_names},
                "kernel_base": b["kernel_source"],
                "kernel_cand": c["kernel_source"],
                "base_ms": b["latency"],
                "cand_ms": c["latency"],
            }
            br, cr = b_runs.get(key), c_runs.get(key)
            if br and cr:
                bm, cm = stats.run_medians(br), stats.run_medians(cr)
                noise = stats.noise_of(bm, cm)
                entry.update(
                    method="samples",
                    ratio=float(np.median(cm) / np.median(bm)),
                    noise=noise,
                    threshold=stats.threshold_for(noise, settings),
                    base_runs=int(bm.size),
                    cand_runs=int(cm.size),
                )
                sampled.append((entry, br, cr, bm, cm))
            else:
                ratio = float(c["latency"] / b["latency"])
                entry.update(
                    method="size-only",
                    ratio=ratio,
                    lo=ratio,
                    hi=ratio,
                    p=float("nan"),
                    noise=None,
                    threshold=settings.size_only_threshold,
                    base_runs=len(br or []),
                    cand_runs=len(cr or []),
                )
            cases.append(entry)
    # The expensive statistics run batched over all sampled cases at once.
    intervals = stats.ratio_intervals([(br, cr) for _, br, cr, _, _ in sampled], settings, rng)
    pvalues = stats.run_test_pvalues([(bm, cm) for _, _, _, bm, cm in sampled])
    for (entry, *_), (lo, hi), p in zip(sampled, intervals, pvalues, strict=True):
        entry.update(lo=lo, hi=hi, p=float(p))
    _assign_verdicts(cases, settings)
    return {
        "cases": cases,
        "summary": _summary(cases, added, removed),
        "groups": _groups(cases, settings, rng),
        "dispatch_changes": _dispatch_changes(cases),
    }


def _assign_verdicts(cases: list[dict[str, Any]], settings: stats.Settings) -> None:
    sampled = [c for c in cases if c["method"] == "samples"]
    q = stats.bh_qvalues(np.array([c["p"] for c in sampled], dtype=float))
    for case, qv in zip(sampled, q, strict=True):
        case["q"] = float(qv)
        case["verdict"] = stats.verdict(
            case["ratio"],
            case["lo"],
            case["hi"],
            float(qv),
            case["threshold"],
            settings.alpha,
            settings.max_same_band,
        )
    for case in cases:
        if case["method"] == "size-only":
            case["q"] = float("nan")
            case["verdict"] = stats.size_only_verdict(case["ratio"], settings)


def _summary(
    cases: list[dict[str, Any]], added: dict[str, int], removed: dict[str, int]
) -> dict[str, Any]:
    counts = {v: 0 for v in stats.VERDICTS}
    for c in cases:
        counts[c["verdict"]] += 1
    size_only = sum(1 for c in cases if c["method"] == "size-only")
    return {
        "matched": len(cases),
        "added": sum(added.values()),
        "removed": sum(removed.values()),
        "added_by_op": added,
        "removed_by_op": removed,
        "verdicts": counts,
        "size_only": size_only,
    }


def _groups(
    cases: list[dict[str, Any]], settings: stats.Settings, rng: np.random.Generator
) -> list[dict[str, Any]]:
    by_group: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        by_group[(c["op"], c["dtype"], c["kernel_cand"])].append(c)
    out = []
    for (op, dtype, kernel), items in sorted(by_group.items()):
        logs = np.log(np.array([c["ratio"] for c in items], dtype=float))
        point, lo, hi = stats.geomean_interval(logs, settings, rng)
        counts = {v: sum(1 for c in items if c["verdict"] == v) for v in stats.VERDICTS}
        out.append(
            {
                "op": op,
                "dtype": dtype,
                "kernel_source": kernel,
                "cases": len(items),
                "geomean": point,
                "lo": lo,
                "hi": hi,
                "verdicts": counts,
            }
        )
    return out


def _dispatch_changes(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pairs: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for c in cases:
        if c["kernel_base"] != c["kernel_cand"]:
            pairs[(c["op"], c["kernel_base"], c["kernel_cand"])].append(c["key"])
    return [
        {"op": op, "from": frm, "to": to, "count": len(keys), "sample_cases": keys[:5]}
        for (op, frm, to), keys in sorted(pairs.items(), key=lambda kv: -len(kv[1]))
    ]
