"""GitHub failing for good, and what never appears in the output while it does.

tests/test_github_publish.py covers the transient faults (502s, secondary rate limits, a
late answer) that retries absorb, and a 403. Here the faults outlast the retries: a 5xx
that never clears, an API that never answers, a refused label removal during `plan`. Each
ends in one line naming the endpoint's outcome and where the rendered comment is; nothing is
half-done silently; and the token never appears in stdout, stderr or the logs of the retries.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.github_fixtures import BOT_TOKEN, PR, REPO, payload, plan_pull_request
from tests.github_server import Fault, GitHubServer
from tests.test_github_publish import rendered

runner = CliRunner()


def _publish_process(comment: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """A real process: PyGithub's retry logging goes to its stderr, as in a job log."""
    cmd = [sys.executable, "-m", "bot", "publish", str(comment), "--repo", REPO, "--pr", str(PR)]
    return subprocess.run(
        [*cmd, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def _one_error_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_a_5xx_that_never_clears_fails_in_one_line_after_the_retries(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    gh.fault(Fault("POST", r"/issues/2/comments$", status=503, body={"message": "Down"}, times=99))
    result = _publish_process(comment, "--retries", "2")
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "could not write the comment" in line and str(comment) in line
    assert len(gh.requests("POST", r"/issues/2/comments$")) == 3  # the first try + 2 retries
    assert gh.issue_comments(PR) == []
    # The status was still set (each step is attempted) and the token was never printed.
    assert len(gh.statuses) == 1
    assert BOT_TOKEN not in result.stdout + result.stderr


def test_an_api_that_never_answers_fails_in_one_line(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    gh.fault(Fault("GET", r"/pulls/2$", delay=2.5, times=99))
    result = _publish_process(comment, "--timeout", "1", "--retries", "1")
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "no answer from GitHub" in line and "Timeout" in line
    assert str(comment) in line
    assert gh.issue_comments(PR) == [] and gh.statuses == []
    assert BOT_TOKEN not in result.stdout + result.stderr


def test_the_token_never_appears_in_output_or_retry_logs(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    gh.fault(Fault("GET", r"/pulls/2$", status=502, body={"message": "Bad"}, times=2))
    gh.fault(Fault.secondary_rate_limit("POST", r"/issues/2/comments$"))
    result = _publish_process(comment)
    assert result.returncode == 0, result.stderr
    assert "GitHub API:" in result.stderr  # the retries were logged...
    assert BOT_TOKEN not in result.stdout + result.stderr  # ...without the credentials
    # A refused credential: the error names the status, not the token.
    env = {**os.environ, "GITHUB_TOKEN": "ghp_wrong_" + "Z" * 30}
    bad = subprocess.run(
        [sys.executable, "-m", "bot", "publish", str(comment), "--repo", REPO, "--pr", str(PR)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert bad.returncode == 2 and "HTTP 401" in bad.stderr
    assert "Z" * 30 not in bad.stdout + bad.stderr


def test_plan_when_github_stays_down_is_one_line(gh: GitHubServer, tmp_path: Path) -> None:
    gh.pulls[PR].labels = ["collect/torch"]
    data = payload("pull_request.labeled")
    data["label"]["name"] = "collect/torch"
    gh.fault(Fault("GET", r"/collaborators/", status=502, body={"message": "Bad"}, times=99))
    result = plan_pull_request(tmp_path, data, "--retries", "1")
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert "GitHub API failed while reading the PR and the labeler's permission" in line
    assert "HTTP 502" in line
    assert not (tmp_path / "plan.json").exists()  # no decision rather than a wrong one


def test_plan_cannot_remove_a_refused_label_is_one_line(gh: GitHubServer, tmp_path: Path) -> None:
    """An outsider's trigger label must go; if GitHub refuses the removal, say so loudly."""
    gh.pulls[PR].labels = ["collect/torch"]
    data = payload("pull_request.labeled")
    data["label"]["name"] = "collect/torch"
    data["sender"]["login"] = "outsider"
    denied = "Resource not accessible by integration"
    gh.fault(Fault.forbidden("DELETE", r"/labels/", denied, times=99))
    result = plan_pull_request(tmp_path, data)
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert "removing the label and explaining why" in line and "HTTP 403" in line


@pytest.mark.parametrize("state", ["closed"])
def test_publish_to_a_pr_closed_meanwhile_still_posts_once(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, state: str
) -> None:
    """The PR closed while the run went on: the evidence still lands, once."""
    gh.pulls[PR].state = state
    comment = rendered(tmp_path, rng)
    for _ in range(2):
        result = runner.invoke(app, ["publish", str(comment), "--repo", REPO, "--pr", str(PR)])
        assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1
