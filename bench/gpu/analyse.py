"""Analyse an H200 protocol session: A/A flags, canary detection, realism, cost.

    python -m bench.gpu.analyse SESSION_DIR [--aic-dir DIR]

SESSION_DIR holds run records A, B (and C, the canary run). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench import reference_data
from bot.compare.comparison import Comparison, compare_runs
from collector.caseplan import Case, CaseSelector
from collector.record import RunRecord, read_record

from .protocol_session import CANARY


def case_rows(cmp: Comparison) -> list[dict[str, Any]]:
    """Every matched case (comparison.json lists only the top changes; the table has all)."""
    table = cmp.cases
    names = ("key", "op", "ratio", "verdict", "base_ms", "base_runs")
    rows: list[dict[str, Any]] = []
    for i in range(len(table)):
        row = {name: table[name][i] for name in names}
        params = {}
        for name, values in table.fields:
            value = values[i]
            if value is not None and not (isinstance(value, float) and np.isnan(value)):
                params[name] = value.item() if hasattr(value, "item") else value
        row["params"] = params
        rows.append(row)
    return rows


def _flags(cmp: Comparison) -> dict[str, Any]:
    result = cmp.data
    cases = case_rows(cmp)
    diffs = np.array([abs(c["ratio"] - 1.0) for c in cases])
    verdicts: dict[str, int] = {}
    for c in cases:
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    changed = verdicts.get("regressed", 0) + verdicts.get("improved", 0)
    by_op: dict[str, dict[str, int]] = {}
    for c in cases:
        by_op.setdefault(c["op"], {}).setdefault(c["verdict"], 0)
        by_op[c["op"]][c["verdict"]] += 1
    return {
        "cases": len(cases),
        "verdicts": verdicts,
        "changed_pct": 100.0 * changed / max(1, len(cases)),
        "abs_diff_pct": {
            "median": float(np.median(diffs) * 100),
            "p90": float(np.percentile(diffs, 90) * 100),
            "p99": float(np.percentile(diffs, 99) * 100),
            "max": float(diffs.max() * 100),
        },
        "beyond_2pct": int((diffs > 0.02).sum()),
        "by_op": by_op,
        "failures": {
            "base": len(result["failure_groups"]["new"]),
            "groups": [
                (g["sample_case"], g["classification"], g["message"][:120])
                for g in result["failure_groups"]["new"] + result["failure_groups"]["persisting"]
            ][:10],
        },
    }


def _canary(cmp: Comparison) -> dict[str, Any]:
    selector = CaseSelector.parse(CANARY)
    slowed: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for c in case_rows(cmp):
        case = Case.build(c["op"], c["params"])
        (slowed if selector.matches(case) else others).append(c)
    return {
        "slowed": len(slowed),
        "slowed_flagged": len([c for c in slowed if c["verdict"] == "regressed"]),
        "slowed_min_ms": min((c["base_ms"] for c in slowed), default=None),
        "slowed_ratios": sorted(round(c["ratio"], 4) for c in slowed),
        "others_flagged": len([c for c in others if c["verdict"] in ("regressed", "improved")]),
    }


def _cost(rec: RunRecord) -> dict[str, float]:
    secs = np.concatenate([t.column("device_seconds").to_numpy() for t in rec.perf.values()])
    runs = np.concatenate([t.column("runs").to_numpy() for t in rec.perf.values()])
    samples = np.concatenate([t.column("samples").to_numpy() for t in rec.perf.values()])
    return {
        "cases": int(secs.size),
        "device_s_per_case_mean": float(secs.mean()),
        "device_s_per_case_median": float(np.median(secs)),
        "device_s_total": float(secs.sum()),
        "runs_mean": float(runs.mean()),
        "samples_mean": float(samples.mean()),
    }


def _realism(rec: RunRecord, aic_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    table = aic_dir / "h200_sxm_gemm_vllm_0.24.0_gemm_perf.parquet"
    if "gemm" in rec.perf and table.exists():
        aic = pq.read_table(table).to_pylist()
        ref = {(r["gemm_dtype"], r["m"], r["n"], r["k"]): r for r in aic}
        for dtype in ("bfloat16", "fp8", "fp8_block"):
            rows = [r for r in rec.perf["gemm"].to_pylist() if r["gemm_dtype"] == dtype]
            pairs = [
                (r, ref[(dtype, r["m"], r["n"], r["k"])])
                for r in rows
                if (dtype, r["m"], r["n"], r["k"]) in ref
            ]
            if not pairs:
                continue
            rel = np.array([ours["latency"] / theirs["latency"] - 1 for ours, theirs in pairs])
            small = np.array([theirs["latency"] < 0.02 for _, theirs in pairs])
            out[f"gemm_{dtype}"] = {
                "matched": len(pairs),
                "median_rel_pct": float(np.median(rel) * 100),
                "median_rel_pct_under_20us": float(np.median(rel[small]) * 100)
                if small.any()
                else None,
                "median_rel_pct_20us_plus": float(np.median(rel[~small]) * 100)
                if (~small).any()
                else None,
                "their_kernels": sorted({t["kernel_source"] for _, t in pairs}),
                "our_kernels": sorted({o["kernel_source"] for o, _ in pairs}),
            }
    for op, name in (
        ("context_attention", "h200_sxm_attention_vllm_0.24.0_context_attention_perf.parquet"),
        (
            "generation_attention",
            "h200_sxm_attention_vllm_0.24.0_generation_attention_perf.parquet",
        ),
    ):
        path = aic_dir / name
        if op not in rec.perf or not path.exists():
            continue
        fields = (
            "batch_size",
            "isl",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "kv_cache_dtype",
            "step",
            "window_size",
        )
        ref = {tuple(r[f] for f in fields): r for r in pq.read_table(path).to_pylist()}
        rows = rec.perf[op].to_pylist()
        pairs = [
            (r, ref[tuple(r[f] for f in fields)])
            for r in rows
            if tuple(r[f] for f in fields) in ref
        ]
        if pairs:
            rel = np.array([o["latency"] / t["latency"] - 1 for o, t in pairs])
            out[op] = {
                "matched": len(pairs),
                "median_rel_pct": float(np.median(rel) * 100),
                "their_kernels": sorted({t["kernel_source"] for _, t in pairs}),
                "our_kernels": sorted({o["kernel_source"] for o, _ in pairs}),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("session", type=Path)
    parser.add_argument("--aic-dir", type=Path, default=reference_data.default_dir())
    args = parser.parse_args()
    a, b = read_record(args.session / "A"), read_record(args.session / "B")
    report: dict[str, Any] = {
        "device": a.meta["device"].get("name"),
        "aa": _flags(compare_runs(a, b)),
        "cost": {"A": _cost(a), "B": _cost(b)},
        "realism": _realism(a, reference_data.require(args.aic_dir, "--aic-dir")),
        "throttled_rows": int(
            sum(
                int(np.sum(t.column("throttled").to_numpy(zero_copy_only=False)))
                for t in a.perf.values()
            )
        ),
        "redos": int(sum(int(np.sum(t.column("redos").to_numpy())) for t in a.perf.values())),
    }
    if (args.session / "C").exists():
        c = read_record(args.session / "C")
        report["canary"] = _canary(compare_runs(a, c))
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
