"""The noise probes' shared helpers: the spread they report and the cases they look up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gpu.noise_probe7 import TAIL
from bench.gpu.noise_probe10 import CASES
from bench.gpu.probe_kit import cases_by_key, run_spread, save


def test_run_spread_is_relative_to_the_median_of_the_runs() -> None:
    spread = run_spread([10.0, 10.5, 11.0])
    assert spread["median_us"] == 10.5
    assert spread["spread_pct"] == 10.0  # 11 / 10
    assert spread["run_sd_pct"] == pytest.approx(0.5 / 10.5 * 100, abs=0.01)


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
