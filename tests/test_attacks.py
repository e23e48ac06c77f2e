"""Attacks of issue 18 that need no Docker engine, each performed through the shipped CLI.

- Live links (7): a run whose failure messages, kernel and device names carry URLs, `www.`
  links, `GH-1` references and full issue URLs renders a comment in which none is live.
- Hostile bundle shapes (8): a 200,000-deep plan.json, bundle.json, run.json and
  failures.json, a 5,000-digit integer, and a JSON file past its size cap end in one
  `error:` line naming the file, never a traceback.
- Planted links (4, the readers' side): a run.json or plan.json that is a symbolic link to a
  host file is refused by name, never read through.
The attacks that need a container (2, 3, 4) are in tests/test_attacks_docker.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_records, write_comparison
from collector import jsonfile
from collector.record import read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.hostile import AUTOLINK, assert_safe_comment

runner = CliRunner()

LINKS = (
    "see https://github.com/victim/repo/issues/1 and https://github.com/victim/repo/pull/2, "
    "www.evil.example, GH-3, gh-4 and mailto:x@evil.example"
)


def _link_records(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    cases = [gemm_case(m) for m in (1, 2, 4)]
    base = write_record(tmp_path / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp_path / "cand",
        cases,
        lambda c: None if c.params["m"] == 4 else simulated_runs(rng, 1.2),
        failures=[failure(cases[2], LINKS)],
        kernel_for=lambda c: "https://evil.example/kernel GH-9",
        device_name="www.gpu.example",
        meta_extra={"run_id": "https://github.com/victim/repo/issues/5"},
    )
    return base, cand


def test_links_in_untrusted_text_are_not_live_in_the_comment(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    base, cand = _link_records(tmp_path, rng)
    cmp_dir = write_comparison(
        compare_records(read_record(base), read_record(cand)), tmp_path / "cmp"
    ).parent
    bodies: list[str] = []
    for args in (
        ["render", str(cmp_dir), "--artifacts-url", "https://github.com/o/r/actions/runs/7"],
        ["render", "--run", str(cand)],
    ):
        out = tmp_path / f"comment-{len(bodies)}.md"
        result = runner.invoke(app, [*args, "--out", str(out)])
        assert result.exit_code == 0, result.output
        bodies.append(out.read_text())
    comparison, alone = bodies
    # The attacker's text is there (the comment still says what failed), but inert.
    assert "victim/repo/issues/1" in comparison and "evil.example" in comparison
    # The bot's own artifacts link is the only live URL.
    own = "(https://github.com/o/r/actions/runs/7)"
    assert comparison.count(own) == 1
    assert_safe_comment(comparison.replace(own, "(artifacts)"))
    assert_safe_comment(alone)
    assert not AUTOLINK.search(alone.partition("\n")[2])


def test_a_link_target_that_is_not_a_plain_https_url_is_dropped(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    _, cand = _link_records(tmp_path, rng)
    out = tmp_path / "comment.md"
    url = "https://x.example/a) [click](javascript:alert(1)"
    result = runner.invoke(
        app, ["render", "--run", str(cand), "--artifacts-url", url, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    body = out.read_text()
    assert "javascript" not in body and "Full record" not in body
    assert not re.search(r"\]\(", body.replace("](artifacts)", ""))


DEEP = "[" * 200_000 + "]" * 200_000
BOMBS = {
    "deep": (DEEP, "nested too deeply"),
    "shallow-but-too-deep": ("[" * 100 + "]" * 100, "nested too deeply"),
    "huge-integer": ('{"schema_version": 1, "pr": 1' + "0" * 5000 + "}", "not valid JSON"),
}


def _one_error_line(result: Any, path: Path, why: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), result.output
    assert why in lines[0], lines[0]
    assert "Traceback" not in result.output


def _rechecksum(run: Path) -> None:
    import json

    from collector.record import sha256_file

    meta = json.loads((run / "run.json").read_text())
    for name in meta["files"]:
        meta["files"][name] = sha256_file(run / name)
    (run / "run.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_json_bombs_in_plans_bundles_records_and_comparisons_are_one_line(
    tmp_path: Path, rng: np.random.Generator, bomb: str
) -> None:
    text, why = BOMBS[bomb]
    bomb_file = tmp_path / "bomb.json"
    bomb_file.write_text(text)
    # A plan (result make, merge, publish), each read by its own reader.
    for args in (
        ["result", "make", "--plan", str(bomb_file), "--out", str(tmp_path / "b"), "--run-id", "1"],
        ["merge", str(tmp_path), "--out", str(tmp_path / "m"), "--plan", str(bomb_file)],
        ["render", str(bomb_file), "--out", str(tmp_path / "c.md")],
    ):
        _one_error_line(runner.invoke(app, args), bomb_file, why)
    # A run record's run.json and failures.json (the PR's code writes both).
    base, cand = _link_records(tmp_path, rng)
    (cand / "failures.json").write_text(text)
    _rechecksum(cand)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "x")])
    _one_error_line(result, cand / "failures.json", why)
    (cand / "run.json").write_text(text)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "y")])
    _one_error_line(result, cand / "run.json", why)
    # Rendering that run alone reports it unreadable, without a crash.
    result = runner.invoke(app, ["render", "--run", str(cand), "--out", str(tmp_path / "r.md")])
    assert result.exit_code == 0, result.output
    assert "unreadable" in (tmp_path / "r.md").read_text()
    # A result bundle's bundle.json.
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(text)
    _one_error_line(runner.invoke(app, ["result", "verify", str(bundle)]), bundle, why)


def test_a_json_file_past_its_size_cap_is_one_line(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonfile, "MAX_BYTES", 1 << 20)
    base, cand = _link_records(tmp_path, rng)
    (cand / "failures.json").write_text("[" + " " * (2 << 20) + "]")
    _rechecksum(cand)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "x")])
    _one_error_line(result, cand / "failures.json", "larger than 1048576 bytes")


def test_readers_never_follow_a_symbolic_link(tmp_path: Path, rng: np.random.Generator) -> None:
    """Attack 4, reader side: a record whose run.json is a link to a host file (registry
    credentials) is refused by name; the file behind the link is never read."""
    secret = tmp_path / "docker-config.json"
    secret.write_text('{"schema_version": 1, "auths": {"r.example": {"auth": "c2VjcmV0"}}}')
    base, cand = _link_records(tmp_path, rng)
    (cand / "run.json").unlink()
    (cand / "run.json").symlink_to(secret)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "x")])
    _one_error_line(result, cand / "run.json", "is a symbolic link; refusing to follow it")
    # A table listed in run.json, with the checksum of the host file it points at.
    _, cand = _link_records(tmp_path / "again", rng)
    table = cand / "gemm_perf.parquet"
    table.unlink()
    table.symlink_to(secret)
    _rechecksum(cand)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "y")])
    _one_error_line(result, table, "is a symbolic link; refusing to follow it")
    plan = tmp_path / "plan.json"
    plan.symlink_to(secret)
    result = runner.invoke(
        app, ["merge", str(cand), "--out", str(tmp_path / "m"), "--plan", str(plan)]
    )
    _one_error_line(result, plan, "is a symbolic link; refusing to follow it")
