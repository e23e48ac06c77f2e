"""Placement levels: run values that compare a case level by level.

Some kernels' samples sit on a few discrete levels set by where a buffer set landed (an
fp8 GEMM at 101-104 or 117-124 us, set by set, at one measured clock); they mix inside each
run, which tells them from runs that differ as a whole. A run's mean then moves with how
many of its sets landed on each level, and that luck, not the code, sets the runs' spread:
1.2-4% for such cases, so a +2% change could not be called. Where both sides show the same
levels in compatible shares, each sample is taken relative to its side's level (the mean log
of that level's samples) and each run's value is the trimmed mean of those, put back on the
levels' common shares: post-stratification, the run-to-run spread left is the runs' own. A
change that moves every level moves every run value; one that moves the shares, adds or
drops a level falls back to the plain run values, where it shows. The collector's stopping
rule reads one side's run values the same way (`side_values`). Why and the H200 records
behind it: docs/statistics.md, "Placement levels".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collector.aggregate import LATENCY_TRIM, trimmed_mean

# Defaults of the comparison's settings (bot/compare/stats.py) and the stopping rule's values:
# fp8 GEMMs' levels sit 15-20% apart, 3% splits every level seen on the H200 (the
# replays in docs/statistics.md), and a level needs 5% of a side's samples.
LEVEL_GAP = 0.03
LEVEL_MIN_SHARE = 0.05


@dataclass(frozen=True)
class Levels:
    """One side's levels: each sample's level (0 = fastest) and each level's centre (mean
    log latency of its samples)."""

    label: list[np.ndarray]  # per run
    centre: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(np.concatenate(self.label), minlength=self.centre.size)


def find_levels(runs: Sequence[np.ndarray], gap: float, min_share: float) -> Levels:
    """Split a side's pooled log samples where consecutive sorted values are more than
    log1p(`gap`) apart; a level holding less than `min_share` of the samples joins the
    nearer of its neighbours (repeatedly, smallest first)."""
    logs = [np.log(np.asarray(r, dtype=float)) for r in runs]
    pooled = np.concatenate(logs)
    order = np.sort(pooled)
    cuts = [int(i) + 1 for i in np.flatnonzero(np.diff(order) > np.log1p(gap))]
    bounds = [0, *cuts, int(order.size)]
    groups: list[tuple[int, int]] = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    least = max(1, int(np.ceil(min_share * order.size)))
    while len(groups) > 1:
        sizes = [hi - lo for lo, hi in groups]
        small = int(np.argmin(sizes))
        if sizes[small] >= least:
            break
        lo, hi = groups[small]
        left = order[lo] - order[groups[small - 1][1] - 1] if small > 0 else np.inf
        right = order[groups[small + 1][0]] - order[hi - 1] if small + 1 < len(groups) else np.inf
        other = small - 1 if left <= right else small + 1
        a, b = sorted((small, other))
        groups[a : b + 1] = [(groups[a][0], groups[b][1])]
    # Upper edges in log space: a sample belongs to the first level whose edge it reaches.
    edges = np.array([order[hi - 1] for _, hi in groups[:-1]])
    centre = np.array([order[lo:hi].mean() for lo, hi in groups])
    label = [np.searchsorted(edges, v, side="left") for v in logs]
    return Levels(label, centre)


def within_runs(levels: Levels) -> bool:
    """Every level shows beside another one inside at least two runs: placement levels mix
    within a run, where runs that each sit on their own level (a run-to-run spread larger
    than the gap, a collection whose later runs stepped down) must keep their spread."""
    mixed = [np.unique(lab) for lab in levels.label if np.unique(lab).size > 1]
    seen = np.zeros(levels.centre.size, dtype=np.int64)
    for present in mixed:
        seen[present] += 1
    return bool((seen >= 2).all())


def mixed_levels(runs: Sequence[np.ndarray], gap: float, min_share: float) -> Levels | None:
    """A side's levels where they mix inside its runs (`within_runs`); None where they do not
    or `gap` is 0 (off)."""
    if gap <= 0:
        return None
    found = find_levels(runs, gap, min_share)
    return found if within_runs(found) else None


def shares_agree(base: Levels, cand: Levels, alpha: float) -> bool:
    """Both sides hold the same number (two or more) of levels in shares that a chi-square
    test of the 2 x k table does not tell apart at `alpha`."""
    k = base.centre.size
    if k < 2 or cand.centre.size != k:
        return False
    from scipy import stats as sps

    table = np.stack([base.counts, cand.counts])
    return bool(sps.chi2_contingency(table).pvalue >= alpha)


def _on_common_shares(
    runs: Sequence[np.ndarray], levels: Levels, weights: np.ndarray, trim: float
) -> np.ndarray:
    """Each run's trimmed mean of its samples relative to their levels, on the common shares."""
    shift = float(weights @ levels.centre)
    return np.array(
        [
            np.exp(
                trimmed_mean(np.log(np.asarray(r, dtype=float)) - levels.centre[lab], trim) + shift
            )
            for r, lab in zip(runs, levels.label, strict=True)
        ]
    )


def side_values(
    runs: Sequence[np.ndarray],
    trim: float = LATENCY_TRIM,
    gap: float = LEVEL_GAP,
    min_share: float = LEVEL_MIN_SHARE,
) -> np.ndarray:
    """One side's run values: level by level on its own shares where its samples show levels
    that mix inside its runs, else each run's trimmed mean."""
    found = mixed_levels(runs, gap, min_share)
    if found is None:
        return np.array([trimmed_mean(np.asarray(r, dtype=float), trim) for r in runs])
    return _on_common_shares(runs, found, found.counts / found.counts.sum(), trim)


@dataclass(frozen=True)
class Matched:
    """A case compared level by level: the run values of both sides and cand/base."""

    base: np.ndarray
    cand: np.ndarray
    ratio: float
    levels: int


def match(
    base: Sequence[np.ndarray],
    cand: Sequence[np.ndarray],
    gap: float,
    min_share: float,
    alpha: float,
    trim: float,
) -> Matched | None:
    """The level-by-level run values of a case, or None where its sides do not show the same
    levels in compatible shares (the plain run values serve then). `gap` 0 turns it off."""
    lb, lc = mixed_levels(base, gap, min_share), mixed_levels(cand, gap, min_share)
    if lb is None or lc is None or not shares_agree(lb, lc, alpha):
        return None
    counts = lb.counts + lc.counts
    weights = counts / counts.sum()
    bv = _on_common_shares(base, lb, weights, trim)
    cv = _on_common_shares(cand, lc, weights, trim)
    ratio = float(np.exp(weights @ (lc.centre - lb.centre)))
    return Matched(bv, cv, ratio, int(lb.centre.size))
