"""Check vllm-backend rows against the field's H200 vLLM tables (realism and kernel names).

Usage:
    python -m bench.vllm_reference RUN_DIR [RUN_DIR ...] [--smoke smoke.jsonl]
        [--reference-dir DIR] [--version 0.24.0] [--json out.json]

Joins each row (from run records, or from `bench/gpu/vllm_smoke.py` JSON lines) with the
reference row of the same op and case fields, then reports per (op, dtype): matched rows,
the median and p10/p90 of latency / reference latency, the share within 5%, and how many
rows name the same kernel. A group is "within 5% at the median" when |median - 1| <= 0.05.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench import reference_data
from bench.common import markdown_table
from collector.ops import get_op
from collector.record import read_record

TABLES = {
    "gemm": "h200_sxm_gemm_vllm_{v}_gemm_perf.parquet",
    "context_attention": "h200_sxm_attention_vllm_{v}_context_attention_perf.parquet",
    "generation_attention": "h200_sxm_attention_vllm_{v}_generation_attention_perf.parquet",
}
TOLERANCE = 0.05


@dataclass
class GroupResult:
    op: str
    dtype: str
    rows: int
    matched: int
    median_ratio: float | None
    p10_ratio: float | None
    p90_ratio: float | None
    within_5pct: float | None
    kernel_agree: int
    kernel_pairs: dict[str, int]

    @property
    def verdict(self) -> str:
        if self.median_ratio is None:
            return "no reference rows"
        ok = abs(self.median_ratio - 1.0) <= TOLERANCE
        return "within 5% at the median" if ok else "outside 5% at the median"


def case_key(op: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in get_op(op).field_names)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def compare_rows(
    op: str, rows: Iterable[Mapping[str, Any]], reference: Iterable[Mapping[str, Any]]
) -> list[GroupResult]:
    """Per dtype family of `op`: latency ratios and kernel-name agreement."""
    spec = get_op(op)
    ref = {case_key(op, r): r for r in reference}
    groups: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]] = {}
    for row in rows:
        groups.setdefault(spec.dtype_of(row), []).append((row, ref.get(case_key(op, row))))
    results = []
    for dtype in sorted(groups):
        pairs = groups[dtype]
        matched = [(r, f) for r, f in pairs if f is not None]
        ratios = [float(r["latency"]) / float(f["latency"]) for r, f in matched]
        kernel_pairs: dict[str, int] = {}
        for r, f in matched:
            label = f"{r['kernel_source']} | {f['kernel_source']}"
            kernel_pairs[label] = kernel_pairs.get(label, 0) + 1
        results.append(
            GroupResult(
                op=op,
                dtype=dtype,
                rows=len(pairs),
                matched=len(matched),
                median_ratio=statistics.median(ratios) if ratios else None,
                p10_ratio=_quantile(ratios, 0.1) if ratios else None,
                p90_ratio=_quantile(ratios, 0.9) if ratios else None,
                within_5pct=(
                    sum(abs(x - 1.0) <= TOLERANCE for x in ratios) / len(ratios) if ratios else None
                ),
                kernel_agree=sum(r["kernel_source"] == f["kernel_source"] for r, f in matched),
                kernel_pairs=kernel_pairs,
            )
        )
    return results


@dataclass
class OffsetFit:
    """What the table adds to our latency, fitted on a GEMM's tokens and activation size:
    table - ours (us) = per_k_tokens_us x m / 1000 + slope_us_per_m x m*k (millions of
    elements) + intercept. Both slopes together are the signature of a per-token pass over
    the activations that the table times and we do not (a per-row cost and a per-element
    one: a per-token quantiser); a constant with no slope is a fixed per-call cost."""

    dtype: str
    matched: int
    per_k_tokens_us: float
    slope_us_per_m: float
    intercept_us: float
    r2: float


def offset_fit(
    rows: Iterable[Mapping[str, Any]], reference: Iterable[Mapping[str, Any]]
) -> list[OffsetFit]:
    """Per GEMM dtype family, the least-squares plane of (table - ours) on m and m*k (a
    line on m*k where the draw's m and m*k are not independent)."""
    spec = get_op("gemm")
    ref = {case_key("gemm", r): r for r in reference}
    points: dict[str, list[tuple[float, float, float]]] = {}
    for row in rows:
        match = ref.get(case_key("gemm", row))
        if match is not None:
            gap_us = (float(match["latency"]) - float(row["latency"])) * 1e3
            point = (row["m"] / 1e3, row["m"] * row["k"] / 1e6, gap_us)
            points.setdefault(spec.dtype_of(row), []).append(point)
    fits = []
    for dtype in sorted(points):
        tokens, elements, gaps = np.asarray(points[dtype], dtype=float).T
        if gaps.size < 4 or np.ptp(elements) == 0 or np.ptp(gaps) == 0:  # nothing to fit
            continue
        ones = np.ones_like(gaps)
        design = np.column_stack([tokens, elements, ones])
        if np.linalg.matrix_rank(design) < 3:
            design = np.column_stack([np.zeros_like(gaps), elements, ones])
        coef = np.linalg.lstsq(design, gaps, rcond=None)[0]
        residual = gaps - design @ coef
        r2 = 1.0 - float(residual @ residual) / float(((gaps - gaps.mean()) ** 2).sum())
        per_token, per_element, intercept = (float(c) for c in coef)
        fits.append(OffsetFit(dtype, int(gaps.size), per_token, per_element, intercept, r2))
    return fits


def rows_from_record(path: Path) -> dict[str, list[dict[str, Any]]]:
    record = read_record(path)
    return {op: table.to_pylist() for op, table in record.perf.items()}


def rows_from_smoke(path: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "latency_ms" not in row or row.get("kv_block_size"):
            continue
        out.setdefault(row["op"], []).append(
            {**row["params"], "latency": row["latency_ms"], "kernel_source": row["kernel_source"]}
        )
    return out


def markdown(results: Sequence[GroupResult]) -> str:
    header = ["op", "dtype", "rows (matched)", "median ratio", "p10-p90", "within 5%"]
    header += ["same kernel", "verdict"]
    rows = []
    for g in results:
        median = f"{g.median_ratio:.3f}" if g.median_ratio is not None else "-"
        spread = (
            f"{g.p10_ratio:.3f}-{g.p90_ratio:.3f}"
            if g.p10_ratio is not None and g.p90_ratio is not None
            else "-"
        )
        share = f"{g.within_5pct:.0%}" if g.within_5pct is not None else "-"
        matched, agree = f"{g.rows} ({g.matched})", f"{g.kernel_agree}/{g.matched}"
        rows.append((g.op, g.dtype, matched, median, spread, share, agree, g.verdict))
    return markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="Run record directories.")
    parser.add_argument("--smoke", type=Path, help="JSON lines from bench/gpu/vllm_smoke.py.")
    parser.add_argument("--reference-dir", type=Path, default=reference_data.default_dir())
    parser.add_argument("--version", default="0.24.0", help="vLLM version of the tables.")
    parser.add_argument("--json", type=Path, help="Also write the results as JSON.")
    args = parser.parse_args()
    reference_dir = reference_data.require(args.reference_dir)
    rows: dict[str, list[dict[str, Any]]] = {}
    sources = [rows_from_record(p) for p in args.runs]
    if args.smoke:
        sources.append(rows_from_smoke(args.smoke))
    for source in sources:
        for op, op_rows in source.items():
            rows.setdefault(op, []).extend(op_rows)
    results: list[GroupResult] = []
    for op in sorted(rows):
        table = reference_dir / TABLES[op].format(v=args.version)
        results += compare_rows(op, rows[op], pq.read_table(table).to_pylist())
    print(markdown(results))
    for g in results:
        for pair, count in sorted(g.kernel_pairs.items()):
            print(f"  {g.op}/{g.dtype}: ours | reference = {pair}: {count}")
    if args.json:
        args.json.write_text(json.dumps([asdict(g) for g in results], indent=1))


if __name__ == "__main__":
    main()
