"""Assemble failure groups, coverage and latency into one comparison with one verdict."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.compare import stats
from bot.compare.coverage import compare_coverage
from bot.compare.failure_groups import compare_groups
from bot.compare.latency import compare_latency
from collector.errors import UserError
from collector.record import RunRecord

SCHEMA_VERSION = 1
COMPARISON_JSON = "comparison.json"
RED, YELLOW, GREEN = "red", "yellow", "green"

# Run-record fields carried into the comparison for provenance and reproduction.
_PROVENANCE_FIELDS = (
    "run_id",
    "status",
    "backend",
    "framework",
    "framework_version",
    "ops",
    "plan_hash",
    "case_set",
    "case_filter",
    "collector_hash",
    "image",
    "git_sha",
    "device",
    "versions",
    "command",
    "protocol",
    "canary",
    "started_at",
    "finished_at",
    "counts",
)


def provenance(record: RunRecord) -> dict[str, Any]:
    out = {k: record.meta.get(k) for k in _PROVENANCE_FIELDS}
    out["path"] = str(record.path)
    out["source"] = record.meta.get("source", "collector")
    return out


def _planned(record: RunRecord) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    per_op = {
        op: int(v.get("planned", 0))
        for op, v in record.meta.get("counts", {}).get("per_op", {}).items()
    }
    family: Counter[tuple[str, str]] = Counter()
    keys: set[str] = set()
    for op, table in record.perf.items():
        dtype_field = _dtype_field(op)
        for key, dtype in zip(
            table.column("case_key").to_pylist(), table.column(dtype_field).to_pylist(), strict=True
        ):
            keys.add(key)
            family[(op, str(dtype))] += 1
    for f in record.failures:
        if f.case_key not in keys:
            keys.add(f.case_key)
            family[(f.op, f.dtype)] += 1
    return per_op, dict(family)


def _dtype_field(op: str) -> str:
    from collector.ops import get_op

    return get_op(op).dtype_field


def _keys_by_op(record: RunRecord) -> dict[str, set[str]]:
    return {op: set(t.column("case_key").to_pylist()) for op, t in record.perf.items()}


def compare_records(
    base: RunRecord,
    cand: RunRecord,
    settings: stats.Settings | None = None,
    baseline_kind: str = "run",
) -> dict[str, Any]:
    settings = settings or stats.Settings()
    planned_by_op, planned_by_family = _planned(cand)
    groups = compare_groups(base.failures, cand.failures, planned_by_op, planned_by_family)
    coverage = compare_coverage(base, cand, _keys_by_op(base), _keys_by_op(cand))
    latency = compare_latency(base, cand, settings)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "baseline": {"kind": baseline_kind, **provenance(base)},
        "candidate": provenance(cand),
        "settings": settings.__dict__.copy(),
        "failure_groups": groups,
        "coverage": coverage,
        "latency": latency,
        "anomalies": {
            "base": [a.to_json() for a in base.anomalies],
            "cand": [a.to_json() for a in cand.anomalies],
        },
        "warnings": _warnings(base, cand),
    }
    result["verdict"] = overall_verdict(result)
    return result


def _warnings(base: RunRecord, cand: RunRecord) -> list[str]:
    out = []
    bdev, cdev = base.meta.get("device", {}), cand.meta.get("device", {})
    if bdev.get("name") != cdev.get("name"):
        out.append(f"devices differ: baseline {bdev.get('name')!r}, candidate {cdev.get('name')!r}")
    if base.meta.get("framework_version") != cand.meta.get("framework_version"):
        out.append(
            f"framework versions differ: baseline {base.meta.get('framework_version')}, "
            f"candidate {cand.meta.get('framework_version')}"
        )
    for side, rec in (("baseline", base), ("candidate", cand)):
        canary = rec.meta.get("canary")
        if canary:
            parts = []
            if canary.get("slow"):
                parts.append(f"slows {canary['slow']!r} by {canary.get('factor')}x")
            if canary.get("fail"):
                parts.append(f"makes {canary['fail']!r} fail")
            out.append(f"the {side} run carries a canary (a deliberate change): {'; '.join(parts)}")
    return out


def overall_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """Red: the PR breaks something; yellow: look closer; green: nothing moved."""
    reasons: list[tuple[str, str]] = []
    groups = result["failure_groups"]
    summary = result["latency"]["summary"]["verdicts"]
    for finding in result["coverage"]["findings"]:
        reasons.append((finding["level"], f"coverage ({finding['op']}): {finding['text']}"))
    if groups["new"]:
        cases = sum(g["count"] for g in groups["new"])
        reasons.append(
            (RED, f"{_n(len(groups['new']), 'new failure group')} ({_n(cases, 'case')})")
        )
    if summary[stats.REGRESSED]:
        reasons.append((RED, f"{_n(summary[stats.REGRESSED], 'case')} regressed"))
    if summary[stats.INCONCLUSIVE]:
        reasons.append((YELLOW, f"{_n(summary[stats.INCONCLUSIVE], 'case')} inconclusive"))
    if result["latency"]["dispatch_changes"]:
        n = sum(d["count"] for d in result["latency"]["dispatch_changes"])
        reasons.append((YELLOW, f"{_n(n, 'case')} changed kernel"))
    for op in groups["investigate_ops"]:
        reasons.append((YELLOW, f"investigate: many new failures in {op}"))
    if any(a for a in result["anomalies"].values()):
        reasons.append((YELLOW, "anomalies in the records"))
    level = GREEN
    if any(lvl == RED for lvl, _ in reasons):
        level = RED
    elif reasons:
        level = YELLOW
    parts = []
    if summary[stats.REGRESSED]:
        parts.append(f"{summary[stats.REGRESSED]} regressed")
    if groups["new"]:
        parts.append(_n(len(groups["new"]), "new failure group"))
    if summary[stats.IMPROVED]:
        parts.append(f"{summary[stats.IMPROVED]} improved")
    if groups["resolved"]:
        parts.append(f"{_n(len(groups['resolved']), 'failure group')} resolved")
    if summary[stats.INCONCLUSIVE]:
        parts.append(f"{summary[stats.INCONCLUSIVE]} inconclusive")
    if any(f["level"] == RED for f in result["coverage"]["findings"]):
        parts.insert(0, "coverage lost")
    parts.append(f"{summary[stats.SAME]} unchanged")
    return {"level": level, "headline": ", ".join(parts), "reasons": [r for _, r in reasons]}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def write_comparison(result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / COMPARISON_JSON
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_jsonable(result), indent=1, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def load_comparison(path: Path) -> dict[str, Any]:
    target = path / COMPARISON_JSON if path.is_dir() else path
    if not target.is_file():
        raise UserError(f"{target}: comparison not found (run `collectbot compare` first)")
    try:
        data = json.loads(target.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{target}: not valid JSON ({exc})") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise UserError(f"{target}: unknown schema_version {version!r}")
    result: dict[str, Any] = data
    return result
