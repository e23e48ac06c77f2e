"""What a run alone says, for the comment of a run that cannot be compared.

A collection that failed, stopped early or never wrote its record still gets a comment that
says what failed. This reads whatever the run left: a valid record; a record that fails
validation (its raw run.json, if any); or only the checkpoint of a run that died before
finalising. It never raises on a broken run directory: the breakage is the finding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.compare.comparison import provenance
from bot.compare.failure_groups import summarise_groups
from collector import jsonfile
from collector.errors import RunRecordError, UserError
from collector.failures import FailureRecord
from collector.record import CHECKPOINT, RUN_JSON, CheckpointState, read_record

LOG_TAIL_LINES = 60


@dataclass
class RunInfo:
    path: Path
    status: str  # complete | partial | failed | missing | unreadable
    meta: dict[str, Any]
    per_op: dict[str, dict[str, int]]
    groups: list[dict[str, Any]]
    failed_cases: int
    problem: str | None = None  # why the record is missing or unreadable
    stage: str | None = None
    error: str | None = None
    log_tail: str | None = None
    checkpoint: dict[str, int] = field(default_factory=dict)


def _groups(failures: list[FailureRecord]) -> list[dict[str, Any]]:
    groups = list(summarise_groups(failures).values())
    return sorted(groups, key=lambda g: (-g["count"], g["group_key"]))


def _tail(log: Path | None) -> str | None:
    if log is None or not log.is_file():
        return None
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:])


def load_run_info(
    run_dir: Path, *, stage: str | None = None, error: str | None = None, log: Path | None = None
) -> RunInfo:
    tail = _tail(log)
    try:
        record = read_record(run_dir)
    except RunRecordError as exc:
        meta: dict[str, Any] = {}
        raw = run_dir / RUN_JSON
        if raw.is_file():
            try:
                loaded = jsonfile.read(raw)
                meta = loaded if isinstance(loaded, dict) else {}
            except UserError:
                meta = {}
        state = CheckpointState.load(run_dir / CHECKPOINT)
        status = "unreadable" if raw.is_file() else "missing"
        per_op = dict((meta.get("counts") or {}).get("per_op") or {})
        return RunInfo(
            path=run_dir,
            status=status,
            meta={**meta, "path": str(run_dir)},
            per_op=per_op,
            groups=_groups(state.failures),
            failed_cases=len(state.failed_keys),
            problem=str(exc),
            stage=stage,
            error=error,
            log_tail=tail,
            checkpoint={
                "cases_with_runs": len(state.runs),
                "runs": sum(len(v) for v in state.runs.values()),
                "failed_cases": len(state.failed_keys),
            }
            if (run_dir / CHECKPOINT).is_file()
            else {},
        )
    per_op = dict((record.meta.get("counts") or {}).get("per_op") or {})
    for op, table in record.perf.items():
        per_op.setdefault(op, {})["rows"] = table.num_rows
    kinds = Counter(a.kind for a in record.anomalies)
    meta = provenance(record)
    meta["anomalies"] = dict(kinds)
    return RunInfo(
        path=run_dir,
        status=record.status,
        meta=meta,
        per_op=per_op,
        groups=_groups(record.failures),
        failed_cases=len({f.case_key for f in record.failures}),
        stage=stage,
        error=error,
        log_tail=tail,
    )


def run_verdict(info: RunInfo) -> tuple[str, str, list[str]]:
    """(level, headline, reasons) for a run without a comparison."""
    counts = (info.meta.get("counts") or {}) if isinstance(info.meta.get("counts"), dict) else {}
    planned, ok = counts.get("planned"), counts.get("ok")
    where = f" in the {info.stage} stage" if info.stage else ""
    reasons = []
    if info.status == "missing":
        level, headline = "red", f"collection failed{where} before writing a run record"
        if info.checkpoint:
            reasons.append(
                f"its checkpoint holds {info.checkpoint['runs']} finished runs of "
                f"{info.checkpoint['cases_with_runs']} cases and "
                f"{info.checkpoint['failed_cases']} failed cases"
            )
    elif info.status == "unreadable":
        level, headline = "red", f"the run record{where} is unreadable"
    elif info.status in ("failed", "partial"):
        level = "red"
        headline = f"collection {info.status}{where}"
        if planned is not None:
            headline += f": {ok} of {planned} planned cases measured"
    else:
        # No baseline: no verdict either way, except that failed cases are failures on their
        # own (a first run never passes with failures in it).
        level = "red" if info.failed_cases else "yellow"
        measured = f"{ok if ok is not None else '?'} cases measured"
        if info.failed_cases:
            measured += f", {info.failed_cases} failed"
        headline = f"{measured}; no baseline to compare with"
    if info.problem:
        reasons.append(info.problem)
    if info.failed_cases:
        groups = len(info.groups)
        reasons.append(f"{_n(info.failed_cases, 'case')} failed in {_n(groups, 'group')}")
    for op, row in sorted(info.per_op.items()):
        p, a = row.get("planned"), row.get("attempted")
        if p and a is not None and a < p:
            reasons.append(f"{op}: {p - a} of {p} planned cases never attempted")
    return level, headline, reasons


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
