"""Coverage: did the candidate measure what it planned to, and what the baseline measured?"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from collector.record import RunRecord

# Rows below this share of planned cases make the run's coverage red, whatever the exit code.
MIN_ROW_SHARE = 0.5


def side_counts(record: RunRecord, op: str) -> dict[str, int]:
    per_op = ((record.meta.get("counts") or {}).get("per_op") or {}).get(op) or {}
    rows = record.perf[op].num_rows if op in record.perf else 0
    duplicates = sum(
        1 for a in record.anomalies if a.kind == "duplicate_case" and a.file.startswith(f"{op}_")
    )
    invalid = sum(
        1
        for a in record.anomalies
        if a.kind in ("invalid_latency", "invalid_row") and a.file.startswith(f"{op}_")
    )
    planned = int(per_op.get("planned", rows))
    attempted = int(per_op.get("attempted", rows))
    return {
        "planned": planned,
        "attempted": attempted,
        "rows": rows,
        "failed": int(per_op.get("failed", 0)),
        "not_attempted": max(0, planned - attempted),
        "duplicates": duplicates,
        "invalid": invalid,
    }


def lost_cases(base: RunRecord, cand: RunRecord, op: str) -> list[str]:
    """Keys the baseline measured that the candidate neither measured nor saw fail."""
    if op not in base.perf:
        return []
    keys = base.perf[op].column("case_key").combine_chunks()
    gone = pa.array(sorted({f.case_key for f in cand.failures}), type=pa.string())
    if op in cand.perf:
        cand_keys = cand.perf[op].column("case_key").combine_chunks()
        gone = pa.concat_arrays([gone, cand_keys.cast(pa.string())])
    lost = keys.filter(pc.invert(pc.is_in(keys, value_set=gone)))
    return sorted(str(k) for k in lost.to_pylist())


def _shard(record: RunRecord) -> tuple[int, int] | None:
    """(i, n) when the record is one shard of a plan cut in n > 1 (not a merged record)."""
    shard = record.meta.get("shard")
    if (
        isinstance(shard, list)
        and len(shard) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
        and shard[1] > 1
    ):
        return int(shard[0]), int(shard[1])
    return None


def _finding(level: str, op: str, text: str) -> dict[str, str]:
    return {"level": level, "op": op, "text": text}


def _op_findings(c: dict[str, Any] | None, op: str) -> list[dict[str, str]]:
    """What is wrong with the candidate's counts of one op (None: the op was not collected)."""
    if c is None:
        return [_finding("red", op, "op not collected by the candidate")]
    out = []
    if c["planned"] > 0 and c["rows"] == 0:
        out.append(_finding("red", op, "zero rows"))
    elif c["planned"] > 0 and c["rows"] < MIN_ROW_SHARE * c["planned"]:
        out.append(_finding("red", op, f"only {c['rows']} rows of {c['planned']} planned"))
    if c["not_attempted"]:
        out.append(_finding("red", op, f"{c['not_attempted']} planned cases never attempted"))
    if c["duplicates"] or c["invalid"]:
        text = f"{c['duplicates']} duplicate and {c['invalid']} invalid rows dropped"
        out.append(_finding("yellow", op, text))
    return out


def compare_coverage(base: RunRecord, cand: RunRecord) -> dict[str, Any]:
    """Per op: counts on both sides, cases lost since the baseline, and red findings."""
    ops = sorted(set(base.ops) | set(cand.ops))
    per_op: dict[str, Any] = {}
    findings: list[dict[str, str]] = []
    if cand.status != "complete":
        text = f"candidate run is {cand.status}: it stopped before measuring its plan"
        findings.append(_finding("red", "*", text))
    shard = _shard(cand)
    if shard is not None:
        text = (
            f"candidate is shard {shard[0]}/{shard[1]} of its plan: the other "
            f"{shard[1] - 1} shards' cases are not in it (merge the shards first)"
        )
        findings.append(_finding("red", "*", text))
    for op in ops:
        b = side_counts(base, op) if op in base.ops else None
        c = side_counts(cand, op) if op in cand.ops else None
        lost = lost_cases(base, cand, op)
        found = _op_findings(c, op)
        if lost:
            text = (
                "1 case measured by the baseline is missing"
                if len(lost) == 1
                else f"{len(lost)} cases measured by the baseline are missing"
            )
            found.append(_finding("yellow", op, text))
        # The op's status: its worst finding; any op of a lone shard is red.
        levels = {f["level"] for f in found}
        status = "red" if "red" in levels or shard is not None else levels.pop() if levels else "ok"
        findings += found
        per_op[op] = {
            "base": b,
            "cand": c,
            "missing_vs_base": lost[:50],
            "missing_count": len(lost),
            "status": status,
        }
    return {"ops": per_op, "findings": findings}
