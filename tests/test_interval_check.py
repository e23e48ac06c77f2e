"""`bench/gpu/interval_check.py` compares the shipped comparison with its former rule.

The shipped comparison takes each run's trimmed mean and (two runs a side or more) Welch's
interval on them; the former rule, per-run medians and the two-level bootstrap, is the same
comparison with those two pieces swapped back in (two more rules swap one each). Its figures
on the H200 records are in docs/statistics.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.gpu.interval_check import RULES, rule, rule_verdicts
from bot.compare import stats
from collector import levels
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import gemm_case, multilevel_runs, placement_levels, write_record


def test_the_former_rule_is_run_medians_and_the_bootstrap_only_inside() -> None:
    runs = [np.array([1.0, 1.0, 1.0, 1.3]), np.array([2.0, 2.0, 2.0, 2.6])]
    shipped = stats.run_values
    with rule("former"):
        assert list(stats.run_values(runs, 0.1)) == [1.0, 2.0]
        rng = np.random.default_rng(3)
        pairs = [(runs, [r * 1.1 for r in runs])]
        want = stats.bootstrap_intervals(pairs, stats.Settings(), np.random.default_rng(3))
        assert stats.ratio_intervals(pairs, stats.Settings(), rng) == want
    assert stats.run_values is shipped
    assert list(stats.run_values(runs, 0.0)) == [1.075, 2.15]


def test_cases_on_several_placement_levels_are_found_by_the_shipped_rule_only(
    tmp_path: Path,
) -> None:
    """Samples from 8 buffer sets on three levels, 4 runs a side that agree to 0.3%, +2.4%
    on 30 of 60 cases: the shipped comparison finds them all and flags nothing else; the
    former rule's interval, widened by the sets' spread inside each run, finds few."""
    rng = np.random.default_rng(24)
    cases: list[Case] = [gemm_case(m) for m in range(1, 61)]
    slowed = {c.key for c in cases[30:]}
    levels = {c.key: placement_levels(rng) for c in cases}

    def side(factor: float) -> Path:
        def runs(c: Case) -> list[list[float]]:
            f = factor if c.key in slowed else 1.0
            return multilevel_runs(rng, 0.02 * f, levels[c.key])

        return write_record(tmp_path / f"x{factor}", cases, runs)

    base, cand = read_record(side(1.0)), read_record(side(1.024))
    out = rule_verdicts(base, cand)
    hit = np.array([row["key"] in slowed for row in out["rows"]])
    assert hit.sum() == 30
    assert (out["shipped"][hit] == stats.REGRESSED).all()
    assert (out["former"][hit] == stats.REGRESSED).sum() <= 10
    for name in RULES:
        assert not np.isin(out[name][~hit], (stats.REGRESSED, stats.IMPROVED)).any()


def test_without_levels_is_the_shipped_comparison_on_plain_run_values() -> None:
    rng = np.random.default_rng(5)
    runs = [np.exp(rng.normal(0, 0.005, 32)) * np.where(rng.random(32) < 0.5, 1.0, 1.2)]
    runs *= 4
    args = (runs, runs, 0.03, 0.05, 0.001, 0.1)
    assert levels.match(*args) is not None
    with rule("without_levels"):
        assert levels.match(*args) is None
    assert levels.match(*args) is not None
