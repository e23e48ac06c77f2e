"""The CLI's error contract, through the console script's entry point (`bot.cli.main`): bad
input is one `error:` line on stderr naming the value and exit 2, never a traceback or a box."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bot.cli import app, main
from tests.factories import gemm_case, simulated_runs, write_record

BAD_CASES = """\
op: gemm
sets:
  default:
    - grid: {gemm_dtype: [bfloat16, flaot32], m: [16], n: [256], k: [256]}
"""


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two run records, a comparison, and paths that are the wrong kind of thing."""
    root = tmp_path_factory.mktemp("contract")
    rng = np.random.default_rng(7)
    cases = [gemm_case(m) for m in (1, 2)]
    write_record(root / "base", cases, lambda c: simulated_runs(rng, 1.0))
    write_record(root / "cand", cases, lambda c: simulated_runs(rng, 1.0))
    assert (
        main(["compare", str(root / "base"), str(root / "cand"), "--out", str(root / "cmp")]) == 0
    )
    (root / "a-file").write_text("x")
    (root / "a-dir").mkdir()
    (root / "notarun").mkdir()
    (root / "notarun" / "notes.json").write_text("{}")
    (root / "bad-cases.yaml").write_text(BAD_CASES)
    return root


# (arguments, with {root} for the fixture's directory; words the one line must contain)
ERRORS = [
    (["collect", "--out", "{root}/r", "--runs", "abc"], ["--runs", "integer"]),
    (["compare", "{root}/base", "{root}/cand", "--out", "{root}/c", "--alpha", "2"], ["--alpha"]),
    (["merge", "--out", "{root}/m"], ["Missing argument"]),
    (["collect", "--bogus"], ["--bogus"]),
    (["compare", "{root}/base", "{root}/cand", "--out", "{root}/a-file"], ["a-file", "exists"]),
    (["compare", "{root}/base", "{root}/cand", "--out", "/proc/collectbot-x"], ["/proc/"]),
    (["render", "{root}/cmp", "--out", "{root}/a-dir"], ["a-dir", "is a directory"]),
    (["render", "{root}/cmp", "--html", "{root}/a-dir"], ["a-dir", "is a directory"]),
    (["collect", "--smoke", "--out", "{root}/a-file/run"], ["a-file/run", "not a directory"]),
    (["demo", "--quiet", "--out", "{root}/a-file/demo"], ["a-file/demo", "not a directory"]),
    (
        ["collect", "--plan-only", "--cases", "{root}/bad-cases.yaml", "--out", "{root}/r"],
        ["bad-cases.yaml", "'flaot32'"],
    ),
    (
        ["collect", "--plan-only", "--case-filter", "gemm_dtype=flaot32", "--out", "{root}/r"],
        ["--case-filter", "'flaot32'"],
    ),
    (
        ["collect", "--plan-only", "--case-filter", "mm=128", "--out", "{root}/r"],
        ["--case-filter", "unknown field 'mm'"],
    ),
    (["merge", "{root}/base", "{root}/notarun", "--out", "{root}/m"], ["notarun", "not a run"]),
    (["merge", "{root}/base", "{root}/nowhere", "--out", "{root}/m"], ["nowhere", "not a run"]),
]


@pytest.mark.parametrize(("args", "words"), ERRORS, ids=lambda v: " ".join(v)[:60])
def test_bad_input_is_one_error_line_and_exit_2(
    where: Path, args: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if "/proc/" in " ".join(args) and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    code = main([a.replace("{root}", str(where)) for a in args])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in err and "╭" not in err


def test_help_version_and_exit_codes_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("collectbot ")
    assert main(["compare", "--help"]) == 0
    assert "Usage: collectbot compare" in capsys.readouterr().out
    assert main([]) == 2  # no command: the help, as before
    shown = capsys.readouterr()
    assert "Usage: collectbot" in shown.out + shown.err


def _leaves(command: object, path: list[str]) -> list[list[str]]:
    sub = getattr(command, "commands", None)
    if not sub:
        return [path]
    return [leaf for name, c in sub.items() for leaf in _leaves(c, [*path, name])]


def test_help_reads_naturally(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    for path in _leaves(typer.main.get_command(app), []):
        assert main([*path, "--help"]) == 0, path
        text = capsys.readouterr().out
        for raw in ("%%", "<list[", "<bool>", "<str>", "<path>", "<int", "<float"):
            assert raw not in text, (path, raw)


def test_the_console_entry_point_keeps_the_contract(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "compare", "a", "b", "--out", "c", "--alpha", "2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: Invalid value for '--alpha'")
