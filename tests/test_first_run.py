"""A first run without a baseline: no verdict, never `success`; failure when cases failed.

Driven as in CI: `conclude` with an empty store (the compare stage finds no baseline), the
trusted publisher (`publish --result --event`) against the local GitHub server.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.factories import failure, simulated_runs, write_record
from tests.github_fixtures import HEAD, PR, gh  # noqa: F401  (the local server fixture)
from tests.github_server import GitHubServer
from tests.test_result_publish import CASES, LABEL, RUN_ID, _event, _plan, _publish

runner = CliRunner()


def _shards(tmp: Path, rng: np.random.Generator, failed: bool) -> Path:
    """One shard holding every case; the first one failed when `failed`."""
    write_record(
        tmp / "shards" / "shard-1",
        CASES,
        lambda c: None if failed and c is CASES[0] else simulated_runs(rng, 1.0),
        failures=[failure(CASES[0], "kernel exploded")] if failed else [],
        meta_extra={"shard": [1, 1], "run_id": "s1"},
    )
    return tmp / "shards"


@pytest.mark.parametrize(
    ("failed", "check", "state"),
    [
        (False, "status", "pending"),
        (True, "status", "failure"),
        (False, "check-run", "neutral"),
        (True, "check-run", "failure"),
    ],
)
def test_a_first_run_without_a_baseline_never_posts_success(
    gh: GitHubServer,  # noqa: F811
    tmp_path: Path,
    rng: np.random.Generator,
    failed: bool,
    check: str,
    state: str,
) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    out = tmp_path / "o"
    result = runner.invoke(
        app,
        [
            *("conclude", "--plan", str(plan), "--shards-dir", str(_shards(tmp_path, rng, failed))),
            *("--shards", "1", "--store", str(tmp_path / "empty-store"), "--out", str(out)),
            *("--run-id", str(RUN_ID)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert ("red" if failed else "yellow") + ":" in result.output
    result = _publish(out / "result", _event(tmp_path), "--check", check)
    assert result.exit_code == 0, result.output
    [comment] = gh.issue_comments(PR)
    body = comment["body"]
    headline = body.split("\n")[1]
    assert headline.startswith("## ❌" if failed else "## ⚠️"), headline
    assert "no baseline to compare with" in headline
    # What a baseline would add, and how to get one.
    assert "**No baseline to compare with.**" in body
    assert "which failure groups are new, persisting or resolved" in body
    assert "run the `collectbot baseline` workflow on the base branch" in body
    if check == "status":
        [status] = gh.statuses
        assert (status["sha"], status["state"]) == (HEAD, state)
    else:
        [run] = gh.check_runs.values()
        assert run["conclusion"] == state
