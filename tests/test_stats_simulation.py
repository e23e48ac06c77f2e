"""Statistical behaviour on simulated samples whose truth is known (issue 5's floors).

Each comparison goes through the real path: run records written by the record writer, read
back, compared. The floors: on 1,000 unchanged cases (run spread 0.5%, within-run CV 1%,
6 runs per side) at most 1 is flagged regressed; with +3% on 100 of them at least 95 are.
Several seeds, because a rule that passes one seed by luck is not a rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bot.compare.comparison import compare_runs
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record

pytestmark = pytest.mark.slow


def _cases(n: int) -> list[Case]:
    return [
        Case.build("gemm", {"gemm_dtype": "bfloat16", "m": i + 1, "n": 512, "k": 512})
        for i in range(n)
    ]


def _simulate(
    tmp_path: Path,
    seed: int,
    n_same: int,
    n_shifted: int,
    shift: float,
    runs_for: Callable[[np.random.Generator, float], list[list[float]]] | None = None,
) -> tuple[dict[str, str], set[str]]:
    rng = np.random.default_rng(seed)
    cases = _cases(n_same + n_shifted)
    shifted = {c.key for c in cases[n_same:]}
    true = {c.key: float(rng.uniform(0.02, 5.0)) for c in cases}

    def runs(c: Case, factor: float) -> list[list[float]]:
        ms = true[c.key] * factor
        if runs_for is not None:
            return runs_for(rng, ms)
        return simulated_runs(rng, ms, runs=6, samples=8, run_spread=0.005, within_cv=0.01)

    base = write_record(tmp_path / "base", cases, lambda c: runs(c, 1.0))
    cand = write_record(
        tmp_path / "cand", cases, lambda c: runs(c, shift if c.key in shifted else 1.0)
    )
    result = compare_runs(read_record(base), read_record(cand))
    table = result.cases
    return dict(zip(table["key"], table["verdict"], strict=True)), shifted


def _false(verdicts: dict[str, str], shifted: set[str], verdict: str) -> int:
    return sum(1 for k, v in verdicts.items() if k not in shifted and v == verdict)


@pytest.mark.parametrize("seed", [7, 8, 9, 10, 11])
def test_1000_unchanged_and_100_shifted_cases(tmp_path: Path, seed: int) -> None:
    verdicts, shifted = _simulate(tmp_path, seed, 1000, 100, 1.03)
    detected = sum(1 for k in shifted if verdicts[k] == "regressed")
    assert _false(verdicts, shifted, "regressed") <= 1
    assert _false(verdicts, shifted, "improved") <= 1
    assert detected >= 95
    # Unchanged cases are mostly called the same, not left inconclusive.
    assert _false(verdicts, shifted, "same") >= 980


def test_improvements_are_detected_symmetrically(tmp_path: Path) -> None:
    verdicts, shifted = _simulate(tmp_path, 3, 1000, 100, 1 / 1.03)
    assert sum(1 for k in shifted if verdicts[k] == "improved") >= 95
    assert _false(verdicts, shifted, "improved") <= 1
    assert _false(verdicts, shifted, "regressed") <= 1


def test_many_true_changes_do_not_drag_unchanged_cases_along(tmp_path: Path) -> None:
    """BH relaxes as discoveries grow; the min-effect interval rule must hold the line."""
    verdicts, shifted = _simulate(tmp_path, 5, 600, 600, 1.03)
    assert _false(verdicts, shifted, "regressed") <= 1
    assert _false(verdicts, shifted, "improved") <= 1
    assert sum(1 for k in shifted if verdicts[k] == "regressed") >= 570


def test_outlier_runs_raise_no_false_alarms(tmp_path: Path) -> None:
    """One run in ten lands 4% slow (a neighbour, a clock dip): the run-level test and the
    noise threshold, on the runs' values, absorb it instead of calling a regression."""

    def runs(rng: np.random.Generator, ms: float) -> list[list[float]]:
        out = simulated_runs(rng, ms, runs=6, samples=8, run_spread=0.005, within_cv=0.01)
        return [[v * 1.04 for v in r] if rng.random() < 0.1 else r for r in out]

    verdicts, shifted = _simulate(tmp_path, 13, 1000, 0, 1.0, runs_for=runs)
    assert _false(verdicts, shifted, "regressed") <= 1
    assert _false(verdicts, shifted, "improved") <= 1
