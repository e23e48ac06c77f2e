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


def compare_coverage(base: RunRecord, cand: RunRecord) -> dict[str, Any]:
    """Per op: counts on both sides, cases lost since the baseline, and red findings."""
    ops = sorted(set(base.ops) | set(cand.ops))
    per_op: dict[str, Any] = {}
    findings: list[dict[str, str]] = []
    if cand.status != "complete":
        findings.append(
            {
                "level": "red",
                "op": "*",
                "text": f"candidate run is {cand.status}: it stopped before measuring its plan",
            }
        )
    shard = _shard(cand)
    if shard is not None:
        findings.append(
            {
                "level": "red",
                "op": "*",
                "text": (
                    f"candidate is shard {shard[0]}/{shard[1]} of its plan: the other "
                    f"{shard[1] - 1} shards' cases are not in it (merge the shards first)"
                ),
            }
        )
    for op in ops:
        b = side_counts(base, op) if op in base.ops else None
        c = side_counts(cand, op) if op in cand.ops else None
        lost = lost_cases(base, cand, op)
        status = "ok"
        if c is None:
            status = "red"
            findings.append({"level": "red", "op": op, "text": "op not collected by the candidate"})
        else:
            if c["planned"] > 0 and c["rows"] == 0:
                status = "red"
                findings.append({"level": "red", "op": op, "text": "zero rows"})
            elif c["planned"] > 0 and c["rows"] < MIN_ROW_SHARE * c["planned"]:
                status = "red"
                findings.append(
                    {
                        "level": "red",
                        "op": op,
                        "text": f"only {c['rows']} rows of {c['planned']} planned",
                    }
                )
            if c["not_attempted"]:
                status = "red"
                findings.append(
                    {
                        "level": "red",
                        "op": op,
                        "text": f"{c['not_attempted']} planned cases never attempted",
                    }
                )
            if c["duplicates"] or c["invalid"]:
                status = "red" if status == "red" else "yellow"
                findings.append(
                    {
                        "level": "yellow",
                        "op": op,
                        "text": (
                            f"{c['duplicates']} duplicate and {c['invalid']} invalid rows dropped"
                        ),
                    }
                )
        if shard is not None:
            status = "red"
        if lost:
            status = "red" if status == "red" else "yellow"
            findings.append(
                {
                    "level": "yellow",
                    "op": op,
                    "text": (
                        "1 case measured by the baseline is missing"
                        if len(lost) == 1
                        else f"{len(lost)} cases measured by the baseline are missing"
                    ),
                }
            )
        per_op[op] = {
            "base": b,
            "cand": c,
            "missing_vs_base": lost[:50],
            "missing_count": len(lost),
            "status": status,
        }
    return {"ops": per_op, "findings": findings}
