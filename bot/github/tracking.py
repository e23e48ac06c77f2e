"""Main compared with its previous run: the tracking issue and the commit status.

Called by the baseline workflow's trusted `track` job with a comparison of the new baseline
against the previous stored baseline of the same key (both written by the trusted store job).
A red result opens the ONE tracking issue of that key, or updates it (reopening it if it was
closed); a clean result updates an open one to say so and closes it. The issue is found by
its first-line marker AND its author (the bot's account): anyone can paste the marker into an
issue, nobody else can write as the bot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.github.api import Issue, RepoApi
from bot.render.sanitize import clean
from bot.render.tracking import marker_key, render_tracking, tracking_key

STATUS_LIMIT = 140


@dataclass
class Tracked:
    action: str  # opened | updated | reopened | closed | clean
    issue: int | None
    url: str | None
    status: str  # the commit status set: failure | success


def is_ours(issue: Issue, bot_login: str | None) -> bool:
    if bot_login:
        return issue.author.lower() == bot_login.lower()
    return issue.author_type == "Bot"


def find_tracking(api: RepoApi, key: str, bot_login: str | None) -> Issue | None:
    """The bot's tracking issue of `key`: the open one, else the newest closed one."""
    found = [i for i in api.issues("all") if marker_key(i.body) == key and is_ours(i, bot_login)]
    if not found:
        return None
    return max(found, key=lambda i: (i.state == "open", i.number))


def status_context(comparison: dict[str, Any], ref: str) -> str:
    key = tracking_key(comparison)
    return clean(f"collectbot/{ref}/{key.backend}/{key.gpu}", 100)


def track(
    api: RepoApi,
    comparison: dict[str, Any],
    sha: str,
    ref: str,
    *,
    bot_login: str | None = None,
    change_points: str | None = None,
) -> Tracked:
    """Open, update, reopen or close the tracking issue, then set the status on `sha`."""
    rendered = render_tracking(comparison, sha, ref, change_points)
    key = tracking_key(comparison).path
    issue = find_tracking(api, key, bot_login)
    if rendered.red:
        if issue is None:
            issue = api.create_issue(rendered.title, rendered.body)
            action = "opened"
        elif issue.state == "open":
            issue = api.update_issue(issue.number, title=rendered.title, body=rendered.body)
            action = "updated"
        else:
            issue = api.update_issue(
                issue.number, title=rendered.title, body=rendered.body, state="open"
            )
            action = "reopened"
    elif issue is not None and issue.state == "open":
        issue = api.update_issue(
            issue.number, body=rendered.body, state="closed", state_reason="completed"
        )
        action = "closed"
    else:
        action = "clean"
    state = "failure" if rendered.red else "success"
    headline = clean(comparison["verdict"]["headline"], 300).replace("\n", " ")
    text = f"{ref} vs its previous baseline: {headline}"
    if len(text) > STATUS_LIMIT:
        text = text[: STATUS_LIMIT - 1] + "…"
    url = issue.html_url if issue is not None and issue.html_url.startswith("https://") else None
    api.create_status(sha, state, status_context(comparison, ref), text, url)
    return Tracked(action, issue.number if issue else None, url, state)
