"""Drift within a collection: a side whose run values trend with run order.

A case whose level moves while it is measured (e.g. a large-weight GEMM whose later runs
are faster than its first) has no single level: its estimate depends on when the collection
stopped, so averaging its runs hides the problem. Each side's trend is tested (Mann-Kendall
on its run values, each run's trimmed mean (`stats.run_values`), in run order,
Benjamini-Hochberg across all sides tested) and sized
(Theil-Sen slope across the runs, relative); a side whose adjusted p is below `drift_alpha`
and whose drift is at least `drift_min` marks its case as drifting. A
drifting case keeps a regressed or improved verdict only when its interval clears the
threshold plus the drift; otherwise it is inconclusive, which sends it to the confirmation
pass when there is one (docs/statistics.md, "Drift within a collection").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from bot.compare import stats
from bot.compare.contract import case_identity

# Fewer runs than this: no trend test (Mann-Kendall cannot reach p < 0.05 below 4 runs).
MIN_RUNS = 5


@dataclass(frozen=True)
class Trends:
    """Per case, aligned with the input: relative drift across the runs (NaN: not tested)
    and the two-sided Mann-Kendall p-value (NaN: not tested)."""

    drift: np.ndarray
    p: np.ndarray


def trends(run_values: Sequence[np.ndarray]) -> Trends:
    """Trend of each case's run values, in run order, vectorised over cases.

    Drift is expm1(Theil-Sen slope of log run values x (runs - 1)): the relative change from the
    first run to the last that the trend accounts for. The Mann-Kendall statistic uses the
    normal approximation with continuity correction (ties count zero)."""
    n_cases = len(run_values)
    width = max((m.size for m in run_values), default=0)
    drift = np.full(n_cases, np.nan)
    p = np.full(n_cases, np.nan)
    if n_cases == 0 or width < MIN_RUNS:
        return Trends(drift, p)
    logs = np.full((n_cases, width), np.nan)
    for row, values in enumerate(run_values):
        logs[row, : values.size] = np.log(values)
    i, j = np.triu_indices(width, k=1)
    diffs = logs[:, j] - logs[:, i]
    valid = np.isfinite(diffs)
    counts = np.count_nonzero(np.isfinite(logs), axis=1)
    tested = counts >= MIN_RUNS
    s = np.where(valid, np.sign(diffs), 0.0).sum(axis=1)
    var = counts * (counts - 1) * (2 * counts + 5) / 18.0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (np.abs(s) - 1.0).clip(min=0.0) / np.sqrt(var)
        slopes = np.where(valid, diffs / (j - i), np.nan)
    normal = NormalDist()
    p[tested] = [2.0 * (1.0 - normal.cdf(float(v))) for v in z[tested]]
    if tested.any():
        slope = np.nanmedian(slopes[tested], axis=1)
        drift[tested] = np.expm1(slope * (counts[tested] - 1))
    return Trends(drift, p)


# Fewer runs than this on either side of a step: no step there (one odd run is no level).
STEP_MIN_SEGMENT = 3


def steps(run_values: Sequence[np.ndarray]) -> Trends:
    """A level that jumps once while a side is measured: for each case, the split of its log
    run values into an earlier and a later segment (each of `STEP_MIN_SEGMENT` runs or more)
    with the largest pooled-variance t, its two-sided p-value times the number of splits
    tried (Bonferroni: the split was chosen), and the step expm1(later mean - earlier mean).

    Mann-Kendall ranks barely see a step early or late in a short side (3 runs at one level
    and 10 at a level 3% lower reach p 0.009 at best over 13 runs, which Benjamini-Hochberg
    over a collection's sides does not keep); the t between the levels does."""
    from scipy import stats as sps

    drift = np.full(len(run_values), np.nan)
    p = np.full(len(run_values), np.nan)
    for row, values in enumerate(run_values):
        logs = np.log(np.asarray(values, dtype=float))
        n = logs.size
        splits = range(STEP_MIN_SEGMENT, n - STEP_MIN_SEGMENT + 1)
        if not splits or not np.all(np.isfinite(logs)):
            continue
        best_t, best_step = 0.0, 0.0
        for cut in splits:
            early, late = logs[:cut], logs[cut:]
            ss = float(((early - early.mean()) ** 2).sum() + ((late - late.mean()) ** 2).sum())
            step = float(late.mean() - early.mean())
            se = np.sqrt(ss / (n - 2) * (1.0 / cut + 1.0 / (n - cut)))
            t = abs(step) / se if se > 0 else (np.inf if step else 0.0)
            if t > best_t:
                best_t, best_step = t, step
        p[row] = min(1.0, len(splits) * 2.0 * float(sps.t.sf(best_t, n - 2)))
        drift[row] = np.expm1(best_step)
    return Trends(drift, p)


def moves(run_values: Sequence[np.ndarray]) -> Trends:
    """A side's movement with run order: a trend (`trends`) or a step (`steps`), whichever
    is the stronger evidence, its p-value doubled where both were tested (two tests)."""
    trend, step = trends(run_values), steps(run_values)
    both = np.isfinite(trend.p) & np.isfinite(step.p)
    use_step = np.isfinite(step.p) & ~(step.p >= trend.p)
    p = np.where(use_step, step.p, trend.p)
    p = np.where(both, np.minimum(1.0, 2.0 * p), p)
    return Trends(np.where(use_step, step.drift, trend.drift), p)


def mark(
    cols: dict[str, np.ndarray],
    idx: np.ndarray,
    base_values: Sequence[np.ndarray],
    cand_values: Sequence[np.ndarray],
    settings: stats.Settings,
) -> None:
    """Add each side's drift and p-value and the `drifting` flag for the sampled cases `idx`
    (aligned with the run values), then apply the verdict rule (`demote`)."""
    n = len(cols["key"])
    found = {side: moves(v) for side, v in (("base", base_values), ("cand", cand_values))}
    # Benjamini-Hochberg over every side tested: many steady cases, few chance trends.
    q = stats.bh_qvalues(np.concatenate([found["base"].p, found["cand"].p]))
    for k, side in enumerate(("base", "cand")):
        cols[f"{side}_drift"] = np.full(n, np.nan)
        cols[f"{side}_drift_q"] = np.full(n, np.nan)
        cols[f"{side}_drift"][idx] = found[side].drift
        cols[f"{side}_drift_q"][idx] = q[k * idx.size : (k + 1) * idx.size]
    sides = [
        _trending(cols[f"{s}_drift"], cols[f"{s}_drift_q"], settings) for s in ("base", "cand")
    ]
    cols["drifting"] = sides[0] | sides[1]
    demote(cols)


def _trending(drift: np.ndarray, q: np.ndarray, settings: stats.Settings) -> np.ndarray:
    """Sides whose trend is significant (BH-adjusted) and at least `drift_min` in size."""
    with np.errstate(invalid="ignore"):
        big = np.abs(np.log1p(drift)) >= np.log1p(settings.drift_min)
        significant: np.ndarray = (q < settings.drift_alpha) & big
    return significant


def demote(cols: dict[str, np.ndarray]) -> None:
    """A drifting case's verdict stands only if its interval clears threshold plus drift:
    regressed needs lo above it, improved hi below its inverse; anything else (unchanged
    included: the level moved) is inconclusive."""
    drifting = cols["drifting"]
    if not drifting.any():
        return
    with np.errstate(invalid="ignore"):
        margin = np.fmax(np.abs(np.log1p(cols["base_drift"])), np.abs(np.log1p(cols["cand_drift"])))
        bound = np.log1p(cols["threshold"]) + np.nan_to_num(margin)
        clears_up = np.log(cols["lo"]) > bound
        clears_down = np.log(cols["hi"]) < -bound
    verdict = cols["verdict"]
    keep = ((verdict == stats.REGRESSED) & clears_up) | ((verdict == stats.IMPROVED) & clears_down)
    verdict[drifting & ~keep & (verdict != stats.INCONCLUSIVE)] = stats.INCONCLUSIVE


def case_drift(cols: dict[str, np.ndarray], i: int) -> dict[str, Any] | None:
    """comparison.json's `drift` of one case (None: no side was tested)."""
    base, cand = cols["base_drift"][i], cols["cand_drift"][i]
    if not (np.isfinite(base) or np.isfinite(cand)):
        return None

    def num(value: float) -> float | None:
        return float(value) if np.isfinite(value) else None

    return {
        "base": num(base),
        "cand": num(cand),
        "base_q": num(cols["base_drift_q"][i]),
        "cand_q": num(cols["cand_drift_q"][i]),
        "drifting": bool(cols["drifting"][i]),
    }


def summary(
    cols: dict[str, np.ndarray], settings: stats.Settings, listed: int = 50
) -> dict[str, Any]:
    """The drifting cases, largest drift first (at most `listed`), and the rule."""
    rows: list[dict[str, Any]] = []
    for side in ("base", "cand"):
        drift, q = cols[f"{side}_drift"], cols[f"{side}_drift_q"]
        for i in np.flatnonzero(_trending(drift, q, settings)):
            rows.append(
                {
                    **case_identity(cols, i),
                    "side": side,
                    "drift": float(drift[i]),
                    "q": float(q[i]),
                    "runs": int(cols[f"{side}_runs"][i]),
                    "verdict": str(cols["verdict"][i]),
                }
            )
    rows.sort(key=lambda r: (-abs(float(r["drift"])), r["key"], r["side"]))
    return {
        "alpha": settings.drift_alpha,
        "min": settings.drift_min,
        "cases_drifting": int(np.count_nonzero(cols["drifting"])),
        "cases": rows[:listed],
    }
