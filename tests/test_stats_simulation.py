"""Statistical behaviour on simulated samples whose truth is known (issue 5's floors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.compare.comparison import compare_records
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record

pytestmark = pytest.mark.slow


def _cases(n: int) -> list[Case]:
    return [
        Case.build("gemm", {"gemm_dtype": "bfloat16", "m": i + 1, "n": 512, "k": 512})
        for i in range(n)
    ]


def test_1000_unchanged_and_100_shifted_cases(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    cases = _cases(1100)
    shifted = {c.key for c in cases[1000:]}
    true = {c.key: float(rng.uniform(0.02, 5.0)) for c in cases}

    def runs(c: Case, factor: float) -> list[list[float]]:
        return simulated_runs(
            rng, true[c.key] * factor, runs=6, samples=8, run_spread=0.005, within_cv=0.01
        )

    base = write_record(tmp_path / "base", cases, lambda c: runs(c, 1.0))
    cand = write_record(
        tmp_path / "cand", cases, lambda c: runs(c, 1.03 if c.key in shifted else 1.0)
    )
    result = compare_records(read_record(base), read_record(cand))
    verdicts = {c["key"]: c["verdict"] for c in result["latency"]["cases"]}
    false_alarms = sum(1 for k, v in verdicts.items() if k not in shifted and v == "regressed")
    detected = sum(1 for k in shifted if verdicts[k] == "regressed")
    assert false_alarms <= 1
    assert detected >= 95
