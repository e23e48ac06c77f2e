"""The history as JSON for automation (`collectbot history --json`; shape in docs/history.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bot.history.changepoints import ChangePoint, CommitGroup
from bot.history.core import History

HISTORY_FORMAT = 1


def _num(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def half_width(latest: dict[str, Any] | None) -> float | None:
    """Half the latest point's interval over its value (None: no point or no interval)."""
    if latest and latest["lo"] is not None and latest["hi"] is not None:
        return float((latest["hi"] - latest["lo"]) / 2 / latest["ms"])
    return None


def case_summary(history: History, row: int) -> dict[str, Any]:
    """Window figures of one case: points, failures, latest point and how far it wandered."""
    ms = history.ms[row]
    present = np.flatnonzero(np.isfinite(ms))
    failed = [i for i, f in enumerate(history.failure[row]) if f is not None]
    kernels = [k for k in history.kernel[row] if k is not None]
    out: dict[str, Any] = {
        "measured": int(present.size),
        "failed_runs": [history.runs[i].index for i in failed],
        "kernels": sorted(set(kernels)),
        "latest": None,
        "median_ms": None,
        "range": None,
    }
    if present.size:
        last = int(present[-1])
        out["latest"] = {
            "run": history.runs[last].index,
            "ms": float(ms[last]),
            "lo": _num(history.lo[row, last]),
            "hi": _num(history.hi[row, last]),
            "kernel": history.kernel[row, last],
        }
        values = ms[present]
        median = float(np.median(values))
        out["median_ms"] = median
        # How far the case wandered over the window: lowest and highest point / the median.
        out["range"] = [float(values.min() / median), float(values.max() / median)]
    return out


def history_json(
    history: History, points: list[ChangePoint], groups: list[CommitGroup]
) -> dict[str, Any]:
    by_case: dict[int, list[ChangePoint]] = {}
    for cp in points:
        by_case.setdefault(cp.case, []).append(cp)
    cases = []
    for row, case in enumerate(history.cases):
        series = []
        for col, run in enumerate(history.runs):
            ms, failure = history.ms[row, col], history.failure[row, col]
            if not math.isfinite(ms) and failure is None:
                continue
            series.append(
                {
                    "run": run.index,
                    "ms": _num(ms),
                    "lo": _num(history.lo[row, col]),
                    "hi": _num(history.hi[row, col]),
                    "kernel": history.kernel[row, col],
                    "failure": failure,
                }
            )
        cases.append(
            {
                "key": case.key,
                "op": case.op,
                "dtype": case.dtype,
                "params": case.params,
                **case_summary(history, row),
                "series": series,
                "change_points": [cp.to_json() for cp in by_case.get(row, [])],
            }
        )
    return {
        "format": HISTORY_FORMAT,
        "series": history.series.to_json(),
        "runs": [r.to_json() for r in history.runs],
        "skipped": history.skipped,
        "cases": cases,
        "change_points_by_commit": [g.to_json() for g in groups],
    }
