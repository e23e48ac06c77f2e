"""bench/gpu/phase_probe.py on the CPU: its phases, its readings and its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gpu import phase_probe


def test_the_probe_times_every_phase_and_reports_each_against_idle(tmp_path: Path) -> None:
    out = tmp_path / "probe.jsonl"
    args = ["--device", "cpu", "--scale", "64", "--replays", "3", "--out", str(out)]
    timing = ["--idle-s", "0.2", "--load-s", "0.4", "--cool-s", "0.2", "--every-s", "0.1"]
    assert phase_probe.main(args + timing) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["phase"] == "idle" and rows[-1]["phase"] == "cool"
    assert {r["phase"] for r in rows} == set(phase_probe.PHASES)
    assert all(len(r["ms"]) == len(phase_probe.PROBES) and min(r["ms"]) > 0 for r in rows)
    times = [r["t"] for r in rows]
    assert times == sorted(times)
    report = phase_probe.analyse(out)
    assert report["idle"]["vs_idle"] == [1.0, 1.0, 1.0]
    assert report["load"]["probes"] >= 2 and all(v > 0 for v in report["load"]["vs_idle"])


def test_a_missing_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert phase_probe.main(["--analyse", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "none.jsonl" in err
