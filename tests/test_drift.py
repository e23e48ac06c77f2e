"""Drift within a collection (bot/compare/drift.py): a side whose runs trend is marked, and
its verdict needs the change to clear the drift; steady cases are untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.compare.comparison import Baseline, compare_runs
from bot.compare.drift import MIN_RUNS, STEP_MIN_SEGMENT, moves, steps, trends
from bot.compare.stats import Settings
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record

CASES = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32, 64, 128)]
DRIFTING = CASES[0].key  # its candidate's runs fall 10% from the first run to the last
SLOWED = CASES[1].key  # +30% on the candidate, and its candidate drifts 4%
RUNS = 10


def test_a_monotone_step_is_found_and_sized() -> None:
    rng = np.random.default_rng(1)
    later_faster = np.linspace(1.0, 0.9, RUNS) * np.exp(rng.normal(0, 0.002, RUNS))
    steady = np.exp(rng.normal(0, 0.002, RUNS))
    found = trends([later_faster, steady])
    assert found.p[0] < 0.001 and found.drift[0] == pytest.approx(-0.10, abs=0.01)
    assert found.p[1] > 0.01 and abs(found.drift[1]) < 0.01


def test_too_few_runs_are_not_tested() -> None:
    found = trends([np.array([1.0, 0.9, 0.8, 0.7]), np.linspace(1.0, 0.5, MIN_RUNS)])
    assert np.isnan(found.p[0]) and np.isnan(found.drift[0])
    assert found.p[1] < 0.05


def test_pure_noise_rarely_trends() -> None:
    rng = np.random.default_rng(7)
    found = trends([np.exp(rng.normal(0, 0.01, RUNS)) for _ in range(2000)])
    assert np.mean(found.p < 0.01) < 0.02  # the test's level, roughly


def test_a_step_after_the_first_rounds_is_found_where_the_trend_test_misses_it() -> None:
    # The H200's large-weight bf16 GEMMs: three runs at one level, then ten 3% lower.
    rng = np.random.default_rng(5)
    step = np.r_[np.full(3, 1.0), np.full(10, 0.97)] * np.exp(rng.normal(0, 0.002, 13))
    # Ranks reach p 0.009 at best here, which Benjamini-Hochberg over a collection's
    # hundreds of sides does not keep; the t between the two levels is beyond doubt.
    assert trends([step]).p[0] > 0.005
    found = steps([step])
    assert found.p[0] < 1e-8 and found.drift[0] == pytest.approx(-0.03, abs=0.005)
    both = moves([step])
    assert both.p[0] == pytest.approx(2 * found.p[0]) and both.drift[0] == found.drift[0]


def test_one_odd_run_is_no_step_and_short_sides_are_not_tested() -> None:
    rng = np.random.default_rng(9)
    odd = np.exp(rng.normal(0, 0.002, 12))
    odd[0] *= 1.10  # a single slow first run: the segment's spread holds it
    assert steps([odd]).p[0] > 0.01
    short = np.linspace(1.0, 0.9, 2 * STEP_MIN_SEGMENT - 1)
    assert np.isnan(steps([short]).p[0])


def test_pure_noise_rarely_moves() -> None:
    rng = np.random.default_rng(11)
    sides = [np.exp(rng.normal(0, 0.01, n)) for n in (6, 10, 16) for _ in range(700)]
    assert np.mean(moves(sides).p < 0.01) < 0.01


def _records(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)

    def base(case: object) -> list[list[float]]:
        return simulated_runs(rng, 0.1, runs=RUNS, run_spread=0.002, within_cv=0.003)

    def cand(case: object) -> list[list[float]]:
        runs = simulated_runs(rng, 0.1, runs=RUNS, run_spread=0.002, within_cv=0.003)
        key = getattr(case, "key", "")
        if key == DRIFTING:
            return [[s * (1.0 - 0.1 * r / (RUNS - 1)) for s in run] for r, run in enumerate(runs)]
        if key == SLOWED:
            return [
                [s * 1.3 * (1.0 - 0.04 * r / (RUNS - 1)) for s in run] for r, run in enumerate(runs)
            ]
        return runs

    return write_record(tmp_path / "base", CASES, base), write_record(
        tmp_path / "cand", CASES, cand
    )


def test_a_drifting_side_is_marked_and_not_called_improved(tmp_path: Path) -> None:
    base, cand = _records(tmp_path)
    result = compare_runs(
        read_record(base), read_record(cand), Settings(), Baseline(kind="explicit-run")
    )
    latency = result.data["latency"]
    cases = {c["key"]: c for c in latency["cases"]}
    # A -5% average from a 10% slide is no improvement: the level depends on when it stopped.
    assert cases[DRIFTING]["drift"]["drifting"]
    assert cases[DRIFTING]["drift"]["cand"] == pytest.approx(-0.10, abs=0.02)
    assert cases[DRIFTING]["verdict"] == "inconclusive"
    # +30% clears the threshold plus a 4% drift: the regression stands, and is marked.
    assert cases[SLOWED]["drift"]["drifting"] and cases[SLOWED]["verdict"] == "regressed"
    table = result.cases
    steady = [i for i, k in enumerate(table["key"]) if k not in (DRIFTING, SLOWED)]
    assert len(steady) == len(CASES) - 2
    assert not table["drifting"][steady].any()
    assert set(table["verdict"][steady]) == {"same"}
    listed = {(c["key"], c["side"]) for c in latency["drift"]["cases"]}
    assert listed == {(DRIFTING, "cand"), (SLOWED, "cand")}
    assert latency["drift"]["cases_drifting"] == 2


def test_without_the_drift_rule_the_slide_would_read_as_an_improvement(tmp_path: Path) -> None:
    """The control: with the rule switched off the same records give a false verdict."""
    base, cand = _records(tmp_path)
    off = Settings(drift_alpha=0.0)
    result = compare_runs(read_record(base), read_record(cand), off, Baseline(kind="explicit-run"))
    cases = {c["key"]: c for c in result.data["latency"]["cases"]}
    assert cases[DRIFTING]["verdict"] == "improved"


def test_the_comment_lists_the_drifting_cases(tmp_path: Path) -> None:
    from bot.render.comment import RenderOptions, render_comment

    base, cand = _records(tmp_path)
    result = compare_runs(
        read_record(base), read_record(cand), Settings(), Baseline(kind="explicit-run")
    )
    body = render_comment(result.data, RenderOptions())
    section = body.split("### Drift within a collection", 1)[1].split("\n### ", 1)[0]
    assert "2 cases moved with run order" in section
    rows = [line for line in section.splitlines() if line.startswith("| `gemm")]
    assert len(rows) == 2 and "| candidate | -10.1% | 10 | inconclusive |" in rows[0]
