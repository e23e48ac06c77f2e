"""bench/gpu/level_probe.py's reading: levels that follow placement against the process."""

from __future__ import annotations

from bench.gpu import level_probe as lp


def test_levels_that_follow_the_process_show_between_processes_not_within() -> None:
    # Process 1 keeps 27.7 us on every buffer set, process 2 keeps 32.9: a process level.
    by_process = [{"k": [0.0277, 0.0277, 0.0278]}, {"k": [0.0329, 0.0330, 0.0329]}]
    (row,) = lp.summary(by_process)
    assert row["process_medians_us"] == [27.7, 32.9]
    assert max(row["within_process_spread_pct"]) < 0.5
    assert row["between_process_spread_pct"] > 15


def test_levels_that_follow_placement_show_within_each_process() -> None:
    by_process = [{"k": [0.0277, 0.0329, 0.0329]}, {"k": [0.0329, 0.0277, 0.0329]}]
    (row,) = lp.summary(by_process)
    assert min(row["within_process_spread_pct"]) > 15
    assert row["between_process_spread_pct"] == 0.0
