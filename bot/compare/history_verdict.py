"""History in the verdict: each changed case's range over the last N stored baselines.

The rule (docs/history.md, "History in the verdict"): history annotates, it never changes
a verdict. For every case the comparison did not call unchanged, the window's points of
that case (each stored baseline's latency, the current baseline last) give its range and
how far it wandered (highest over lowest point). The candidate's level in the baseline's
terms is the current baseline's point times the comparison's ratio (so a cross-GPU offset
stays divided out); a candidate inside [lowest, highest] is "within its history". A range
can hold a real past step, so a move back inside it can still be a real regression of this
change: the label tells a reader what is usual for the case, the verdict what changed.
Simulated in bench/history_verdict_simulation.py.

Pure: the window's points in, comparison.json's `history` section out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.compare import stats

# Stored baselines a comparison reads for each case's history (the store keeps 20 a key).
HISTORY_RUNS = 20
# Fewest points of a case before its range means anything.
MIN_POINTS = 3
# Verdicts whose cases get their history.
ANNOTATED = (stats.REGRESSED, stats.IMPROVED, stats.INCONCLUSIVE)


@dataclass(frozen=True)
class WindowRun:
    """One stored baseline of the window (oldest first; the last is the current one)."""

    entry: str
    run_id: str | None
    git_sha: str | None
    stored_at: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BaselineHistory:
    """The window's runs and each case's point in each of them (None: not measured)."""

    runs: list[WindowRun]
    points: dict[str, list[float | None]] = field(default_factory=dict)
    # The case pages' directory on a `collectbot site` of the store (bot/site/build.py).
    site_dir: str | None = None
    skipped: list[str] = field(default_factory=list)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def case_history(
    points: Sequence[float | None], base_ms: float | None, ratio: float | None
) -> dict[str, Any] | None:
    """One case's range over the window and where the candidate sits in it (None: fewer
    than MIN_POINTS points, or no ratio)."""
    present = _finite(points)
    if len(present) < MIN_POINTS or ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return None
    low, high = min(present), max(present)
    base = base_ms if base_ms is not None and math.isfinite(base_ms) and base_ms > 0 else None
    base = base or present[-1]
    level = base * ratio
    return {
        # Six significant digits: the trend needs no more, and 20 points a case add up.
        "points": [
            None if v is None or not math.isfinite(v) else float(f"{v:.6g}") for v in points
        ],
        "measured": len(present),
        "min_ms": low,
        "max_ms": high,
        # How far the case wandered over the window: highest over lowest point, minus 1.
        "wandered": high / low - 1.0,
        # The range relative to the current baseline: [lowest / base, highest / base].
        "range": [low / base, high / base],
        "cand_level_ms": level,
        "within": bool(low <= level <= high),
    }


def history_section(cases: Sequence[dict[str, Any]], window: BaselineHistory) -> dict[str, Any]:
    """comparison.json's `history`: the window and the changed cases' ranges."""
    annotated: dict[str, dict[str, Any]] = {}
    within = dict.fromkeys(ANNOTATED, 0)
    for case in cases:
        verdict = case.get("verdict")
        if verdict not in ANNOTATED:
            continue
        points = window.points.get(str(case["key"]))
        found = case_history(points, case.get("base_ms"), case.get("ratio")) if points else None
        if found is None:
            continue
        annotated[str(case["key"])] = found
        # Counted for the verdict's reasons, whose regressions exclude dispatch changes.
        within[verdict] += found["within"] and not case.get("dispatch_change")
    return {
        "rule": "annotate",
        "runs": [r.to_json() for r in window.runs],
        "site_dir": window.site_dir,
        "skipped": list(window.skipped),
        "cases": annotated,
        "within": within,
    }
