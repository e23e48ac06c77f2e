"""Confirm before comment: a paired re-measurement confirms, overturns or resolves verdicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bot.compare import stats
from bot.compare.comparison import compare_runs
from bot.compare.latency import cases_to_confirm
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record
from tests.schema_check import assert_valid_comparison

REAL = gemm_case(16)  # truly 10% slower
FLUKE = gemm_case(32)  # looked 6% slower in the first pass only (a transient)
NOISY = gemm_case(64)  # unchanged, but too few and too noisy runs to say in the first pass
STEADY = [gemm_case(m) for m in (128, 256, 512, 1024)]
CASES = [REAL, FLUKE, NOISY, *STEADY]


def _runs(rng: np.random.Generator, case: Case, factor: float, runs: int = 6) -> list[list[float]]:
    spread = 0.005
    if case is NOISY and runs == 6:
        runs, spread = 3, 0.25  # the first pass caught it in a noisy spell, with few runs
    return simulated_runs(rng, factor * (1 + case.params["m"] / 100), runs=runs, run_spread=spread)


def _records(tmp_path: Path, rng: np.random.Generator) -> dict[str, Path]:
    first = {REAL.key: 1.10, FLUKE.key: 1.06}
    confirm = {REAL.key: 1.10}
    out = {}
    out["base"] = write_record(tmp_path / "base", CASES, lambda c: _runs(rng, c, 1.0))
    out["cand"] = write_record(
        tmp_path / "cand", CASES, lambda c: _runs(rng, c, first.get(c.key, 1.0))
    )
    flagged = [REAL, FLUKE, NOISY]
    out["cbase"] = write_record(tmp_path / "cbase", flagged, lambda c: _runs(rng, c, 1.0, 12))
    out["ccand"] = write_record(
        tmp_path / "ccand", flagged, lambda c: _runs(rng, c, confirm.get(c.key, 1.0), 12)
    )
    return out


def test_first_pass_flags_and_confirmation_rejudges(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    paths = _records(tmp_path, rng)
    base, cand = read_record(paths["base"]), read_record(paths["cand"])
    first = compare_runs(base, cand)
    flagged = set(cases_to_confirm(first.cases))
    assert flagged == {REAL.key, FLUKE.key, NOISY.key}
    assert not flagged & {c.key for c in STEADY}
    confirm = (read_record(paths["cbase"]), read_record(paths["ccand"]))
    final = compare_runs(base, cand, confirm=confirm)
    assert_valid_comparison(final.data)
    by_key = {c["key"]: c for c in final.data["latency"]["cases"]}
    real = by_key[REAL.key]
    assert (real["verdict"], real["first_verdict"], real["confirmed"]) == (
        "regressed",
        "regressed",
        True,
    )
    assert real["base_runs"] == 18  # first pass and re-measurement pooled
    assert real["confirmation"]["base_runs"] == 12
    assert real["confirmation"]["lo"] > 1.05
    fluke = by_key[FLUKE.key]
    assert fluke["first_verdict"] == "regressed"
    assert fluke["verdict"] != "regressed"
    assert fluke["confirmed"] is False
    summary = final.data["confirmation"]
    assert summary["performed"] is True
    assert summary["remeasured"] == len(flagged)
    assert summary["confirmed_by_verdict"]["regressed"] == 1
    assert summary["overturned"] == 1
    noisy = by_key[NOISY.key]
    assert noisy["first_verdict"] == "inconclusive"
    assert noisy["verdict"] in ("same", "inconclusive")  # usually resolved: 8 of 10 seeds
    assert summary["resolved"] == (noisy["verdict"] == "same")
    assert summary["resolved"] + summary["still_inconclusive"] == 1
    assert "1 confirmed by a paired re-measurement" in " ".join(final.data["verdict"]["reasons"])
    # Cases not flagged keep their first-pass statistics.
    steady = final.cases["key"] == STEADY[0].key
    assert not final.cases["remeasured"][steady].any()


def test_a_case_too_noisy_to_judge_is_not_called_the_same() -> None:
    # A centred estimate with a 25% noise threshold says nothing about a 5% change.
    assert stats.verdict(1.0, 0.8, 1.25, 0.9, threshold=0.25, alpha=0.05) == stats.INCONCLUSIVE
    assert stats.verdict(1.0, 0.99, 1.01, 0.9, threshold=0.02, alpha=0.05) == stats.SAME
