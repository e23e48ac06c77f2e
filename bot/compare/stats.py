"""Statistics for latency comparisons, vectorised so that 100k cases stay fast.

Why this shape (DESIGN.md section 6): samples inside one run are not independent, so tests
on samples flag most unchanged cases. Runs are the unit: the test is on per-run medians, and
the interval comes from a hierarchical bootstrap (resample runs, then samples in each run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

REGRESSED = "regressed"
IMPROVED = "improved"
SAME = "same"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REGRESSED, IMPROVED, INCONCLUSIVE, SAME)


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05  # false discovery rate across cases (Benjamini-Hochberg)
    confidence: float = 0.95  # bootstrap interval
    min_effect: float = 0.01  # smallest relative change worth a verdict
    noise_mult: float = 2.0  # threshold grows with the case's own run-to-run noise
    size_only_threshold: float = 0.05  # rows without samples: a plain size rule
    # A case too noisy for its threshold to stay under this can never be called "same".
    max_same_band: float = 0.10
    bootstrap: int = 2000
    seed: int = 20261130


def run_medians(runs: list[np.ndarray]) -> np.ndarray:
    return np.array([np.median(r) for r in runs], dtype=float)


def pack_runs(runs: list[np.ndarray], width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Runs as a padded (R, W) array plus each run's length, for vectorised resampling."""
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    packed = np.zeros((len(runs), width or int(lengths.max())), dtype=float)
    for i, r in enumerate(runs):
        packed[i, : len(r)] = r
    return packed, lengths


# Resampled medians kept per run; the run-level bootstrap draws from these pools, which is
# the two-level bootstrap at a fraction of the cost of resampling every sample every time.
POOL = 256
# Cases per vectorised batch: bounds memory at about 50 MB per batch.
BATCH = 256


def bootstrap_batch(
    packed: np.ndarray, lengths: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap distributions of the median of per-run medians for a batch of cases.

    `packed` is (cases, runs, width) and `lengths` (cases, runs). Runs are resampled first,
    then samples within each picked run (through a pool of resampled run medians).
    Returns (cases, n_boot).
    """
    n_cases, n_runs, width = packed.shape
    u = rng.random(size=(n_cases, n_runs, POOL, width))
    idx = (u * lengths[:, :, None, None]).astype(np.int64)
    resampled = np.take_along_axis(packed[:, :, None, :], idx, axis=3)
    pools = np.median(resampled, axis=3)  # (cases, runs, POOL)
    pick = rng.integers(0, n_runs, size=(n_cases, n_boot, n_runs))
    which = rng.integers(0, POOL, size=(n_cases, n_boot, n_runs))
    case_idx = np.arange(n_cases)[:, None, None]
    return np.asarray(np.median(pools[case_idx, pick, which], axis=2))


def bootstrap_median_of_medians(
    runs: list[np.ndarray], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    packed, lengths = pack_runs(runs)
    result: np.ndarray = bootstrap_batch(packed[None], lengths[None], n_boot, rng)[0]
    return result


def ratio_interval(
    base: list[np.ndarray], cand: list[np.ndarray], settings: Settings, rng: np.random.Generator
) -> tuple[float, float]:
    lo, hi = ratio_intervals([(base, cand)], settings, rng)[0]
    return lo, hi


def ratio_intervals(
    pairs: list[tuple[list[np.ndarray], list[np.ndarray]]],
    settings: Settings,
    rng: np.random.Generator,
) -> list[tuple[float, float]]:
    """Bootstrap intervals of cand/base for many cases, batched by run-count and width."""
    tail = (1.0 - settings.confidence) / 2.0 * 100.0
    out: list[tuple[float, float]] = [(float("nan"), float("nan"))] * len(pairs)
    shapes: dict[tuple[int, int, int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        key = (len(b), max(len(r) for r in b), len(c), max(len(r) for r in c))
        shapes.setdefault(key, []).append(i)
    for (_, bw, _, cw), members in shapes.items():
        for start in range(0, len(members), BATCH):
            chunk = members[start : start + BATCH]
            sides = []
            for side, width in ((0, bw), (1, cw)):
                packed = [pack_runs(pairs[i][side], width) for i in chunk]
                sides.append(
                    bootstrap_batch(
                        np.stack([p for p, _ in packed]),
                        np.stack([n for _, n in packed]),
                        settings.bootstrap,
                        rng,
                    )
                )
            bounds = np.percentile(sides[1] / sides[0], [tail, 100.0 - tail], axis=1)
            for j, i in enumerate(chunk):
                out[i] = (float(bounds[0, j]), float(bounds[1, j]))
    return out


def run_test_pvalue(base_medians: np.ndarray, cand_medians: np.ndarray) -> float:
    return float(run_test_pvalues([(base_medians, cand_medians)])[0])


def run_test_pvalues(pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Welch's t-test on log per-run medians, batched; NaN where a side has < 2 runs."""
    out = np.full(len(pairs), np.nan)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        if b.size >= 2 and c.size >= 2:
            shapes.setdefault((b.size, c.size), []).append(i)
    for members in shapes.values():
        lb = np.log(np.stack([pairs[i][0] for i in members]))
        lc = np.log(np.stack([pairs[i][1] for i in members]))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = sps.ttest_ind(lc, lb, axis=1, equal_var=False).pvalue
        p = np.asarray(p, dtype=float)
        # Zero variance on both sides: any difference is certain, none is no evidence.
        flat = ~np.isfinite(p)
        differs = np.abs(lc.mean(axis=1) - lb.mean(axis=1)) > 0
        p[flat] = np.where(differs[flat], 0.0, 1.0)
        out[members] = p
    return out


def noise_of(base_medians: np.ndarray, cand_medians: np.ndarray) -> float:
    """Pooled run-to-run spread (sd of log per-run medians): the case's own noise."""
    parts = [np.log(m) for m in (base_medians, cand_medians) if m.size >= 2]
    if not parts:
        return 0.0
    dof = sum(p.size - 1 for p in parts)
    ss = sum(float(np.sum((p - p.mean()) ** 2)) for p in parts)
    return float(np.sqrt(ss / dof)) if dof > 0 else 0.0


def threshold_for(noise: float, settings: Settings) -> float:
    return max(settings.min_effect, settings.noise_mult * noise)


def bh_qvalues(pvalues: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values; NaN stays NaN."""
    q = np.full(pvalues.shape, np.nan)
    ok = np.isfinite(pvalues)
    if ok.any():
        q[ok] = sps.false_discovery_control(pvalues[ok], method="bh")
    return q


def verdict(
    ratio: float,
    lo: float,
    hi: float,
    q: float,
    threshold: float,
    alpha: float,
    max_same_band: float = 0.10,
) -> str:
    """A case's verdict.

    Regressed (improved): the run-level test is significant after FDR control, the interval
    excludes no change, and the estimate exceeds the case's own threshold. Same: the interval
    lies inside the threshold band, or the estimate does and the interval stays within twice
    the band (the band never wider than `max_same_band`, so a very noisy case is not "same").
    Anything else is inconclusive.
    """
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    significant = bool(np.isfinite(q) and q < alpha)
    if significant and lo > 1.0 and ratio > up:
        return REGRESSED
    if significant and hi < 1.0 and ratio < down:
        return IMPROVED
    band = min(threshold, max_same_band)
    b_up, b_down = 1.0 + band, 1.0 / (1.0 + band)
    if b_down <= lo and hi <= b_up:
        return SAME
    if b_down <= ratio <= b_up:
        wide_up, wide_down = 1.0 + 2 * band, 1.0 / (1.0 + 2 * band)
        # A real but sub-threshold change, or noise that stays near the band, is no finding.
        if significant or (wide_down <= lo and hi <= wide_up):
            return SAME
    return INCONCLUSIVE


def size_only_verdict(ratio: float, settings: Settings) -> str:
    """For single-number rows (no samples on a side): the change must exceed a fixed size."""
    if ratio > 1.0 + settings.size_only_threshold:
        return REGRESSED
    if ratio < 1.0 / (1.0 + settings.size_only_threshold):
        return IMPROVED
    return SAME


def geomean_interval(
    log_ratios: np.ndarray, settings: Settings, rng: np.random.Generator
) -> tuple[float, float, float]:
    """Geometric-mean ratio of a group of cases with a bootstrap-over-cases interval."""
    point = float(np.exp(np.mean(log_ratios)))
    if log_ratios.size < 2:
        return point, point, point
    n_boot = min(settings.bootstrap, 1000)
    idx = rng.integers(0, log_ratios.size, size=(n_boot, log_ratios.size))
    means = log_ratios[idx].mean(axis=1)
    tail = (1.0 - settings.confidence) / 2.0 * 100.0
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return point, float(np.exp(lo)), float(np.exp(hi))
