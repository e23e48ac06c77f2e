"""Hardware floors, unverified markers and the hang denylist, applied to a plan.

The only filters the doctrine allows. A floor drops cases a device cannot run at all (e.g.
fp8 below SM 8.9); a denylist entry drops a case that hangs or takes the node down, with a
date and a reason; an unverified marker keeps the case but flags its rows. Everything dropped
is counted in run.json with its reason, never silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from collector.caseplan import Case, CaseSelector
from collector.errors import UserError

BUILTIN_RULES = "rules.yaml"


@dataclass(frozen=True)
class Floor:
    match: CaseSelector
    min_sm: tuple[int, int]
    reason: str


@dataclass(frozen=True)
class Marker:
    backend: str | None
    op: str | None
    sm: str | None
    reason: str

    def applies(self, case: Case, backend: str, sm: str | None) -> bool:
        return (
            (self.backend is None or self.backend == backend)
            and (self.op is None or self.op == case.op)
            and (self.sm is None or self.sm == sm)
        )


@dataclass(frozen=True)
class DenyEntry:
    match: CaseSelector
    backend: str | None
    since: date
    reason: str


@dataclass(frozen=True)
class Rules:
    floors: tuple[Floor, ...]
    unverified: tuple[Marker, ...]
    denylist: tuple[DenyEntry, ...]
    source: str


def _sm_tuple(text: str, source: str) -> tuple[int, int]:
    try:
        major, minor = str(text).split(".")
        return int(major), int(minor)
    except ValueError:
        raise UserError(f"{source}: SM {text!r} must look like 8.9") from None


def _str(entry: Mapping[str, Any], key: str, source: str, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str | int | float) or not str(value).strip():
        raise UserError(f"{source}: field {key!r} is required and must be text")
    return str(value)


def parse_rules(text: str, source: str) -> Rules:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise UserError(f"{source}: is not valid YAML") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: must be a mapping with floors, unverified, denylist")
    unknown = sorted(set(data) - {"floors", "unverified", "denylist"})
    if unknown:
        raise UserError(f"{source}: unknown section {unknown[0]!r}")
    floors = []
    for e in data.get("floors") or []:
        floors.append(
            Floor(
                match=CaseSelector.parse(str(_str(e, "match", source)), option=source),
                min_sm=_sm_tuple(str(_str(e, "min_sm", source)), source),
                reason=str(_str(e, "reason", source)),
            )
        )
    markers = [
        Marker(
            backend=_str(e, "backend", source, required=False),
            op=_str(e, "op", source, required=False),
            sm=_str(e, "sm", source, required=False),
            reason=str(_str(e, "reason", source)),
        )
        for e in data.get("unverified") or []
    ]
    deny = []
    for e in data.get("denylist") or []:
        since = e.get("date")
        if not isinstance(since, date):
            raise UserError(f"{source}: every denylist entry needs a date (YYYY-MM-DD)")
        deny.append(
            DenyEntry(
                match=CaseSelector.parse(str(_str(e, "match", source)), option=source),
                backend=_str(e, "backend", source, required=False),
                since=since,
                reason=str(_str(e, "reason", source)),
            )
        )
    return Rules(tuple(floors), tuple(markers), tuple(deny), source)


def load_rules(path: Path | None = None) -> Rules:
    if path is None:
        res = resources.files("collector.cases").joinpath(BUILTIN_RULES)
        return parse_rules(res.read_text(), f"collector/cases/{BUILTIN_RULES}")
    try:
        return parse_rules(path.read_text(), str(path))
    except OSError as exc:
        raise UserError(f"{path}: cannot read rules ({exc.strerror})") from None


@dataclass
class RuleOutcome:
    kept: list[Case]
    skipped: list[dict[str, str]]
    unverified: dict[str, str]

    def summary(self) -> dict[str, Any]:
        by_reason: dict[str, int] = {}
        for s in self.skipped:
            by_reason[s["reason"]] = by_reason.get(s["reason"], 0) + 1
        return {
            "skipped_count": len(self.skipped),
            "skipped_by_reason": by_reason,
            "skipped_examples": self.skipped[:20],
            "unverified_count": len(self.unverified),
        }


def apply_rules(cases: list[Case], rules: Rules, backend: str, sm: str | None) -> RuleOutcome:
    """Floors apply on GPUs with a known SM; the denylist applies everywhere."""
    sm_t = _sm_tuple(sm, "device") if sm else None
    kept, skipped, unverified = [], [], {}
    for case in cases:
        floor = next(
            (
                f
                for f in rules.floors
                if sm_t is not None and sm_t < f.min_sm and f.match.matches(case)
            ),
            None,
        )
        if floor is not None:
            skipped.append({"case_key": case.key, "rule": "floor", "reason": floor.reason})
            continue
        deny = next(
            (
                d
                for d in rules.denylist
                if (d.backend is None or d.backend == backend) and d.match.matches(case)
            ),
            None,
        )
        if deny is not None:
            skipped.append(
                {
                    "case_key": case.key,
                    "rule": "denylist",
                    "reason": f"{deny.reason} (since {deny.since})",
                }
            )
            continue
        marker = next((m for m in rules.unverified if m.applies(case, backend, sm)), None)
        if marker is not None:
            unverified[case.key] = marker.reason
        kept.append(case)
    return RuleOutcome(kept, skipped, unverified)
