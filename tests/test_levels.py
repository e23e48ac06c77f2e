"""Placement levels (collector/levels.py): found, matched, and compared level by level.

The simulated cases copy what the H200 records show of fp8 GEMMs of 50-400 us: each buffer
set sits on one of two levels 18% apart (101-104 or 117-124 us), the share on each level
varies run to run as sets land, and the runs agree to about 0.3% on each level.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.compare.comparison import compare_runs
from bot.compare.stats import Settings
from bot.render.comment import render_comment
from collector import levels
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import write_record
from tests.schema_check import assert_valid_comparison

GAP, MIN_SHARE, ALPHA, TRIM = 0.03, 0.05, 0.001, 0.1
LEVELS = (1.0, 1.18)


def two_level_runs(
    rng: np.random.Generator, ms: float, runs: int = 16, sets: int = 32, slow_share: float = 0.45
) -> list[np.ndarray]:
    """Runs whose samples sit on LEVELS, each set drawn alone (so the run's mix varies)."""
    out = []
    for _ in range(runs):
        run_level = ms * float(np.exp(rng.normal(0.0, 0.003)))
        on = np.asarray(LEVELS)[(rng.random(sets) < slow_share).astype(int)]
        out.append(run_level * on * np.exp(rng.normal(0.0, 0.008, size=sets)))
    return out


def one_level_runs(rng: np.random.Generator, ms: float, runs: int = 8) -> list[np.ndarray]:
    return [
        ms * float(np.exp(rng.normal(0.0, 0.004))) * np.exp(rng.normal(0.0, 0.01, size=8))
        for _ in range(runs)
    ]


def _match(base: list[np.ndarray], cand: list[np.ndarray]) -> levels.Matched | None:
    return levels.match(base, cand, GAP, MIN_SHARE, ALPHA, TRIM)


def test_two_levels_are_found_and_a_stray_sample_joins_its_neighbour() -> None:
    rng = np.random.default_rng(1)
    runs = two_level_runs(rng, 0.1)
    runs[0][0] = 0.14  # one sample 20% above the slow level: not a level of its own
    found = levels.find_levels(runs, GAP, MIN_SHARE)
    assert found.centre.size == 2
    assert np.exp(found.centre[1] - found.centre[0]) == pytest.approx(1.18, rel=0.01)
    assert found.counts.sum() == sum(r.size for r in runs)
    assert found.label[0][0] == 1


def test_one_level_is_no_match() -> None:
    rng = np.random.default_rng(2)
    assert _match(one_level_runs(rng, 0.05), one_level_runs(rng, 0.05)) is None


def test_matched_run_values_lose_the_spread_of_the_shares_and_keep_the_change() -> None:
    rng = np.random.default_rng(3)
    base, cand = two_level_runs(rng, 0.1), two_level_runs(rng, 0.102)
    found = _match(base, cand)
    assert found is not None and found.levels == 2
    plain = [np.array([r.mean() for r in side]) for side in (base, cand)]
    plain_sd = max(float(np.std(np.log(v), ddof=1)) for v in plain)
    matched_sd = max(float(np.std(np.log(v), ddof=1)) for v in (found.base, found.cand))
    assert plain_sd > 0.015  # the shares' luck: the runs' means 1.5-2% apart
    assert matched_sd < 0.006  # the runs' own spread left
    assert found.ratio == pytest.approx(1.02, abs=0.004)


def test_every_level_moved_far_is_still_matched_and_sized() -> None:
    rng = np.random.default_rng(4)
    found = _match(two_level_runs(rng, 0.1), two_level_runs(rng, 0.115))
    assert found is not None
    assert found.ratio == pytest.approx(1.15, abs=0.01)


def test_shares_that_moved_or_a_level_that_went_away_fall_back() -> None:
    rng = np.random.default_rng(5)
    base = two_level_runs(rng, 0.1, slow_share=0.2)
    assert _match(base, two_level_runs(rng, 0.1, slow_share=0.6)) is None
    assert _match(base, one_level_runs(rng, 0.1, runs=16)) is None


def test_runs_that_each_sit_on_their_own_level_keep_their_spread() -> None:
    """Runs 25% apart with 1% inside each (a noisy spell), or a side whose later runs
    stepped 4% down: the pooled samples split at the gaps, but no level mixes with another
    inside a run, so the runs are compared plainly and their spread stays visible."""
    rng = np.random.default_rng(7)
    spread = [0.1 * np.exp(rng.normal(0, 0.25)) * np.exp(rng.normal(0, 0.01, 8)) for _ in range(4)]
    assert levels.find_levels(spread, GAP, MIN_SHARE).centre.size >= 2
    assert _match(spread, [r * 1.01 for r in spread]) is None
    stepped = [0.1 * (0.96 if i >= 3 else 1.0) * np.exp(rng.normal(0, 0.003, 8)) for i in range(10)]
    assert _match(stepped, stepped) is None


def test_off_when_the_gap_is_zero() -> None:
    rng = np.random.default_rng(6)
    runs = two_level_runs(rng, 0.1)
    assert levels.match(runs, runs, 0.0, MIN_SHARE, ALPHA, TRIM) is None


def _cases(n: int) -> list[Case]:
    return [
        Case.build("gemm", {"gemm_dtype": "fp8", "m": i + 1, "n": 4096, "k": 4096})
        for i in range(n)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22])
def test_a_two_percent_change_on_two_level_cases_is_found_and_an_aa_is_quiet(
    tmp_path: Path, seed: int
) -> None:
    """Through the real path (records written, read, compared, commented): 60 unchanged and
    40 slowed by 2% two-level cases. Level by level, at least 38 of the 40 are found and none
    of the 60 is flagged, and comparison.json and the comment say which cases were compared
    so; with the levels off (`level_gap` 0), the shares' luck hides most of the 40."""
    rng = np.random.default_rng(seed)
    cases = _cases(100)
    slowed = {c.key for c in cases[60:]}
    true = {c.key: float(rng.uniform(0.05, 0.4)) for c in cases}

    def runs(c: Case, factor: float) -> list[list[float]]:
        f = factor if c.key in slowed else 1.0
        return [list(r) for r in two_level_runs(rng, true[c.key] * f)]

    base = write_record(tmp_path / "a", cases, lambda c: runs(c, 1.0))
    cand = write_record(tmp_path / "c", cases, lambda c: runs(c, 1.02))
    found = {}
    for name, settings in (("levels", Settings()), ("plain", Settings(level_gap=0.0))):
        result = compare_runs(read_record(base), read_record(cand), settings)
        table = result.cases
        verdict = dict(zip(table["key"], table["verdict"], strict=True))
        found[name] = sum(verdict[k] == "regressed" for k in slowed)
        false = [
            k for k, v in verdict.items() if k not in slowed and v in ("regressed", "improved")
        ]
        assert not false, name
        matched = int((table["levels"] == 2).sum())
        assert result.data["latency"]["summary"]["level_matched"] == matched
        if name == "levels":  # the share test falls back on about 1 in 1,000 by chance
            assert matched >= 98
            assert_valid_comparison(result.data)
            rows = result.data["latency"]["cases"]
            assert sum(r.get("levels") == 2 for r in rows) >= len(rows) - 2
            assert f"{matched} cases sat on placement levels" in render_comment(result.data)
        else:
            assert matched == 0
    assert found["levels"] >= 38
    assert found["plain"] <= 20
