"""Steps in each case's history, found by penalised segmentation and grouped by commit.

The method (docs/history.md): a case's points, in run order, become log latencies divided
by the case's own noise sigma; PELT with the L2 cost (ruptures' KernelCPD with the linear
kernel: its C implementation of PELT for that cost) splits them where a split lowers the
cost by more than the penalty. Sigma is the spread within the segments of a first, coarse
pass (`noise_sigma`), never below the points' own bootstrap standard error. A split is a
step when adjacent segments' means differ by at least the comparison's threshold for that
noise (`threshold_for`: the larger of 1% and twice sigma) and each segment holds at least
`MIN_SEGMENT` points, so one stray run is never a step. The penalty is calibrated by
simulation (bench/history_simulation.py) for few false steps on histories of pure noise.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from statistics import NormalDist
from typing import Any

import numpy as np

from bot.compare.stats import Settings, threshold_for
from bot.history.core import History
from collector.aggregate import MAD_TO_SIGMA

# Penalty of one split, in units of the case's noise variance (calibrated by
# bench/history_simulation.py; figures in docs/history.md).
PENALTY = 20.0
# Fewest points on either side of a step.
MIN_SEGMENT = 2
# Fewest points a case needs before its history is searched at all.
MIN_POINTS = 6
SETTINGS = Settings()
# Noise is never taken below this (log units): identical points would make any wobble a step.
NOISE_FLOOR = 1e-4


@dataclass(frozen=True)
class ChangePoint:
    """A step in one case: `run` is the first run at the new level."""

    key: str
    case: int  # row in the history
    run: int  # 1-based run index
    previous_run: int  # the case's last run before the step
    before_ms: float  # mean level of the segment before (geometric)
    after_ms: float
    noise: float  # the case's sigma, log units
    commit: str | None
    previous_commit: str | None

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms

    def to_json(self) -> dict[str, Any]:
        # Every field but `case` (a row of this history only), and the derived ratio.
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "case"}
        return {**data, "ratio": self.ratio}


def _stderr(log_lo: np.ndarray, log_hi: np.ndarray) -> float:
    """The points' median standard error, from their bootstrap intervals (0 without)."""
    z = NormalDist().inv_cdf(1.0 - (1.0 - SETTINGS.confidence) / 2.0)
    widths = (log_hi - log_lo)[np.isfinite(log_hi - log_lo)]
    return float(np.median(widths)) / (2.0 * z) if widths.size else 0.0


def _residual_sd(values: np.ndarray, starts: list[int]) -> float:
    """Pooled standard deviation within segments (one degree of freedom per segment)."""
    bounds = [0, *starts, values.size]
    parts = [values[a:b] - values[a:b].mean() for a, b in itertools.pairwise(bounds)]
    ss = float(sum(np.sum(p**2) for p in parts))
    return math.sqrt(ss / max(1, values.size - len(parts)))


def noise_sigma(
    log_ms: np.ndarray, log_lo: np.ndarray, log_hi: np.ndarray, penalty: float
) -> float:
    """A case's run-to-run noise in log units, in two passes: a robust first guess (MAD of
    successive differences) finds only the clearest steps (twice the penalty); the pooled
    standard deviation within those segments is the estimate. Never below the points' own
    bootstrap standard error."""
    stderr = _stderr(log_lo, log_hi)
    diffs = np.diff(log_ms)
    guess = MAD_TO_SIGMA * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2)
    guess = max(guess, stderr, NOISE_FLOOR)
    coarse = segment(log_ms, guess, 2.0 * penalty)
    return max(_residual_sd(log_ms, coarse), stderr, NOISE_FLOOR)


def segment(
    values: np.ndarray, sigma: float, penalty: float = PENALTY, min_segment: int = MIN_SEGMENT
) -> list[int]:
    """Positions where a new segment starts (PELT, L2 cost on values / sigma)."""
    import ruptures

    algo = ruptures.KernelCPD(kernel="linear", min_size=min_segment)
    ends = algo.fit(np.ascontiguousarray(values / sigma, dtype=float)).predict(pen=penalty)
    return [int(b) for b in ends[:-1]]


def case_steps(
    log_ms: np.ndarray,
    log_lo: np.ndarray,
    log_hi: np.ndarray,
    penalty: float = PENALTY,
    settings: Settings = SETTINGS,
    min_segment: int = MIN_SEGMENT,
) -> tuple[list[tuple[int, float, float]], float]:
    """Steps of one case's points: (position, log level before, log level after), and sigma."""
    if log_ms.size < max(MIN_POINTS, 2 * min_segment):
        return [], float("nan")
    # No split can differ by min_effect when the whole range is smaller: skip the search.
    if float(np.ptp(log_ms)) < math.log1p(settings.min_effect):
        return [], float("nan")
    sigma = noise_sigma(log_ms, log_lo, log_hi, penalty)
    smallest = math.log1p(threshold_for(sigma, settings))
    starts = segment(log_ms, sigma, penalty, min_segment)
    bounds = [0, *starts, log_ms.size]
    means = [float(np.mean(log_ms[a:b])) for a, b in itertools.pairwise(bounds)]
    steps = []
    for i, pos in enumerate(starts):
        if abs(means[i + 1] - means[i]) >= smallest:
            steps.append((pos, means[i], means[i + 1]))
    return steps, sigma


def change_points(
    history: History,
    penalty: float = PENALTY,
    settings: Settings = SETTINGS,
    min_segment: int = MIN_SEGMENT,
) -> list[ChangePoint]:
    """Every case's steps, case by case in the history's order."""
    out: list[ChangePoint] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ms, log_lo, log_hi = np.log(history.ms), np.log(history.lo), np.log(history.hi)
    present = np.isfinite(log_ms)
    for row, case in enumerate(history.cases):
        cols = np.flatnonzero(present[row])
        steps, sigma = case_steps(
            log_ms[row, cols], log_lo[row, cols], log_hi[row, cols], penalty, settings, min_segment
        )
        for pos, before, after in steps:
            run, prev = history.runs[cols[pos]], history.runs[cols[pos - 1]]
            out.append(
                ChangePoint(
                    key=case.key,
                    case=row,
                    run=run.index,
                    previous_run=prev.index,
                    before_ms=math.exp(before),
                    after_ms=math.exp(after),
                    noise=sigma,
                    commit=run.git_sha,
                    previous_commit=prev.git_sha,
                )
            )
    return out


@dataclass(frozen=True)
class CommitGroup:
    """The steps that first show in one run: the commits between it and the run before."""

    run: int
    commit: str | None
    previous_commit: str | None
    changes: tuple[ChangePoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "commit": self.commit,
            "previous_commit": self.previous_commit,
            "regressed": sum(1 for c in self.changes if c.ratio > 1),
            "improved": sum(1 for c in self.changes if c.ratio < 1),
            "cases": [{"key": c.key, "ratio": c.ratio} for c in self.changes],
        }


def by_commit(history: History, points: list[ChangePoint]) -> list[CommitGroup]:
    """Steps grouped by the run (and so the commit) where they first show, oldest first."""
    groups: dict[int, list[ChangePoint]] = {}
    for cp in points:
        groups.setdefault(cp.run, []).append(cp)
    out = []
    for run in sorted(groups):
        info = history.runs[run - 1]
        before = history.runs[run - 2] if run >= 2 else None
        changes = sorted(groups[run], key=lambda c: -abs(math.log(c.ratio)))
        out.append(
            CommitGroup(run, info.git_sha, before.git_sha if before else None, tuple(changes))
        )
    return out
