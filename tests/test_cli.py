from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.factories import gemm_case, simulated_runs, write_record
from tests.schema_check import assert_valid_comparison

runner = CliRunner()
COMMANDS = [
    "bundle",
    "collect",
    "compare",
    "render",
    "demo",
    "store",
    "campaign",
    "plan",
    "publish",
    "image",
    "import-aic",
    "merge",
    "conclude",
    "result",
    "history",
    "site",
]


def _leaves(group: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    sub: dict[str, Any] | None = getattr(group, "commands", None)
    if not sub:
        return [(path, group)]
    out: list[tuple[list[str], Any]] = []
    for name, command in sub.items():
        out += _leaves(command, [*path, name])
    return out


def test_help_explains_every_option() -> None:
    import typer

    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output
    leaves = _leaves(typer.main.get_command(app), [])
    assert {p[0] for p, _ in leaves} >= set(COMMANDS)
    for path, command in leaves:
        help_text: str | None = getattr(command, "help", None)
        assert help_text and len(help_text) > 20, path
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output
        for param in getattr(command, "params", []):
            text = getattr(param, "help", None)
            assert text and len(text) > 8, f"{path} {param.name} has no help"


def _runs(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    cases = [gemm_case(m) for m in (1, 2, 4)]
    base = write_record(tmp_path / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp_path / "cand", cases, lambda c: simulated_runs(rng, 1.2 if c.params["m"] == 4 else 1.0)
    )
    return base, cand


def test_compare_and_render(tmp_path: Path, rng: np.random.Generator) -> None:
    base, cand = _runs(tmp_path, rng)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("red: 1 regressed")
    data = assert_valid_comparison(tmp_path / "cmp")
    assert data["schema_version"] == 2
    assert data["baseline"]["kind"] == "explicit-run"
    assert (tmp_path / "cmp" / "cases.parquet").is_file()
    result = runner.invoke(
        app, ["render", str(tmp_path / "cmp"), "--out", str(tmp_path / "c.md"), "--head-sha", "f00"]
    )
    assert result.exit_code == 0, result.output
    body = (tmp_path / "c.md").read_text()
    assert '"head_sha": "f00"' in body.splitlines()[0]


def _one_line_error(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert needle in lines[0]
    assert "Traceback" not in result.output


def test_bad_inputs_end_in_one_line_errors(tmp_path: Path, rng: np.random.Generator) -> None:
    base, cand = _runs(tmp_path, rng)
    out = str(tmp_path / "cmp")
    _one_line_error(["compare", str(tmp_path / "missing"), str(cand), "--out", out], "missing")
    (cand / "gemm_perf.parquet").write_bytes(b"tampered")
    _one_line_error(
        ["compare", str(base), str(cand), "--out", out], "gemm_perf.parquet: checksum mismatch"
    )
    (base / "failures.json").unlink()
    _one_line_error(
        ["compare", str(base), str(cand), "--out", out],
        "failures.json: listed in run.json but missing",
    )
    _one_line_error(["collect", "--ops", "conv", "--out", str(tmp_path / "r")], "unknown op 'conv'")
    _one_line_error(
        ["collect", "--backend", "nope", "--out", str(tmp_path / "r")], "unknown backend 'nope'"
    )
    _one_line_error(
        ["collect", "--device", "tpu", "--out", str(tmp_path / "r2")], "unknown device 'tpu'"
    )
    _one_line_error(
        ["collect", "--cases", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "r3")],
        "none.yaml",
    )
    _one_line_error(
        ["render", str(tmp_path / "nocmp"), "--out", str(tmp_path / "x.md")], "comparison not found"
    )
    _one_line_error(
        ["collect", "--case-filter", "m128", "--out", str(tmp_path / "r4")], "--case-filter"
    )


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    """The acceptance of the embedded default: the canary is caught, nothing else is flagged."""
    from bot.demo import DEMO_FAIL, DEMO_SLOW
    from collector.caseplan import CaseSelector, build_plan

    out = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    headline, comment_line, report_line = result.output.strip().splitlines()[-3:]
    comment_path = Path(comment_line.removeprefix("comment: "))
    assert comment_path == out / "comment.md"
    assert Path(report_line.removeprefix("report:").strip()) == out / "report.html"
    assert "<html" in (out / "report.html").read_text()
    body = comment_path.read_text()
    assert headline in body.splitlines()[1]
    assert json.loads((out / "comment.json").read_text())["level"] == "red"  # publishable
    data = assert_valid_comparison(out / "comparison")
    slow = CaseSelector.parse(DEMO_SLOW)
    fail = CaseSelector.parse(DEMO_FAIL)
    plan = build_plan(("gemm",), case_set="demo")
    slowed = {c.key for c in plan.cases if slow.matches(c)}
    failing = {c.key for c in plan.cases if fail.matches(c)}
    verdicts = {c["key"]: c for c in data["latency"]["cases"]}
    # The canary shows on every slowed case, and nothing else is called slower. How many
    # slowed cases clear the verdict rule depends on this machine's CPU noise (a shared VM's
    # run medians can spread 2x); the factor's exactness is tests/test_canary_exact.py's job.
    assert slowed and all(verdicts[k]["verdict"] in ("regressed", "inconclusive") for k in slowed)
    assert all(verdicts[k]["hi"] > 1.2 for k in slowed)
    assert sorted(verdicts[k]["ratio"] for k in slowed)[len(slowed) // 2] > 1.2
    assert not [k for k, c in verdicts.items() if k not in slowed and c["verdict"] == "regressed"]
    [group] = data["failure_groups"]["new"]
    assert group["sample_case"] in failing
    regressed = sum(verdicts[k]["verdict"] == "regressed" for k in slowed)
    assert body.splitlines()[1].startswith(
        f"## ❌ collectbot: {regressed} regressed, 1 new failure group"
        if regressed
        else "## ❌ collectbot: 1 new failure group"
    )
    assert "95% CI" in body
