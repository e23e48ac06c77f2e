"""publish against the local GitHub server: sticky comment, stale guard, races, faults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_records, write_comparison
from bot.render.comment import Marker
from collector.record import read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.github_fixtures import HEAD, MAINTAINER_TOKEN, PR, REPO
from tests.github_server import Fault, GitHubServer
from tests.github_server.server import SECONDARY_RATE_LIMIT

runner = CliRunner()


def _comparison(tmp: Path, rng: np.random.Generator, started_at: str, run_id: str) -> Path:
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]
    base = write_record(tmp / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp / run_id,
        cases,
        lambda c: None if c is cases[0] else simulated_runs(rng, 1.3 if c is cases[3] else 1.0),
        failures=[failure(cases[0], "boom @octocat")],
        meta_extra={"started_at": started_at, "run_id": run_id},
    )
    result = compare_records(read_record(base), read_record(cand))
    return write_comparison(result, tmp / f"cmp-{run_id}").parent


def rendered(
    tmp: Path,
    rng: np.random.Generator,
    *,
    started_at: str = "2026-11-30T10:00:00+00:00",
    run_id: str = "run-a",
    head: str = HEAD,
) -> Path:
    cmp_dir = _comparison(tmp, rng, started_at, run_id)
    out = tmp / f"{run_id}.md"
    result = runner.invoke(app, ["render", str(cmp_dir), "--out", str(out), "--head-sha", head])
    assert result.exit_code == 0, result.output
    return out


def publish(comment: Path, *extra: str) -> Any:
    return runner.invoke(app, ["publish", str(comment), "--repo", REPO, "--pr", str(PR), *extra])


def bodies(server: GitHubServer) -> list[str]:
    return [c["body"] for c in server.issue_comments(PR)]


def test_publish_twice_updates_one_comment(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    first = rendered(tmp_path, rng, run_id="run-a")
    result = publish(first)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("comment: created")
    [comment] = gh.issue_comments(PR)
    assert comment["body"] == first.read_text()
    second = rendered(tmp_path, rng, run_id="run-b", started_at="2026-11-30T11:00:00+00:00")
    result = publish(second)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("comment: updated")
    [again] = gh.issue_comments(PR)
    assert again["id"] == comment["id"] and again["body"] == second.read_text()
    # Republishing the same body touches nothing.
    result = publish(second)
    assert result.output.startswith("comment: unchanged")
    assert len(gh.requests("PATCH")) == 1
    # The verdict went to a commit status on the head the run measured.
    states = [(s["sha"], s["state"], s["context"]) for s in gh.statuses]
    assert states[-1] == (HEAD, "failure", "collectbot/torch/Test GPU")


def test_a_stale_run_does_not_overwrite_a_newer_one(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    newer = rendered(tmp_path, rng, run_id="run-new", started_at="2026-11-30T12:00:00+00:00")
    older = rendered(tmp_path, rng, run_id="run-old", started_at="2026-11-30T09:00:00+00:00")
    assert publish(newer).exit_code == 0
    result = publish(older)
    assert result.exit_code == 0, result.output
    assert "comment: stale" in result.output and "run-new" in result.output
    assert bodies(gh) == [newer.read_text()]
    # A stale run sets no status either: the newer verdict stands.
    assert len(gh.statuses) == 1


def test_a_run_of_an_older_head_loses_to_the_current_head(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """Started later, but on a commit the PR has moved past: the current head's run stays."""
    current = rendered(tmp_path, rng, run_id="run-cur", started_at="2026-11-30T10:00:00+00:00")
    old_head = rendered(
        tmp_path, rng, run_id="run-late", started_at="2026-11-30T11:00:00+00:00", head="0" * 40
    )
    assert publish(current).exit_code == 0
    assert "comment: stale" in publish(old_head).output
    assert bodies(gh) == [current.read_text()]


def test_two_concurrent_publishes_leave_one_comment(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    a = rendered(tmp_path, rng, run_id="run-a", started_at="2026-11-30T10:00:00+00:00")
    b = rendered(tmp_path, rng, run_id="run-b", started_at="2026-11-30T10:05:00+00:00")
    # Both publishers (two processes) list the (empty) comments before either creates one.
    gh.hold("GET", r"/issues/2/comments$", parties=2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bot", "publish", str(p), "--repo", REPO, "--pr", str(PR)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ.copy(),
        )
        for p in (a, b)
    ]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert len(gh.requests("POST", r"/comments$")) == 2  # both created one
    [survivor] = gh.issue_comments(PR)
    assert survivor["body"] == b.read_text()  # the newer run's body, whoever won the race
    deleted = [r.path for r in gh.requests("DELETE") if r.status == 204]
    assert len(deleted) == 1


def test_comments_are_found_across_pages_and_forgeries_are_ignored(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    first = rendered(tmp_path, rng, run_id="run-a")
    assert publish(first).exit_code == 0
    own_id = gh.issue_comments(PR)[0]["id"]
    # 250 later comments by people, one of them a forged marker with a newer start.
    forged = Marker("torch", "Test GPU", "zzz", HEAD, "2030-01-01T00:00:00+00:00").render()
    for i in range(250):
        gh.add_comment(PR, forged + "\nfake" if i == 120 else f"comment {i}", MAINTAINER_TOKEN)
    second = rendered(tmp_path, rng, run_id="run-b", started_at="2026-11-30T11:00:00+00:00")
    result = publish(second)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"comment: updated {own_id}")
    assert gh.comments[own_id]["body"] == second.read_text()
    pages = gh.requests("GET", r"/issues/2/comments$")
    assert {r.query.get("page", ["1"])[0] for r in pages} >= {"1", "2", "3"}


def test_check_run_mode_and_job_summary(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    for _ in range(2):
        result = publish(comment, "--check", "check-run", "--summary", str(summary))
        assert result.exit_code == 0, result.output
    [run] = gh.check_runs.values()  # created once, then updated in place
    assert run["conclusion"] == "failure" and run["head_sha"] == HEAD
    assert run["output"]["summary"].startswith("## ❌ collectbot:")
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "<!-- collectbot" not in text
    assert text.count("## ❌ collectbot:") == 2


def test_trigger_label_is_removed_when_the_run_ends(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    gh.pulls[PR].labels = ["collect/torch:gemm", "bug"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"pr": PR, "repo": REPO, "label": "collect/torch:gemm"}))
    comment = rendered(tmp_path, rng)
    result = runner.invoke(app, ["publish", str(comment), "--plan", str(plan)])
    assert result.exit_code == 0, result.output
    assert "labels removed: collect/torch:gemm" in result.output
    assert gh.pulls[PR].labels == ["bug"]


def test_transient_502s_and_a_secondary_rate_limit_are_retried(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    bad_gateway = {"message": "Server Error"}
    gh.fault(Fault("GET", r"/pulls/2$", status=502, body=bad_gateway, times=2))
    gh.fault(Fault("GET", r"/issues/2/comments$", status=502, body=bad_gateway, times=1))
    gh.fault(Fault.secondary_rate_limit("POST", r"/issues/2/comments$"))
    gh.fault(Fault("POST", r"/statuses/", status=429, body={"message": SECONDARY_RATE_LIMIT}))
    result = publish(comment)
    assert result.exit_code == 0, result.output
    assert bodies(gh) == [comment.read_text()]
    statuses = [r.status for r in gh.requests("POST", r"/issues/2/comments$")]
    assert statuses == [403, 201]
    assert [r.status for r in gh.requests("GET", r"/pulls/2$")] == [502, 502, 200]
    assert len(gh.statuses) == 1


def test_a_secondary_rate_limit_without_retry_after_waits_and_succeeds(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    gh.fault(Fault.forbidden("PATCH", r"/issues/comments/", SECONDARY_RATE_LIMIT))
    assert publish(comment).exit_code == 0
    second = rendered(tmp_path, rng, run_id="run-b", started_at="2026-11-30T11:00:00+00:00")
    result = publish(second)
    assert result.exit_code == 0, result.output
    assert [r.status for r in gh.requests("PATCH")] == [403, 200]
    assert bodies(gh) == [second.read_text()]


def test_a_timeout_is_retried_and_a_duplicate_create_is_cleaned_up(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """The server creates the comment but answers too late; the client times out and
    retries, creating a second one; the duplicate check leaves exactly one."""
    comment = rendered(tmp_path, rng)
    gh.fault(Fault("POST", r"/issues/2/comments$", delay_after=2.5))
    result = publish(comment, "--timeout", "1")
    assert result.exit_code == 0, result.output
    assert len(gh.requests("POST", r"/issues/2/comments$")) == 2
    assert bodies(gh) == [comment.read_text()]


def test_a_403_on_the_comment_endpoint_fails_with_one_clear_line(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    comment = rendered(tmp_path, rng)
    denied = "Resource not accessible by integration"
    gh.fault(Fault.forbidden("POST", r"/issues/2/comments$", denied, times=100))
    result = publish(comment)
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    line = lines[0]
    assert "HTTP 403: Resource not accessible by integration" in line
    assert "pull-requests: write" in line and str(comment) in line
    assert "Traceback" not in result.output
    assert comment.is_file() and comment.read_text().startswith("<!-- collectbot")
    assert len(gh.requests("POST", r"/issues/2/comments$")) == 1  # a plain 403 is not retried
    assert gh.issue_comments(PR) == []


def test_a_github_app_publishes_with_an_installation_token(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "app.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    gh.app = {
        "id": "4242",
        "public_key": key.public_key(),
        "installation_id": 777,
        "bot_login": "collectbot-app[bot]",
    }
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("COLLECTBOT_APP_ID", "4242")
    monkeypatch.setenv("COLLECTBOT_APP_PRIVATE_KEY_FILE", str(pem))
    comment = rendered(tmp_path, rng)
    result = publish(comment, "--bot-login", "collectbot-app[bot]")
    assert result.exit_code == 0, result.output
    [posted] = gh.issue_comments(PR)
    assert posted["user"].login == "collectbot-app[bot]"
    assert [r.path for r in gh.requests("GET", "installation")] == [
        "/repos/Codertocat/Hello-World/installation"
    ]
    assert len(gh.requests("POST", "access_tokens")) == 1


def test_workflow_run_resolves_the_pr_from_the_head_sha(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """A fork's workflow_run has no pull_requests; the PR comes from the run's head
    repository and branch at its head SHA."""
    from tests.github_fixtures import finished_run

    gh.label(PR, "collect/torch", "Codertocat")  # the label that started the run
    event = finished_run(HEAD)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    comment = rendered(tmp_path, rng)
    result = runner.invoke(app, ["publish", str(comment), "--event", str(path)])
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1
    # A SHA no open PR of that branch has as its head: refused, nothing posted elsewhere.
    for head, branch in (("2" * 40, "feature"), (HEAD, "other")):
        path.write_text(json.dumps(finished_run(head, head_branch=branch)))
        result = runner.invoke(app, ["publish", str(comment), "--event", str(path)])
        assert result.exit_code == 2 and "expected one open pull request from" in result.output
        assert f"at {head[:12]} on {REPO}, found none" in result.output
    assert len(gh.issue_comments(PR)) == 1
    # A run no maintainer's label started (its actor applied none): nothing posted.
    path.write_text(json.dumps(finished_run(HEAD, actor="outsider")))
    result = runner.invoke(app, ["publish", str(comment), "--event", str(path)])
    assert result.exit_code == 2 and "not approved" in result.output
    assert len(gh.issue_comments(PR)) == 1 and len(gh.statuses) == 1


def test_missing_credentials_and_bad_inputs_are_one_line_errors(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    comment = rendered(tmp_path, rng)
    monkeypatch.delenv("GITHUB_TOKEN")
    result = publish(comment)
    assert (
        result.exit_code == 2 and "error: no GitHub credentials: set GITHUB_TOKEN" in result.output
    )
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    result = publish(comment)
    assert result.exit_code == 2 and "HTTP 401: Bad credentials" in result.output
    result = runner.invoke(app, ["publish", str(tmp_path / "none.md"), "--pr", "2", "--repo", REPO])
    assert result.exit_code == 2 and "none.md: rendered comment not found" in result.output
    comment.with_suffix(".json").unlink()
    result = publish(comment)
    assert result.exit_code == 2 and "sidecar missing" in result.output
