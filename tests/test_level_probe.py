"""bench/gpu/level_probe.py's reading: levels that follow placement against the process."""

from __future__ import annotations

import pytest

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


def test_each_fresh_process_probes_the_cases_asked_for() -> None:
    args = lp.parser().parse_args(
        ["--out", "o.json", "--case", "fp8 769x65536x12288", "--case", "bfloat16 1x2x3"]
    )
    command = lp.child_command(args)
    assert command[command.index("--child") - 1] == "bench.gpu.level_probe"
    assert [command[i + 1] for i, a in enumerate(command) if a == "--case"] == [
        "fp8 769x65536x12288",
        "bfloat16 1x2x3",
    ]
    # Without --case, the children take the built-in set.
    assert "--case" not in lp.child_command(lp.parser().parse_args(["--out", "o.json"]))


def test_a_malformed_case_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert lp.main(["--out", "o.json", "--case", "fp8 769x65536"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --case 'fp8 769x65536'") and err.count("\n") == 1
