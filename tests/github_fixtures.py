"""Shared set-up for the GitHub tests: the local server, tokens, payloads, a rendered comment."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.github_server import GitHubServer, PullState

DATA = Path(__file__).resolve().parent / "data" / "github"
REPO = "Codertocat/Hello-World"
BOT_TOKEN = "ghs_bot_token"
MAINTAINER_TOKEN = "ghp_maintainer"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # the head in the recorded payloads
BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
PR = 2
# When GitHub created the workflow run in the workflow_run payloads the tests build: just
# after the local server's clock (12:00:00, a second per write) recorded the labels.
RUN_CREATED = "2026-11-30T12:01:00Z"


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "webhooks" / f"{name}.json").read_text())
    return copy.deepcopy(data)


def plan_pull_request(tmp_path: Path, data: dict[str, Any], *options: str) -> Result:
    """`collectbot plan` of the pull_request event `data` for the torch backend, into
    tmp_path/plan.json, plus `options`."""
    from bot.cli import app  # the CLI only where a test plans (conftest imports this module)

    event = tmp_path / "event.json"
    event.write_text(json.dumps(data))
    return CliRunner().invoke(
        app,
        ["plan", "--event", str(event), "--event-name", "pull_request", "--out",
         str(tmp_path / "plan.json"), "--backends", "torch", *options],
    )  # fmt: skip


def finished_run(
    head: str = HEAD,
    run_id: int = 4242,
    *,
    actor: str = "Codertocat",
    head_repo: str = REPO,
    head_branch: str = "feature",
    pull_requests: list[int] | None = None,
    event: str = "pull_request",
) -> dict[str, Any]:
    """A recorded `workflow_run.completed` payload for a run of `head` from `head_repo`'s
    `head_branch`, started by `actor`'s event and created at RUN_CREATED."""
    data = payload("workflow_run.completed")
    data["repository"]["full_name"] = REPO
    run = data["workflow_run"]
    run.update(
        head_sha=head,
        id=run_id,
        event=event,
        head_branch=head_branch,
        created_at=RUN_CREATED,
        pull_requests=[{"number": n} for n in pull_requests or []],
        html_url=f"https://github.com/{REPO}/actions/runs/{run_id}",
    )
    run["actor"] = {"login": actor, "type": "User"}
    run["head_repository"]["full_name"] = head_repo
    return data


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    server = GitHubServer(REPO)
    server.add_token(BOT_TOKEN, "github-actions[bot]", "Bot")
    server.add_token(MAINTAINER_TOKEN, "maintainer", "User")
    server.permissions.update(
        {
            "Codertocat": ("admin", "admin"),
            "triager": ("read", "triage"),
            "outsider": ("read", "read"),
        }
    )
    server.add_pull(
        PullState(
            number=PR, head_sha=HEAD, base_sha=BASE, head_repo=REPO, head_ref="feature", labels=[]
        )
    )
    with server.running():
        monkeypatch.setenv("GITHUB_API_URL", server.url)
        monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("COLLECTBOT_GITHUB_THROTTLE", "0")
        monkeypatch.setenv("COLLECTBOT_GITHUB_BACKOFF", "0.01")
        monkeypatch.setenv("COLLECTBOT_GITHUB_SECONDARY_WAIT", "0.2")
        for var in (
            "GITHUB_STEP_SUMMARY",
            "GITHUB_OUTPUT",
            "GITHUB_EVENT_PATH",
            "GITHUB_EVENT_NAME",
            "GITHUB_REPOSITORY",
            "COLLECTBOT_APP_ID",
            "COLLECTBOT_BOT_LOGIN",
        ):
            monkeypatch.delenv(var, raising=False)
        yield server
    assert not server.violations, "\n".join(server.violations[:20])
