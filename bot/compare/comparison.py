"""Assemble failure groups, coverage and latency into one comparison with one verdict."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bot import __version__
from bot.compare import stats
from bot.compare.contract import (
    CASE_TABLE_SCHEMA,
    LATER_CASE_COLUMNS,
    PARAM_PREFIX,
    ComparisonDoc,
)
from bot.compare.coverage import compare_coverage
from bot.compare.failure_groups import compare_groups
from bot.compare.latency import CONFIRM_VERDICTS, SAMPLES, CaseTable, compare_latency
from collector import jsonfile
from collector.errors import UserError
from collector.record import RunRecord

if TYPE_CHECKING:
    from bot.compare.history_verdict import BaselineHistory

# Version 2: notable cases only in the JSON (all of them in cases.parquet), confirmation,
# baseline kind and pairing, per-dtype aggregates, the ratio histogram.
SCHEMA_VERSION = 2
COMPARISON_JSON = "comparison.json"
CASES_PARQUET = "cases.parquet"
SCHEMA_FILE = Path(__file__).with_name("comparison.schema.json")
BASELINE_KINDS = ("previous-run", "merge-base", "imported-table", "explicit-run")
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
    out["panel"] = panel_brief(record.meta.get("panel"))
    return out


def panel_brief(panel: Any) -> dict[str, Any] | None:
    """What the record's calibration panel cost and covered (collector/panel.py)."""
    from collector.panel import read_panel

    devices = read_panel(panel)
    if not devices:
        return None
    kernels = max(len(k) for k in devices.values())
    runs = max(len(r) for k in devices.values() for _, r in k.values())
    seconds = panel.get("device_seconds") if isinstance(panel, dict) else None
    return {
        "devices": sorted(devices),
        "kernels": kernels,
        "runs": runs,
        "device_seconds": seconds if isinstance(seconds, (int, float)) else None,
    }


def _planned(record: RunRecord) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Planned cases per op (from run.json) and per (op, dtype family) (rows and failures)."""
    per_op = {
        op: int(v.get("planned", 0))
        for op, v in ((record.meta.get("counts") or {}).get("per_op") or {}).items()
    }
    family: Counter[tuple[str, str]] = Counter()
    for op, table in record.perf.items():
        column = pc.cast(table.column(_dtype_field(op)), pa.string())
        for item in pc.value_counts(column).to_pylist():
            family[(op, str(item["values"]))] += int(item["counts"])
    failed = {f.case_key: f for f in record.failures}
    for key in sorted(set(failed) - measured_keys(record, set(failed))):
        family[(failed[key].op, failed[key].dtype)] += 1
    return per_op, dict(family)


def measured_keys(record: RunRecord, keys: set[str]) -> set[str]:
    """Which of `keys` have a perf row in the record (column-wise: records can be large)."""
    if not keys:
        return set()
    wanted = pa.array(sorted(keys), type=pa.string())
    found: set[str] = set()
    for table in record.perf.values():
        present = pc.is_in(wanted, value_set=table.column("case_key").combine_chunks())
        found.update(wanted.filter(present).to_pylist())
    return found


def _dtype_field(op: str) -> str:
    from collector.ops import get_op

    return get_op(op).dtype_field


def has_samples(record: RunRecord) -> bool:
    return any(t.num_rows for t in record.samples.values())


def is_imported(record: RunRecord) -> bool:
    return record.meta.get("source") not in (None, "collector")


@dataclass
class Baseline:
    """What the baseline is, as the comparison and the comment say it.

    `kind`: previous-run (the last stored run of the same key), merge-base (the PR's merge
    base, collected in the same job), imported-table (a perf table without samples) or
    explicit-run (any run record the user named). `paired`: collected alternately with the
    candidate on the same device (the trustworthy form: docs/statistics.md).
    """

    kind: str | None = None  # None: imported-table for imported records, else explicit-run
    paired: bool = False
    store: dict[str, Any] | None = None
    # The last stored baselines: each changed case's range (bot/compare/history_verdict.py).
    history: BaselineHistory | None = None

    def resolve(self, record: RunRecord) -> dict[str, Any]:
        kind = self.kind or ("imported-table" if is_imported(record) else "explicit-run")
        if kind not in BASELINE_KINDS:
            raise UserError(f"baseline kind {kind!r} is not one of {', '.join(BASELINE_KINDS)}")
        out: dict[str, Any] = {"kind": kind, "paired": self.paired}
        if self.store is not None:
            out["store"] = self.store
        return out


@dataclass
class Comparison:
    """comparison.json's content and the full per-case table written beside it."""

    data: dict[str, Any]
    cases: CaseTable

    def write(self, out_dir: Path) -> Path:
        return write_comparison(self, out_dir)


def compare_runs(
    base: RunRecord,
    cand: RunRecord,
    settings: stats.Settings | None = None,
    baseline: Baseline | None = None,
    confirm: tuple[RunRecord, RunRecord] | None = None,
    settings_source: str | None = None,
) -> Comparison:
    """Compare two run records (and, optionally, a paired re-measurement of flagged cases).
    `settings_source` names where the settings came from (a config file; None: defaults)."""
    settings = settings or stats.Settings()
    baseline = baseline or Baseline()
    planned_by_op, planned_by_family = _planned(cand)
    groups = compare_groups(
        base.failures,
        cand.failures,
        planned_by_op,
        planned_by_family,
        measured_keys(cand, {f.case_key for f in base.failures}),
    )
    coverage = compare_coverage(base, cand)
    latency, table = compare_latency(base, cand, settings, confirm)
    latency["cases_file"] = CASES_PARQUET
    doc: ComparisonDoc = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tool": {"name": "collectbot", "version": __version__},
        "baseline": {
            **baseline.resolve(base),
            "has_samples": has_samples(base),
            **provenance(base),
        },
        "candidate": {"has_samples": has_samples(cand), **provenance(cand)},
        "settings": settings.to_json(),
        "settings_source": settings_source,
        "failure_groups": groups,
        "coverage": coverage,
        "latency": latency,
        "confirmation": confirmation_summary(table, confirm),
        "anomalies": {
            "base": [a.to_json() for a in base.anomalies],
            "cand": [a.to_json() for a in cand.anomalies],
        },
        "warnings": _warnings(base, cand, latency, settings),
        "verdict": {},  # from the sections above, just below
    }
    result = cast(dict[str, Any], doc)
    if baseline.history is not None:
        from bot.compare.history_verdict import history_section

        # Annotates the changed cases; never changes a verdict (docs/history.md).
        result["history"] = history_section(latency["cases"], baseline.history)
    result["verdict"] = overall_verdict(result)
    return Comparison(result, table)


def compare_records(
    base: RunRecord,
    cand: RunRecord,
    settings: stats.Settings | None = None,
    baseline_kind: str | None = None,
) -> dict[str, Any]:
    """comparison.json's content only (see `compare_runs` for the per-case table too)."""
    return compare_runs(base, cand, settings, Baseline(kind=baseline_kind)).data


def confirmation_summary(
    table: CaseTable, confirm: tuple[RunRecord, RunRecord] | None
) -> dict[str, Any]:
    """Which verdicts a paired re-measurement confirmed, overturned or resolved."""
    out: dict[str, Any] = {"performed": confirm is not None, "verdicts": list(CONFIRM_VERDICTS)}
    if confirm is None or not len(table):
        return out
    remeasured = table["remeasured"]
    first, final = table["first_verdict"], table["verdict"]
    flagged = np.isin(final, CONFIRM_VERDICTS) & (table["method"] == SAMPLES)
    decisive = np.isin(first, [stats.REGRESSED, stats.IMPROVED])
    out.update(
        remeasured=int(np.count_nonzero(remeasured)),
        confirmed=int(np.count_nonzero(table["confirmed"])),
        confirmed_by_verdict={
            v: int(np.count_nonzero(table["confirmed"] & (final == v)))
            for v in (stats.REGRESSED, stats.IMPROVED)
        },
        overturned=int(np.count_nonzero(remeasured & decisive & (final != first))),
        resolved=int(
            np.count_nonzero(
                remeasured & (first == stats.INCONCLUSIVE) & (final != stats.INCONCLUSIVE)
            )
        ),
        still_inconclusive=int(
            np.count_nonzero(
                remeasured & (first == stats.INCONCLUSIVE) & (final == stats.INCONCLUSIVE)
            )
        ),
        not_remeasured=int(np.count_nonzero(flagged & ~remeasured)),
        base_run=_brief(confirm[0]),
        cand_run=_brief(confirm[1]),
    )
    return out


def _brief(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.meta.get("run_id"),
        "path": str(record.path),
        "git_sha": record.meta.get("git_sha"),
        "status": record.status,
        "protocol": record.meta.get("protocol"),
    }


def _warnings(
    base: RunRecord, cand: RunRecord, latency: dict[str, Any], settings: stats.Settings
) -> list[str]:
    out = []
    bdev, cdev = base.meta.get("device", {}), cand.meta.get("device", {})
    if bdev.get("name") != cdev.get("name"):
        out.append(f"devices differ: baseline {bdev.get('name')!r}, candidate {cdev.get('name')!r}")
    gpu = latency.get("gpu") or {}
    cases = gpu.get("cases") or {}
    if cases.get("uncalibrated"):
        # Measured: two H200s timed the same GEMMs 0.1-2.8% apart by size (docs/fleet.md).
        out.append(
            f"{cases['uncalibrated']} cases were measured on different GPUs and the records "
            "carry no calibration panel for them: two H200s time the same GEMMs up to ~3% "
            "apart, so those cases are not judged (inconclusive)"
        )
    elif cases.get("calibrated"):
        out.append(
            f"{cases['calibrated']} cases were measured on different GPUs: the GPUs' offset, "
            f"measured by the calibration panel ({offset_text(gpu)}), was divided out and its "
            "uncertainty added to each interval"
        )
    if base.meta.get("framework_version") != cand.meta.get("framework_version"):
        out.append(
            f"framework versions differ: baseline {base.meta.get('framework_version')}, "
            f"candidate {cand.meta.get('framework_version')}"
        )
    if base.status != "complete":
        out.append(f"the baseline run is {base.status}")
    size_only = latency["summary"]["size_only"]
    if size_only:
        sides = [
            name for name, rec in (("baseline", base), ("candidate", cand)) if not has_samples(rec)
        ]
        why = f"the {' and the '.join(sides)} {'has' if len(sides) == 1 else 'have'} no samples"
        if not sides:
            why = "some rows have no samples on one side"
        out.append(
            f"{why}: {size_only} cases were judged by size alone "
            f"(±{settings.size_only_threshold * 100:g}%), without intervals"
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


def offset_text(gpu: dict[str, Any]) -> str:
    """'GPUs differ by +1.2% to +2.4% by size' for a calibrated cross-GPU comparison."""
    lo, hi = gpu.get("offset_range") or (None, None)
    if lo is None or hi is None:
        return "GPUs differ by an unknown offset"
    if f"{(lo - 1) * 100:+.1f}" == f"{(hi - 1) * 100:+.1f}":
        return f"GPUs differ by {(lo - 1) * 100:+.1f}%"
    return f"GPUs differ by {(lo - 1) * 100:+.1f}% to {(hi - 1) * 100:+.1f}% by size"


def gpu_headline(latency: dict[str, Any]) -> str | None:
    """What the headline says about the GPUs: same GPU, cross-GPU calibrated (with the
    offset), or not possible; None for records that do not say (docs/fleet.md)."""
    gpu = latency.get("gpu") or {}
    mode = gpu.get("mode")
    if mode == "same-gpu":
        return "same GPU"
    if mode == "cross-gpu-calibrated":
        return f"cross-GPU, calibrated: {offset_text(gpu)}"
    if mode == "cross-gpu-uncalibrated":
        return "cross-GPU without calibration: no latency verdict possible"
    return None


def overall_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """Red: the PR breaks something; yellow: look closer; green: nothing moved."""
    reasons: list[tuple[str, str]] = []
    uncalibrated = ((result["latency"].get("gpu") or {}).get("cases") or {}).get("uncalibrated")
    if uncalibrated:
        reasons.append(
            (
                YELLOW,
                f"{_n(uncalibrated, 'case')} measured on different GPUs without a calibration "
                "panel: not judged",
            )
        )
    groups = result["failure_groups"]
    summary = result["latency"]["summary"]["verdicts"]
    confirmation = result["confirmation"]
    for finding in result["coverage"]["findings"]:
        reasons.append((finding["level"], f"coverage ({finding['op']}): {finding['text']}"))
    if groups["new"]:
        cases = sum(g["count"] for g in groups["new"])
        reasons.append(
            (RED, f"{_n(len(groups['new']), 'new failure group')} ({_n(cases, 'case')})")
        )
    # A case whose kernel changed is judged across two kernels: a dispatch change.
    across = dispatch_verdicts(result)
    same_kernel = summary[stats.REGRESSED] - across[stats.REGRESSED]
    if same_kernel:
        text = f"{_n(same_kernel, 'case')} regressed"
        if confirmation["performed"]:
            confirmed = _confirmed_count(result, stats.REGRESSED)
            text += f" ({confirmed} confirmed by a paired re-measurement)"
        within = ((result.get("history") or {}).get("within") or {}).get(stats.REGRESSED)
        if within:
            # History annotates; the regression stays a regression (docs/history.md).
            text += f"; {within} of them within their own history over the stored baselines"
        reasons.append((RED, text))
    if across[stats.REGRESSED]:
        reasons.append(
            (
                RED,
                f"{_n(across[stats.REGRESSED], 'case')} slower after a dispatch change (another "
                "kernel runs them now: not the same kernel regressing)",
            )
        )
    if summary[stats.INCONCLUSIVE]:
        text = f"{_n(summary[stats.INCONCLUSIVE], 'case')} inconclusive"
        if confirmation["performed"] and confirmation.get("overturned"):
            text += f" ({confirmation['overturned']} first judged changed, not replicated)"
        reasons.append((YELLOW, text))
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
    parts = _headline_parts(result, same_kernel, across[stats.REGRESSED])
    special, notes = _unusual(result)
    for text in notes:
        reasons.append((YELLOW, text))
    if notes and level == GREEN:
        level = YELLOW
    if special is None:
        parts.append(f"{summary[stats.SAME]} unchanged")
    else:
        parts.insert(0, special)
    headline = ", ".join(parts)
    suffixes = [s for s in (gpu_headline(result["latency"]), _setup_suffix(result)) if s]
    if suffixes:
        headline += f" ({'; '.join(suffixes)})"
    return {"level": level, "headline": headline, "reasons": [r for _, r in reasons]}


def _headline_parts(result: dict[str, Any], same_kernel: int, across: int) -> list[str]:
    """The headline's counts, most serious first (`across`: regressed after a dispatch
    change)."""
    groups = result["failure_groups"]
    summary = result["latency"]["summary"]["verdicts"]
    parts = []
    if same_kernel:
        parts.append(f"{same_kernel} regressed")
    if across:
        parts.append(f"{across} slower after a dispatch change")
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
    return parts


def _unusual(result: dict[str, Any]) -> tuple[str | None, list[str]]:
    """A comparison that cannot be read as usual: its headline, and why, in words."""
    base, cand = result["baseline"], result["candidate"]
    summary = result["latency"]["summary"]
    if base.get("run_id") and (base.get("run_id"), base.get("started_at")) == (
        cand.get("run_id"),
        cand.get("started_at"),
    ):
        return "the candidate is the baseline run itself: nothing compared", [
            "the baseline and the candidate are the same run: compare two runs"
        ]
    if summary["matched"] == 0:
        return "no case in common with the baseline: nothing compared", [
            f"no case in common: {summary['added']} only in the candidate, "
            f"{summary['removed']} only in the baseline"
        ]
    notes = []
    bdev, cdev = base.get("device") or {}, cand.get("device") or {}
    if bdev.get("driver") and cdev.get("driver") and bdev["driver"] != cdev["driver"]:
        notes.append(
            f"GPU drivers differ (baseline {bdev['driver']}, candidate {cdev['driver']}): "
            "a latency change may be the driver's"
        )
    return None, notes


def _setup_suffix(result: dict[str, Any]) -> str | None:
    """The headline's note on the set-up when the GPUs' own note says nothing about it."""
    bdev = result["baseline"].get("device") or {}
    cdev = result["candidate"].get("device") or {}
    notes = []
    if (result["latency"].get("gpu") or {}).get("mode") is None and bdev.get("name") != cdev.get(
        "name"
    ):
        notes.append("different GPUs")
    if bdev.get("driver") and cdev.get("driver") and bdev["driver"] != cdev["driver"]:
        notes.append("different drivers")
    return ", ".join(notes) or None


def dispatch_verdicts(result: dict[str, Any]) -> dict[str, int]:
    """Verdicts of the cases whose kernel changed (0 each for comparisons without them)."""
    out = dict.fromkeys(stats.VERDICTS, 0)
    for change in result["latency"]["dispatch_changes"]:
        for verdict, count in (change.get("verdicts") or {}).items():
            out[verdict] = out.get(verdict, 0) + int(count)
    return out


def _confirmed_count(result: dict[str, Any], verdict: str) -> int:
    return int(result["confirmation"].get("confirmed_by_verdict", {}).get(verdict, 0))


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


def write_comparison(result: Comparison | dict[str, Any], out_dir: Path) -> Path:
    """Write comparison.json (and cases.parquet, given a Comparison) atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = result.data if isinstance(result, Comparison) else dict(result)
    if isinstance(result, Comparison):
        cases = out_dir / CASES_PARQUET
        tmp_cases = cases.with_name(f".{cases.name}.tmp")
        pq.write_table(result.cases.to_arrow(), tmp_cases, compression="zstd")
        os.replace(tmp_cases, cases)
    else:
        data["latency"] = {**data["latency"], "cases_file": None}
    path = out_dir / COMPARISON_JSON
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_jsonable(data), separators=(",", ":"), allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def load_cases(path: Path, comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """Every case of a comparison: from cases.parquet beside it when there is one (the JSON
    lists only the notable cases), else the JSON's own list."""
    directory = path if path.is_dir() else path.parent
    name = comparison.get("latency", {}).get("cases_file")
    if not name or not (directory / name).is_file():
        return list(comparison["latency"]["cases"])
    try:
        table = pq.read_table(directory / name)
    except (OSError, ValueError) as exc:
        raise UserError(f"{directory / name}: not a readable parquet file ({exc})") from None
    missing = [
        n
        for n in CASE_TABLE_SCHEMA.names
        if n not in table.column_names and n not in LATER_CASE_COLUMNS
    ]
    if missing:
        raise UserError(f"{directory / name}: column {missing[0]!r} missing (not a case table)")
    rows = []
    for row in table.to_pylist():
        case = {k: v for k, v in row.items() if not k.startswith(PARAM_PREFIX)}
        case["params"] = {
            k.removeprefix(PARAM_PREFIX): v
            for k, v in row.items()
            if k.startswith(PARAM_PREFIX) and v is not None
        }
        rows.append(case)
    return rows


def load_comparison(path: Path) -> dict[str, Any]:
    target = path / COMPARISON_JSON if path.is_dir() else path
    if not target.is_file():
        raise UserError(f"{target}: comparison not found (run `collectbot compare` first)")
    data = jsonfile.read(target)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise UserError(
            f"{target}: unknown schema_version {version!r} (this reader knows {SCHEMA_VERSION})"
        )
    result: dict[str, Any] = data
    return result
