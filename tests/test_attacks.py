"""Attacks of issue 18 that need no Docker engine, each performed through the shipped CLI.

- Live links (7): a run whose failure messages, kernel and device names carry URLs, `www.`
  links, `GH-1` references and full issue URLs renders a comment in which none is live.
- Hostile bundle shapes (8): a 200,000-deep plan.json, bundle.json and run.json, and a
  JSON file past its size cap, end in one `error:` line naming the file, never a traceback.
- JIT caches (3): a PR container's run replaces a cached file; a later trusted run's cache
  still holds the trusted bytes (see `bot/images/caches.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_records, write_comparison
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
