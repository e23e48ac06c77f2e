"""Headlines for comparisons that cannot be read as usual: a run against itself, no case in
common, different GPUs or drivers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bot.compare.comparison import compare_runs
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record


def _run(root: Path, name: str, ms: list[int], **meta: object) -> Path:
    rng = np.random.default_rng(len(name))
    cases = [gemm_case(m) for m in ms]
    return write_record(
        root / name, cases, lambda c: simulated_runs(rng, 0.1), meta_extra={"run_id": name, **meta}
    )


def test_a_run_compared_with_itself_says_so(tmp_path: Path) -> None:
    run = read_record(_run(tmp_path, "one", [1, 2]))
    verdict = compare_runs(run, run).data["verdict"]
    assert verdict["headline"].startswith("the candidate is the baseline run itself")
    assert verdict["level"] == "yellow"


def test_no_case_in_common_says_so(tmp_path: Path) -> None:
    base = read_record(_run(tmp_path, "base", [1, 2]))
    cand = read_record(_run(tmp_path, "cand", [4, 8, 16]))
    verdict = compare_runs(base, cand).data["verdict"]
    assert verdict["headline"].startswith("no case in common with the baseline")
    assert "0 unchanged" not in verdict["headline"] and verdict["level"] != "green"
    assert any("3 only in the candidate, 2 only in the baseline" in r for r in verdict["reasons"])


def test_different_drivers_are_in_the_headline(tmp_path: Path) -> None:
    device = {"name": "Test GPU", "kind": "cuda", "uuid": "GPU-test"}
    base = read_record(_run(tmp_path, "base", [1], device={**device, "driver": "570.1"}))
    cand = read_record(_run(tmp_path, "cand", [1], device={**device, "driver": "580.2"}))
    verdict = compare_runs(base, cand).data["verdict"]
    assert verdict["headline"].endswith("different drivers)")
    assert verdict["level"] == "yellow"
    assert any("drivers differ (baseline 570.1, candidate 580.2)" in r for r in verdict["reasons"])
