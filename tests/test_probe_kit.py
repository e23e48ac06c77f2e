"""The noise probes' shared helpers and the draws projection."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.gpu.draws_projection import collect, project
from bench.gpu.noise_probe7 import TAIL
from bench.gpu.noise_probe10 import CASES
from bench.gpu.probe_kit import cases_by_key, run_spread, save, summarise
from collector.timing import Protocol


def test_run_spread_is_relative_to_the_median_of_the_runs() -> None:
    spread = run_spread([10.0, 10.5, 11.0])
    assert spread["median_us"] == 10.5
    assert spread["spread_pct"] == 10.0  # 11 / 10
    assert spread["run_sd_pct"] == pytest.approx(0.5 / 10.5 * 100, abs=0.01)


def test_summarise_takes_each_runs_median_before_the_spread() -> None:
    summary = summarise({"a": [[10.0, 10.0, 99.0], [11.0, 11.0, 0.0]], "b": [[5.0], [5.0]]})
    assert summary["a"]["run_medians_us"] == [10.0, 11.0]  # outlier samples do not count
    assert summary["a"]["spread_pct"] == 10.0
    assert summary["b"]["run_sd_pct"] == 0.0


def test_every_probed_case_is_still_in_the_default_plan() -> None:
    # A probe silently skips a key the plan lost; the records name these cases.
    assert [c.key for c in cases_by_key(CASES)] == CASES
    assert [c.key for c in cases_by_key(TAIL, ("gemm", "context_attention"))] == TAIL
    assert cases_by_key(["gemm:gemm_dtype=bfloat16,m=3,n=3,k=3"]) == []


def test_save_rewrites_the_record_and_skips_without_a_path(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    save([{"summary": {"case": "a"}}], out)
    save([{"summary": {"case": "a"}}, {"summary": {"case": "b"}}], out)
    assert [r["summary"]["case"] for r in json.loads(out.read_text())] == ["a", "b"]
    save([], None)  # no --out: nothing written, nothing raised
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.json"]


def test_the_draws_projection_replays_the_collectors_stopping_rule() -> None:
    rng = np.random.default_rng(0)
    protocol = Protocol()
    # One state: every run agrees, so a case stops at min_runs at exactly that level.
    assert collect(np.array([2.0]), 1, protocol, rng) == (2.0, protocol.min_runs)
    # Two states 10% apart, one draw per run: the first three runs agree with chance
    # 2 x 0.5^3 and the case stops (the trap of session 6); once they disagree, no 1%
    # interval is reachable and the case takes every run.
    levels = np.array([1.0, 1.1])
    runs = [collect(levels, 1, protocol, rng)[1] for _ in range(800)]
    assert set(runs) == {protocol.min_runs, protocol.runs}
    assert 0.19 < runs.count(protocol.min_runs) / len(runs) < 0.31
    flat = project({"a": [1.0, 1.0]}, 4, 3, protocol, seed=0)
    assert flat["p99_pct_max"] == 0.0 and flat["runs_per_case"] == protocol.min_runs
    one = project({"a": [1.0, 1.1]}, 1, 30, protocol, seed=0)
    many = project({"a": [1.0, 1.1]}, 16, 30, protocol, seed=0)
    assert many["p99_pct_mean"] < one["p99_pct_mean"]
