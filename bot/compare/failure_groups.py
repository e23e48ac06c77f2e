"""Failure groups: new, resolved and persisting between two runs, with flags."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from collector.failures import FailureRecord, identity_key, normalise_message

# A group covering this share of an op's planned cases is systemic.
SYSTEMIC_SHARE = 1.0 / 3.0
# New failures above this share of an op's planned cases ask for a human look.
INVESTIGATE_SHARE = 0.10
TRACEBACK_LINES = 12


def _short_traceback(tb: str) -> str:
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-TRACEBACK_LINES:])


def summarise_groups(failures: list[FailureRecord]) -> dict[str, dict[str, Any]]:
    """Failures by group, keyed by the identity recomputed from each record's fields (what
    failed and how, never which worker, device or time): the stored key is not trusted."""
    groups: dict[str, list[FailureRecord]] = defaultdict(list)
    for f in failures:
        groups[identity_key(f)].append(f)
    out = {}
    for key, items in groups.items():
        first = min(items, key=lambda f: f.case_key)
        out[key] = {
            "group_key": key,
            "op": first.op,
            "classification": first.classification,
            "exception_type": first.exception_type,
            "dtype": first.dtype,
            "message": normalise_message(first.message),
            "count": len({f.case_key for f in items}),
            "sample_case": first.case_key,
            "sample_params": first.params,
            "sample_message": first.message,
            "traceback": _short_traceback(first.traceback or ""),
            "signal": first.signal,
            "exit_code": first.exit_code,
        }
    return out


def compare_groups(
    base: list[FailureRecord],
    cand: list[FailureRecord],
    planned_by_op: dict[str, int],
    planned_by_op_dtype: dict[tuple[str, str], int],
    measured: set[str] | None = None,
) -> dict[str, Any]:
    """New, persisting and resolved groups. A resolved group says how many of its cases the
    candidate measured (`now_measured`, given the keys with candidate rows): resolved by a
    fix, or only because they were not attempted."""
    b, c = summarise_groups(base), summarise_groups(cand)
    measured = measured or set()
    base_cases: dict[str, set[str]] = defaultdict(set)
    for f in base:
        base_cases[identity_key(f)].add(f.case_key)
    new, persisting, resolved = [], [], []
    for key, group in c.items():
        planned = planned_by_op.get(group["op"], 0)
        family = planned_by_op_dtype.get((group["op"], group["dtype"]), 0)
        group["systemic"] = bool(
            planned
            and (
                group["count"] >= SYSTEMIC_SHARE * planned or (family and group["count"] >= family)
            )
        )
        if key in b:
            group["base_count"] = b[key]["count"]
            persisting.append(group)
        else:
            group["base_count"] = 0
            new.append(group)
    for key, group in b.items():
        if key not in c:
            group["now_measured"] = len(base_cases[key] & measured)
            resolved.append(group)
    new_by_op: dict[str, int] = defaultdict(int)
    for group in new:
        new_by_op[group["op"]] += group["count"]
    investigate = sorted(
        op
        for op, count in new_by_op.items()
        if planned_by_op.get(op) and count >= INVESTIGATE_SHARE * planned_by_op[op]
    )
    order = lambda g: (-g["count"], g["group_key"])  # noqa: E731
    return {
        "new": sorted(new, key=order),
        "resolved": sorted(resolved, key=order),
        "persisting": sorted(persisting, key=order),
        "investigate_ops": investigate,
        "failed_cases": {
            "base": len({f.case_key for f in base}),
            "cand": len({f.case_key for f in cand}),
        },
    }
