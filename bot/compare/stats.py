"""Statistics for latency comparisons, vectorised so that large comparisons stay fast.

Runs are the unit of the test, of the noise and of the interval, since samples inside one
run need not be independent; a run's value is the trimmed mean of its samples (`run_values`,
the quantity the collector's stopping rule reads). The estimate is the 10% trimmed mean of
all samples pooled over runs. Its interval is a Welch t-interval on the mean log run values
where both sides have two runs or more, else a two-level bootstrap (resample runs, then
samples in each run). Why this shape, and the H200 A/As that chose it: docs/statistics.md.

The verdict rule (`verdicts`) asks three things of a regression: the run-level test is
significant after Benjamini-Hochberg control across cases, the interval excludes every change
smaller than `min_effect` (not merely "no change"), and the estimate exceeds the case's own
noise threshold. The `min_effect` clause removes the unchanged cases Benjamini-Hochberg lets
through when a PR truly moves many (docs/statistics.md; tests/test_stats_simulation.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from collector.aggregate import LATENCY_TRIM, trimmed_mean
from collector.levels import LEVEL_GAP, LEVEL_MIN_SHARE
from collector.settings import setting

# scipy.stats is imported where it is used: it costs about a second of start-up, and a
# comparison of imported tables (no samples) never needs it.

REGRESSED = "regressed"
IMPROVED = "improved"
SAME = "same"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REGRESSED, IMPROVED, INCONCLUSIVE, SAME)


@dataclass(frozen=True)
class MinEffectOverride:
    """A minimum effect for the cases of one op, one dtype, or one op's dtype."""

    min_effect: float
    op: str | None = None
    dtype: str | None = None

    def matches(self, op: str, dtype: str) -> bool:
        return self.op in (None, op) and self.dtype in (None, dtype)

    def spec(self) -> str:
        """The command-line form: OP=VALUE, OP/DTYPE=VALUE or */DTYPE=VALUE."""
        scope = f"{self.op or '*'}/{self.dtype}" if self.dtype else str(self.op)
        return f"{scope}={self.min_effect}"

    @classmethod
    def parse(cls, text: str) -> MinEffectOverride:
        """`spec`'s inverse; ValueError (naming what is wrong) for anything else."""
        scope, sep, value = text.partition("=")
        op, _, dtype = scope.strip().partition("/")
        try:
            effect = float(value)
        except ValueError:
            effect = float("nan")
        bad_scope = not op or (op == "*" and not dtype)
        if not sep or bad_scope or not (0.0 <= effect < float("inf")):
            raise ValueError(f"{text!r:.80}: want OP=VALUE, OP/DTYPE=VALUE or */DTYPE=VALUE")
        from collector.ops import OPS

        if op != "*" and op not in OPS:
            raise ValueError(f"{text!r:.80}: unknown op {op!r:.40} (known: {', '.join(OPS)})")
        return cls(effect, None if op == "*" else op, dtype or None)


@dataclass(frozen=True)
class Settings:
    # Benjamini-Hochberg.
    alpha: float = setting(
        0.05, min=0.0001, max=0.5, unit="fraction", help="False discovery rate across cases."
    )
    confidence: float = setting(
        0.95, min=0.5, max=0.999, unit="fraction", help="Confidence of each case's interval."
    )
    # Under 1%: a case stops once its own interval is +/-0.8%, so a comparison's interval of
    # a +2% change reaches down to about +0.9%, and a floor of 1% missed a tenth of them.
    min_effect: float = setting(
        0.0075,
        min=0.0,
        unit="fraction",
        help="Smallest relative change that can be a verdict (0.0075 = 0.75%).",
    )
    noise_mult: float = setting(
        2.0,
        min=0.0,
        unit="x noise",
        help="A case's threshold is at least this many times its run-to-run noise.",
    )
    size_only_threshold: float = setting(
        0.05,
        min=0.0,
        unit="fraction",
        help="Threshold for rows without samples (e.g. imported tables).",
    )
    # The "same" band is never wider than this: a very noisy case is not "same".
    max_same_band: float = setting(
        0.10,
        min=0.0,
        unit="fraction",
        help="Widest band a case may be called unchanged in (a noisier one is inconclusive).",
    )
    bootstrap: int = setting(
        2000,
        min=100,
        unit="replicates",
        help="Bootstrap replicates for a case's interval when a side has a single run, and "
        "for a group's geometric mean.",
    )
    # A side whose run values trend with run order (bot/compare/drift.py).
    drift_alpha: float = setting(
        0.01,
        min=0.0,
        max=0.5,
        unit="p-value",
        help="A side trends when its runs' Mann-Kendall p (BH across sides) is below this.",
    )
    drift_min: float = setting(
        0.02,
        min=0.0,
        unit="fraction",
        help="Smallest trend across a side's runs that marks its case as drifting (0.02 = 2%).",
    )
    # Placement levels (collector/levels.py): an fp8 GEMM's sets sit 15-20% apart.
    level_gap: float = setting(
        LEVEL_GAP,
        min=0.0,
        unit="fraction",
        help="Samples further apart than this (sorted, relative) start a new placement "
        "level; a case whose sides show the same levels in compatible shares is compared "
        "level by level (0 turns it off).",
    )
    level_min_share: float = setting(
        LEVEL_MIN_SHARE,
        min=0.0,
        max=0.5,
        unit="fraction",
        help="A placement level holds at least this share of a side's samples; a smaller "
        "one joins its nearer neighbour.",
    )
    level_share_alpha: float = setting(
        0.001,
        min=0.0,
        max=0.5,
        unit="p-value",
        help="The sides' level shares differ (chi-square p below this): no level-by-level "
        "comparison, the plain run values show the shift.",
    )
    # The row's latency in the run record uses the same share (LATENCY_TRIM).
    trim: float = setting(
        LATENCY_TRIM,
        min=0.0,
        max=0.45,
        unit="fraction",
        help="Share of samples cut from each end before averaging: of a case's pooled "
        "samples (its estimate) and of each run's (the run's value).",
    )
    seed: int = setting(
        20261130, help="Bootstrap seed: the same records and seed give the same result."
    )
    # The most specific matching entry replaces `min_effect` for a case; a later one wins a
    # tie. Usually set by a repository's .github/collectbot.yml (bot/ci_config.py).
    min_effect_overrides: tuple[MinEffectOverride, ...] = setting(
        (),
        cli="min-effect-for",
        unit="fraction",
        help="A minimum effect for one op, one dtype or one op's dtype: OP=VALUE, "
        "OP/DTYPE=VALUE or */DTYPE=VALUE (repeat the option for several).",
        parse=MinEffectOverride.parse,
        show=MinEffectOverride.spec,
    )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def min_effect_for(self, op: str, dtype: str) -> float:
        best, rank = self.min_effect, -1
        for o in self.min_effect_overrides:
            specific = (o.op is not None) + (o.dtype is not None)
            if o.matches(op, dtype) and specific >= rank:
                best, rank = o.min_effect, specific
        return best


def median(values: np.ndarray) -> float:
    s = np.sort(values)
    n = s.size
    return float(s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def run_values(runs: Sequence[np.ndarray], trim: float = LATENCY_TRIM) -> np.ndarray:
    """Each run's value: the trimmed mean of its samples (what the collector's stopping rule
    reads). A run's samples come from several buffer sets whose levels differ; the mean
    averages them where a median jumps from one level to the next."""
    return np.array([trimmed_mean(np.asarray(r, dtype=float), trim) for r in runs], dtype=float)


def pack_runs(
    runs: Sequence[np.ndarray], width: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Runs as a padded (R, W) array plus each run's length, for vectorised resampling."""
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    packed = np.zeros((len(runs), width or int(lengths.max())), dtype=float)
    for i, r in enumerate(runs):
        packed[i, : len(r)] = r
    return packed, lengths


def pooled_estimate(runs: Sequence[np.ndarray], trim: float = LATENCY_TRIM) -> float:
    """The case's latency: the trimmed mean of all its samples, over every run."""
    return trimmed_mean(np.concatenate([np.asarray(r, dtype=float) for r in runs]), trim)


# Cases x replicates x samples held at once by the bootstrap: about 32 MB per int32 array.
CHUNK_VALUES = 8_000_000
# Cases per shape batch in `bootstrap_intervals`: one draw of indices serves a whole batch.
BATCH = 256


def _draw_counts(pick: np.ndarray, idx: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """How often each (run, slot) sample is drawn in each replicate: (n_boot, runs x width).

    `pick` (n_boot, runs) are the resampled runs, `idx` (n_boot, runs, width) the slots
    drawn within each picked run, `keep` which of those draws count (ragged runs)."""
    n_boot, n_runs, width = idx.shape
    slots = n_runs * width
    flat = np.arange(n_boot)[:, None, None] * slots + pick[:, :, None] * width + idx
    if keep is not None:
        flat = flat[keep]
    counts = np.bincount(flat.ravel(), minlength=n_boot * slots)
    return counts.reshape(n_boot, slots)


def weighted_trimmed_means(values: np.ndarray, counts: np.ndarray, trim: float) -> np.ndarray:
    """Trimmed means of multisets given as values (cases, S) and draw counts (cases, n_boot,
    S), or (n_boot, S) shared by all cases: `trimmed_mean(np.repeat(values, counts), trim)`
    per row, computed without expanding it. Returns (cases, n_boot)."""
    order = np.argsort(values, axis=1)
    ranked = np.take_along_axis(values, order, axis=1)
    # The narrowest integer that holds a replicate's size: the running count is most of
    # the bootstrap's time, and it is bound by memory traffic.
    most = int(counts.sum(axis=-1).max()) if counts.size else 0
    dtype = np.int8 if most <= 127 else np.int16 if most <= 32767 else np.int64
    small = counts.astype(dtype)
    # Laid out (cases, S, n_boot): the running count over S then adds whole rows.
    if small.ndim == 2:
        w = np.ascontiguousarray(small.T)[order]
    else:
        w = np.take_along_axis(np.swapaxes(small, 1, 2), order[:, :, None], axis=1)
    cum: np.ndarray = np.cumsum(w, axis=1, dtype=dtype)
    total = cum[:, -1:, :].astype(np.int64)
    # Ranks [cut, total - cut) are kept, cut = int(trim * total) as in scipy's trim_mean.
    # A value whose copies hold ranks [cum - w, cum) keeps those inside that window.
    cut = (total * trim).astype(np.int64)
    low, high = cut.astype(dtype), (total - cut).astype(dtype)
    # (np.minimum/np.maximum: several times faster than np.clip on small integers.)
    kept = np.minimum(np.maximum(cum, low), high) - np.minimum(np.maximum(cum - w, low), high)
    sums = np.einsum("cs,csb->cb", ranked, kept)
    return np.asarray(sums / (total - 2 * cut)[:, 0, :])


def bootstrap_batch(
    packed: np.ndarray,
    lengths: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    trim: float = LATENCY_TRIM,
) -> np.ndarray:
    """Bootstrap distributions of the pooled estimate for a batch of cases.

    `packed` is (cases, runs, width) and `lengths` (cases, runs). Two levels: runs are
    resampled first, then samples within each picked run, each run at its own length; the
    replicate is the trimmed mean of everything drawn. Resampling runs keeps the interval honest
    when a run's samples share one state (docs/statistics.md); resampling samples keeps it
    from collapsing when runs are few. One draw of indices is shared by the cases of a
    batch: each case's bootstrap is still a valid bootstrap. Returns (cases, n_boot).
    """
    n_cases, n_runs, width = packed.shape
    pick = rng.integers(0, n_runs, size=(n_boot, n_runs))
    values = packed.reshape(n_cases, n_runs * width)
    out = np.empty((n_cases, n_boot), dtype=float)
    if np.all(lengths == width):
        counts = _draw_counts(pick, rng.integers(0, width, size=(n_boot, n_runs, width)), None)
        step = max(1, CHUNK_VALUES // max(1, counts.size))
        for start in range(0, n_cases, step):
            out[start : start + step] = weighted_trimmed_means(
                values[start : start + step], counts, trim
            )
        return out
    # Ragged runs (dropped samples): a short run contributes its own number of draws, each
    # from its own samples, never from the padding.
    u = rng.random(size=(n_boot, n_runs, width))
    for case in range(n_cases):
        picked = lengths[case][pick][:, :, None]  # (n_boot, runs, 1)
        idx = (u * picked).astype(np.int64)
        keep = np.arange(width)[None, None, :] < picked
        counts = _draw_counts(pick, idx, keep)
        out[case] = weighted_trimmed_means(values[case : case + 1], counts[None], trim)[0]
    return out


def bootstrap_pooled_estimate(
    runs: Sequence[np.ndarray],
    n_boot: int,
    rng: np.random.Generator,
    trim: float = LATENCY_TRIM,
) -> np.ndarray:
    packed, lengths = pack_runs(runs)
    result: np.ndarray = bootstrap_batch(packed[None], lengths[None], n_boot, rng, trim)[0]
    return result


RunPair = tuple[Sequence[np.ndarray], Sequence[np.ndarray]]


def ratio_interval(
    base: Sequence[np.ndarray],
    cand: Sequence[np.ndarray],
    settings: Settings,
    rng: np.random.Generator,
) -> tuple[float, float]:
    lo, hi = ratio_intervals([(base, cand)], settings, rng)[0]
    return lo, hi


def ratio_intervals(
    pairs: Sequence[RunPair],
    settings: Settings,
    rng: np.random.Generator,
    values: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[tuple[float, float]]:
    """Intervals of cand/base for many cases: Welch's t-interval on the log run values where
    both sides have two runs or more (`welch_intervals`), else the two-level bootstrap of the
    pooled estimate (`bootstrap_intervals`). `values`, when given, are the pairs' run values
    (`run_values` with `settings.trim`), aligned with `pairs`."""
    if values is None:
        values = [(run_values(b, settings.trim), run_values(c, settings.trim)) for b, c in pairs]
    bounds = welch_intervals(values, settings.confidence)
    out = [(float(lo), float(hi)) for lo, hi in bounds]
    single = [i for i, (b, c) in enumerate(pairs) if len(b) < 2 or len(c) < 2]
    if single:
        boot = bootstrap_intervals([pairs[i] for i in single], settings, rng)
        for i, interval in zip(single, boot, strict=True):
            out[i] = interval
    return out


def welch_intervals(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], confidence: float
) -> np.ndarray:
    """cand/base from Welch's t-interval on the difference of the mean log run values, batched
    by run counts: (cases, 2), NaN where a side has < 2 runs. Runs that agree exactly on both
    sides give the ratio of their values at both ends."""
    out = np.full((len(pairs), 2), np.nan)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        if b.size >= 2 and c.size >= 2:
            shapes.setdefault((b.size, c.size), []).append(i)
    if not shapes:
        return out
    from scipy import stats as sps

    for (nb, nc), members in shapes.items():
        lb = np.log(np.stack([pairs[i][0] for i in members]))
        lc = np.log(np.stack([pairs[i][1] for i in members]))
        diff = lc.mean(axis=1) - lb.mean(axis=1)
        vb, vc = lb.var(axis=1, ddof=1) / nb, lc.var(axis=1, ddof=1) / nc
        se = np.sqrt(vb + vc)
        spread = se > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            dof = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
        t = sps.t.ppf(0.5 + confidence / 2.0, np.where(spread, dof, 1.0))
        half = np.where(spread, t * se, 0.0)
        out[members, 0] = np.exp(diff - half)
        out[members, 1] = np.exp(diff + half)
    return out


def bootstrap_intervals(
    pairs: Sequence[RunPair], settings: Settings, rng: np.random.Generator
) -> list[tuple[float, float]]:
    """Two-level bootstrap intervals of the pooled estimate's cand/base (`bootstrap_batch`),
    batched by run count and width: what a case gets when a side has a single run."""
    tail = (1.0 - settings.confidence) / 2.0 * 100.0
    out: list[tuple[float, float]] = [(float("nan"), float("nan"))] * len(pairs)
    shapes: dict[tuple[int, int, int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        key = (len(b), max(len(r) for r in b), len(c), max(len(r) for r in c))
        shapes.setdefault(key, []).append(i)
    for shape in sorted(shapes):
        members = shapes[shape]
        _, bw, _, cw = shape
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
                        settings.trim,
                    )
                )
            bounds = np.percentile(sides[1] / sides[0], [tail, 100.0 - tail], axis=1)
            for j, i in enumerate(chunk):
                out[i] = (float(bounds[0, j]), float(bounds[1, j]))
    return out


def run_test_pvalue(base_values: np.ndarray, cand_values: np.ndarray) -> float:
    return float(run_test_pvalues([(base_values, cand_values)])[0])


def run_test_pvalues(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Welch's t-test on log run values (`run_values`), batched; NaN where a side has < 2
    runs."""
    out = np.full(len(pairs), np.nan)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, (b, c) in enumerate(pairs):
        if b.size >= 2 and c.size >= 2:
            shapes.setdefault((b.size, c.size), []).append(i)
    from scipy import stats as sps

    for members in shapes.values():
        lb = np.log(np.stack([pairs[i][0] for i in members]))
        lc = np.log(np.stack([pairs[i][1] for i in members]))
        # Runs of identical values (a record compared with itself, a timer's resolution)
        # make scipy warn about precision; the flat cases are decided just below.
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p = sps.ttest_ind(lc, lb, axis=1, equal_var=False).pvalue
        p = np.asarray(p, dtype=float)
        # Zero variance on both sides: any difference is certain, none is no evidence.
        flat = ~np.isfinite(p)
        differs = np.abs(lc.mean(axis=1) - lb.mean(axis=1)) > 0
        p[flat] = np.where(differs[flat], 0.0, 1.0)
        out[members] = p
    return out


def noise_of(base_values: np.ndarray, cand_values: np.ndarray) -> float:
    """Pooled run-to-run spread (sd of log run values): the case's own noise."""
    parts = [np.log(m) for m in (base_values, cand_values) if m.size >= 2]
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
        from scipy import stats as sps

        q[ok] = sps.false_discovery_control(pvalues[ok], method="bh")
    return q


def verdicts(
    ratio: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    q: np.ndarray,
    threshold: np.ndarray,
    alpha: float,
    min_effect: float | np.ndarray,
    max_same_band: float = Settings.max_same_band,
) -> np.ndarray:
    """Verdicts for many cases at once (arrays of equal length; NaN q = not significant).

    Regressed (improved): the run-level test is significant after FDR control, the interval
    excludes every change smaller than `min_effect` (one value, or one per case), and the
    estimate exceeds the case's own threshold. Same: the interval lies inside the band, or the
    estimate does and the interval stays within twice the band (or the change is real but
    below the threshold); the band is the threshold, never wider than `max_same_band`, so a
    very noisy case is not "same". Anything else is inconclusive.
    """
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    floor_up, floor_down = 1.0 + min_effect, 1.0 / (1.0 + min_effect)
    band = np.minimum(threshold, max_same_band)
    b_up, b_down = 1.0 + band, 1.0 / (1.0 + band)
    wide_up, wide_down = 1.0 + 2 * band, 1.0 / (1.0 + 2 * band)
    with np.errstate(invalid="ignore"):
        significant = np.isfinite(q) & (q < alpha)
        regressed = significant & (lo > floor_up) & (ratio > up)
        improved = significant & (hi < floor_down) & (ratio < down)
        inside = (b_down <= lo) & (hi <= b_up)
        near_band = (wide_down <= lo) & (hi <= wide_up)
        near = (b_down <= ratio) & (ratio <= b_up) & (significant | near_band)
    return np.select(
        [regressed, improved, inside | near],
        [REGRESSED, IMPROVED, SAME],
        default=INCONCLUSIVE,
    ).astype(object)


def verdict(
    ratio: float,
    lo: float,
    hi: float,
    q: float,
    threshold: float,
    alpha: float,
    min_effect: float = Settings.min_effect,
    max_same_band: float = Settings.max_same_band,
) -> str:
    """One case's verdict: see `verdicts`."""
    r, low, high, qv, th = (np.array([v], dtype=float) for v in (ratio, lo, hi, q, threshold))
    return str(verdicts(r, low, high, qv, th, alpha, min_effect, max_same_band)[0])


def size_only_verdicts(ratio: np.ndarray, settings: Settings) -> np.ndarray:
    """For single-number rows (no samples on a side): the change must exceed a fixed size."""
    t = settings.size_only_threshold
    return np.select(
        [ratio > 1.0 + t, ratio < 1.0 / (1.0 + t)], [REGRESSED, IMPROVED], default=SAME
    ).astype(object)


def size_only_verdict(ratio: float, settings: Settings) -> str:
    return str(size_only_verdicts(np.array([ratio]), settings)[0])


# Above this many cases the interval of a geometric mean comes from the normal
# approximation (the bootstrap of a mean of that many values agrees with it to 3 digits,
# and Student's t quantile with 400 degrees of freedom is within 0.3% of the normal's).
GEOMEAN_BOOTSTRAP_MAX = 400


def geomean_interval(
    log_ratios: np.ndarray, settings: Settings, rng: np.random.Generator
) -> tuple[float, float, float]:
    """Geometric-mean ratio of a group of cases with a bootstrap-over-cases interval."""
    point = float(np.exp(np.mean(log_ratios)))
    n = log_ratios.size
    if n < 2:
        return point, point, point
    tail = (1.0 - settings.confidence) / 2.0
    if n > GEOMEAN_BOOTSTRAP_MAX:
        z = NormalDist().inv_cdf(1.0 - tail)
        half = float(z * np.std(log_ratios, ddof=1) / np.sqrt(n))
        mean = float(np.mean(log_ratios))
        return point, float(np.exp(mean - half)), float(np.exp(mean + half))
    n_boot = min(settings.bootstrap, 1000)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = log_ratios[idx].mean(axis=1)
    lo, hi = np.percentile(means, [tail * 100.0, 100.0 - tail * 100.0])
    return point, float(np.exp(lo)), float(np.exp(hi))
