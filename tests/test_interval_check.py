"""`bench/gpu/interval_check.py`'s Welch interval is scipy's, on log per-run means.

The tool compares the comparison's bootstrap interval with the interval the collector's
stopping rule reads; its figures are in docs/benchmarks.md (the fifth lease of 2026-12-02).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from bench.gpu.interval_check import welch_interval


def test_the_interval_is_scipy_s_welch_interval_on_the_log_run_means() -> None:
    rng = np.random.default_rng(22)
    base = np.log(rng.uniform(0.99, 1.01, size=4))
    cand = np.log(1.02 * rng.uniform(0.99, 1.01, size=3))
    lo, hi = welch_interval(base, cand, 0.95)
    want = sps.ttest_ind(cand, base, equal_var=False).confidence_interval(0.95)
    assert lo == pytest.approx(np.exp(want.low))
    assert hi == pytest.approx(np.exp(want.high))
    assert lo < 1.02 < hi


def test_runs_that_agree_exactly_give_the_ratio_itself() -> None:
    base, cand = np.log(np.full(3, 2.0)), np.log(np.full(3, 2.1))
    assert welch_interval(base, cand, 0.95) == pytest.approx((1.05, 1.05))
