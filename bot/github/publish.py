"""Publish a rendered comment: sticky comment, commit status or check run, job summary,
trigger-label removal. Each step is attempted; failures are collected and reported together
in one line, with the path of the rendered comment, which stays on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.github.api import PullRequest, RepoApi
from bot.github.sticky import StickyResult, publish_sticky
from bot.render.rendered import Rendered
from bot.render.sanitize import clean
from collector.errors import UserError

STATUS_STATE = {"green": "success", "yellow": "success", "red": "failure"}
CHECK_CONCLUSION = {"green": "success", "yellow": "neutral", "red": "failure"}
# A run without a comparison (no baseline yet) has no verdict: never `success`. Commit
# statuses have no neutral state; `pending` is the one that neither passes nor fails.
NO_VERDICT_STATE, NO_VERDICT_CONCLUSION = "pending", "neutral"
ICON = {"green": "✅", "yellow": "⚠️", "red": "❌"}
# Statuses keep 140 characters of description; check-run output fields 65,535.
STATUS_DESCRIPTION_LIMIT = 140
CHECK_TEXT_LIMIT = 65535
RUN_BROKEN = ("failed", "missing", "unreadable")


@dataclass
class PublishOptions:
    check: str = "status"  # status | check-run | none
    remove_labels: list[str] = field(default_factory=list)
    bot_login: str | None = None
    details_url: str | None = None
    summary_path: Path | None = None
    # The run store whose pulls/ namespace keeps each PR's runs (bot/github/pull_history.py).
    store: str | None = None
    # Where the store's site is served: the comment's trends link to each case's page.
    site_url: str | None = None


@dataclass
class PublishReport:
    repo: str
    pr: int
    comment: StickyResult | None = None
    check: dict[str, Any] | None = None
    labels_removed: list[str] = field(default_factory=list)
    summary: str | None = None
    errors: list[str] = field(default_factory=list)


def check_name(rendered: Rendered) -> str:
    m = rendered.meta.marker
    return clean(f"collectbot/{m.backend}/{m.gpu}", 100)


def body_without_marker(body: str) -> str:
    return body.split("\n", 1)[1] if "\n" in body else ""


def check_marker_head(rendered: Rendered, expected: str | None, where: Path | str) -> None:
    """The commit the run measured comes from a trusted source (the workflow_run event GitHub
    wrote, or the plan). A rendered comment may have travelled through an untrusted job: if
    its marker names another commit, its status would land on that commit."""
    marked = rendered.meta.marker.head_sha
    if expected and marked and marked != expected:
        raise UserError(
            f"{where}: the comment's marker names head {marked[:12]}, but the run measured "
            f"{str(expected)[:12]} (render it again with --head-sha {expected})"
        )


def describe_api_error(exc: BaseException) -> str:
    """One line for a PyGithub or transport error, never a traceback."""
    from github import GithubException
    from requests import RequestException

    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        message = data.get("message") or exc.message or str(exc.data)
        return f"HTTP {exc.status}: {clean(message, 200)}".replace("\n", " ")
    if isinstance(exc, RequestException):
        return f"no answer from GitHub ({type(exc).__name__}: {clean(exc, 200)})".replace("\n", " ")
    raise exc


def _hint(status: int | None, what: str) -> str:
    if status == 403:
        return (
            f"; the token may not write {what} (Actions: `permissions: {what}: write`; a fork "
            "PR's pull_request token is read-only: publish from a workflow_run job)"
        )
    if status == 404:
        return "; check the repository, the PR number and that the token can see them"
    return ""


def write_summary(rendered: Rendered, path: Path) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(body_without_marker(rendered.body).strip() + "\n\n")


def set_check(
    api: RepoApi, rendered: Rendered, sha: str, opts: PublishOptions, comment_url: str | None
) -> dict[str, Any]:
    meta = rendered.meta
    broken = meta.run_status in RUN_BROKEN
    no_verdict = meta.kind == "run" and meta.level != "red"
    name = check_name(rendered)
    target = opts.details_url or meta.artifacts_url or comment_url
    headline = clean(meta.headline, 300).replace("\n", " ")
    if opts.check == "status":
        state = "error" if broken else NO_VERDICT_STATE if no_verdict else STATUS_STATE[meta.level]
        text = f"{ICON[meta.level]} {headline}"
        if len(text) > STATUS_DESCRIPTION_LIMIT:
            text = text[: STATUS_DESCRIPTION_LIMIT - 1] + "…"
        api.create_status(sha, state, name, text, target)
        return {"kind": "status", "context": name, "state": state, "sha": sha}
    conclusion = "failure" if broken else CHECK_CONCLUSION[meta.level]
    if no_verdict and not broken:
        conclusion = NO_VERDICT_CONCLUSION
    summary = body_without_marker(rendered.body)
    if len(summary) > CHECK_TEXT_LIMIT:
        note = "\n\n_(truncated; see the PR comment)_"
        summary = summary[: CHECK_TEXT_LIMIT - len(note)] + note
    body: dict[str, Any] = {
        "name": name,
        "status": "completed",
        "conclusion": conclusion,
        "output": {"title": headline[:255] or name, "summary": summary},
    }
    if target and target.startswith(("http://", "https://")):
        body["details_url"] = target
    existing = api.find_check_run(sha, name)
    if existing:
        api.update_check_run(int(existing["id"]), body)
        run_id = int(existing["id"])
    else:
        run_id = int(api.create_check_run({**body, "head_sha": sha})["id"])
    return {"kind": "check-run", "name": name, "conclusion": conclusion, "id": run_id, "sha": sha}


def publish(
    api: RepoApi, pr: PullRequest, rendered: Rendered, opts: PublishOptions
) -> PublishReport:
    report = PublishReport(repo=api.repo, pr=pr.number)
    if opts.summary_path is not None:
        write_summary(rendered, opts.summary_path)
        report.summary = str(opts.summary_path)
    marker = rendered.meta.marker
    from github import GithubException
    from requests import RequestException

    try:
        report.comment = publish_sticky(
            api,
            pr.number,
            rendered.body,
            marker,
            bot_login=opts.bot_login,
            current_head=pr.head_sha,
        )
    except (GithubException, RequestException) as exc:
        status = getattr(exc, "status", None)
        report.errors.append(
            f"could not write the comment on {api.repo}#{pr.number} "
            f"({describe_api_error(exc)}){_hint(status, 'pull-requests')}"
        )
    stale = report.comment is not None and report.comment.action == "stale"
    if opts.check != "none" and not stale:
        sha = marker.head_sha or pr.head_sha
        try:
            url = report.comment.url if report.comment else None
            report.check = set_check(api, rendered, sha, opts, url)
        except (GithubException, RequestException) as exc:
            what = "statuses" if opts.check == "status" else "checks"
            status = getattr(exc, "status", None)
            report.errors.append(
                f"could not set the {opts.check} on {sha[:12]} ({describe_api_error(exc)})"
                f"{_hint(status, what)}"
            )
    for label in opts.remove_labels:
        try:
            if api.remove_label(pr.number, label):
                report.labels_removed.append(label)
        except (GithubException, RequestException) as exc:
            report.errors.append(
                f"could not remove label {label!r} ({describe_api_error(exc)})"
                f"{_hint(getattr(exc, 'status', None), 'issues')}"
            )
    return report


def summary_path_from_env() -> Path | None:
    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if value else None


def raise_for_errors(report: PublishReport, rendered: Rendered) -> None:
    if report.errors:
        raise UserError("; ".join(report.errors) + f"; the rendered comment is at {rendered.path}")
