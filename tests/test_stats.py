from __future__ import annotations

import numpy as np
import pytest

from bot.compare import stats
from tests.factories import simulated_runs


def _arrays(runs: list[list[float]]) -> list[np.ndarray]:
    return [np.asarray(r) for r in runs]


def test_interval_covers_a_known_shift(rng: np.random.Generator) -> None:
    settings = stats.Settings()
    base = _arrays(simulated_runs(rng, 1.0))
    cand = _arrays(simulated_runs(rng, 1.05))
    lo, hi = stats.ratio_interval(base, cand, settings, rng)
    assert lo < 1.05 < hi
    assert hi - lo < 0.03


def test_test_on_run_medians_separates_shift_from_noise(rng: np.random.Generator) -> None:
    same = stats.run_test_pvalue(
        stats.run_medians(_arrays(simulated_runs(rng, 1.0))),
        stats.run_medians(_arrays(simulated_runs(rng, 1.0))),
    )
    moved = stats.run_test_pvalue(
        stats.run_medians(_arrays(simulated_runs(rng, 1.0))),
        stats.run_medians(_arrays(simulated_runs(rng, 1.03))),
    )
    assert moved < 1e-4
    assert same > moved
    assert np.isnan(stats.run_test_pvalue(np.array([1.0]), np.array([1.0, 1.1])))


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "q", "expected"),
    [
        (1.05, 1.04, 1.06, 0.001, stats.REGRESSED),
        (0.95, 0.94, 0.96, 0.001, stats.IMPROVED),
        (1.001, 0.995, 1.007, 0.6, stats.SAME),
        (1.008, 1.004, 1.012, 0.01, stats.SAME),  # real, but below the case's threshold
        # Significant and beyond the threshold, but the interval admits a change under 1%:
        # not enough for a regression (this is what keeps false alarms out under BH).
        (1.02, 1.005, 1.035, 0.01, stats.INCONCLUSIVE),
        (1.02, 1.011, 1.035, 0.01, stats.REGRESSED),  # the interval clears min_effect
        (0.97, 0.96, 0.985, 0.01, stats.IMPROVED),
        (0.98, 0.96, 0.995, 0.01, stats.INCONCLUSIVE),
        (1.05, 1.04, 1.06, float("nan"), stats.INCONCLUSIVE),  # no test (one run a side)
        (1.02, 0.99, 1.05, 0.01, stats.INCONCLUSIVE),  # interval includes no change
        (1.05, 0.90, 1.20, 0.4, stats.INCONCLUSIVE),  # too noisy to say
        (1.005, 0.95, 1.06, 0.7, stats.INCONCLUSIVE),  # centred, but the interval is wide
    ],
)
def test_verdict_rules(ratio: float, lo: float, hi: float, q: float, expected: str) -> None:
    assert stats.verdict(ratio, lo, hi, q, threshold=0.01, alpha=0.05) == expected


def test_vectorised_verdicts_match_the_scalar_rule(rng: np.random.Generator) -> None:
    n = 500
    ratio = np.exp(rng.normal(0, 0.03, n))
    half = np.abs(rng.normal(0.01, 0.01, n))
    lo, hi = ratio * np.exp(-half), ratio * np.exp(half)
    q = rng.uniform(0, 0.2, n)
    q[::7] = np.nan
    threshold = rng.uniform(0.01, 0.03, n)
    vec = stats.verdicts(ratio, lo, hi, q, threshold, 0.05, 0.01)
    scalar = [
        stats.verdict(ratio[i], lo[i], hi[i], q[i], threshold[i], 0.05, 0.01) for i in range(n)
    ]
    assert list(vec) == scalar
    assert set(vec) == set(stats.VERDICTS)


def test_ragged_runs_bootstrap_within_their_own_length(rng: np.random.Generator) -> None:
    """A run with dropped samples is resampled at its own size, never from the padding."""
    runs = [np.full(8, 1.0), np.full(3, 1.0), np.full(8, 1.0)]
    boot = stats.bootstrap_pooled_median(runs, 500, rng)
    assert np.all(boot == 1.0)
    runs = [rng.normal(2.0, 0.01, 8), rng.normal(2.0, 0.01, 5), rng.normal(2.0, 0.01, 8)]
    boot = stats.bootstrap_pooled_median(runs, 500, rng)
    assert boot.min() > 1.97
    assert boot.max() < 2.03


def test_geomean_interval_small_and_large_groups(rng: np.random.Generator) -> None:
    s = stats.Settings()
    for n in (50, 5000):
        logs = rng.normal(np.log(1.03), 0.02, n)
        point, lo, hi = stats.geomean_interval(logs, s, rng)
        assert lo < 1.03 < hi
        assert lo < point < hi
        assert hi - lo < 0.02


def test_threshold_grows_with_noise() -> None:
    s = stats.Settings(min_effect=0.01, noise_mult=2.0)
    assert stats.threshold_for(0.001, s) == 0.01
    assert stats.threshold_for(0.02, s) == pytest.approx(0.04)


def test_bh_keeps_nan_and_is_monotone() -> None:
    q = stats.bh_qvalues(np.array([0.001, np.nan, 0.04, 0.5]))
    assert np.isnan(q[1])
    assert q[0] <= q[2] <= q[3]


def test_size_only_rule() -> None:
    s = stats.Settings(size_only_threshold=0.05)
    assert stats.size_only_verdict(1.06, s) == stats.REGRESSED
    assert stats.size_only_verdict(1.04, s) == stats.SAME
    assert stats.size_only_verdict(0.9, s) == stats.IMPROVED


def test_a_very_noisy_case_is_never_same() -> None:
    # The case's noise made its threshold 40%; its interval is far too wide to call it same.
    assert stats.verdict(1.05, 0.92, 1.78, 0.6, threshold=0.4, alpha=0.05) == stats.INCONCLUSIVE
    assert stats.verdict(1.01, 0.97, 1.04, 0.6, threshold=0.4, alpha=0.05) == stats.SAME


@pytest.mark.parametrize("shared", [True, False])
def test_weighted_medians_equal_the_median_of_the_expanded_multiset(
    rng: np.random.Generator, shared: bool
) -> None:
    cases, n_boot, size = 7, 50, 13
    values = rng.normal(1.0, 0.1, (cases, size))
    values[0, :4] = values[0, 4]  # ties
    shape = (n_boot, size) if shared else (cases, n_boot, size)
    counts = rng.integers(0, 4, shape)
    counts[..., 0] += 1  # no empty replicate; totals are odd and even
    got = stats.weighted_medians(values, counts)
    for c in range(cases):
        for b in range(n_boot):
            row = counts[b] if shared else counts[c, b]
            assert got[c, b] == pytest.approx(np.median(np.repeat(values[c], row)), abs=0)


def test_weighted_medians_hold_large_replicates(rng: np.random.Generator) -> None:
    """Replicates over 127 and 32,767 draws take wider running counts, not wrapped ones."""
    values = rng.normal(1.0, 0.1, (2, 5))
    for total in (400, 40_000):
        counts = np.zeros((3, 5), dtype=np.int64)
        counts[:, 0] = total // 2 - 1  # the smallest value is not quite half of the draws
        counts[:, 1:] = (total // 2 + 1) // 4 + 1
        got = stats.weighted_medians(values, counts)
        want = [np.median(np.repeat(values[c], counts[0])) for c in range(2)]
        assert got[:, 0] == pytest.approx(want, abs=0)


def test_estimate_is_the_pooled_median_of_all_samples() -> None:
    """The ratio is pooled median over pooled median, not median of run medians: the runs
    below have run medians 2, 5 and 9 (median 5) and 11 samples whose median is 6."""
    base = [np.array([1.0, 2, 3]), np.array([4.0, 5, 6]), np.array([7.0, 8, 9, 10, 11])]
    cand = [r * 1.1 for r in base]
    assert stats.pooled_median(base) == 6.0
    assert stats.median(stats.run_medians(base)) == 5.0
    from bot.compare.latency import _run_stats

    out = _run_stats([(base, [np.full(4, 6.6)])], stats.Settings(), np.random.default_rng(1))
    assert out["ratio"][0] == pytest.approx(1.1)
    out = _run_stats([(base, cand)], stats.Settings(), np.random.default_rng(1))
    assert out["ratio"][0] == pytest.approx(1.1)


def test_bootstrap_resamples_runs_first(rng: np.random.Generator) -> None:
    """Runs whose samples share one level (8 samples each at 1, 2 or 3): every replicate is
    one of the levels or a midpoint, and the run-level resampling spreads them."""
    runs = [np.full(8, 1.0), np.full(8, 2.0), np.full(8, 3.0)]
    boot = stats.bootstrap_pooled_median(runs, 2000, rng)
    assert set(np.unique(boot)) <= {1.0, 1.5, 2.0, 2.5, 3.0}
    assert (boot == 1.0).mean() > 0.1 and (boot == 3.0).mean() > 0.1


def test_pooled_bootstrap_narrows_with_independent_samples(rng: np.random.Generator) -> None:
    """Where samples are independent draws, more samples per run narrow the interval: the
    pooled median uses all of them (the point of one buffer set per sample)."""
    widths = []
    for samples in (8, 32):
        runs = [rng.normal(1.0, 0.03, samples) for _ in range(5)]
        boot = stats.bootstrap_pooled_median(runs, 2000, rng)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        assert lo < 1.0 < hi
        widths.append(hi - lo)
    assert widths[1] < 0.7 * widths[0]
