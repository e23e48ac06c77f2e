"""The trusted publisher: a verified result bundle becomes the PR's comment and status.

Runs in a `workflow_run` job with the write token and the default branch's code. It trusts
GitHub's event (repository, run id, head SHA) and nothing the collection run wrote without
checking it:
- the bundle must belong to exactly the run that finished (repository, run id, head SHA);
- the pull request is the open one whose head is the run's head repository and branch at that
  SHA, found through the API; a PR number in the bundle must agree, and is never used alone;
- approval is re-derived from GitHub (`bot/github/approval.py`) before any comment or status:
  a trigger label applied by a writer when the run started, whatever the bundle says;
- the comment is rendered here, from a comparison that matches its schema or from a run
  record, never taken as markdown from the bundle;
- a skipped plan's side effects are re-derived: a labeler said to lack write permission is
  looked up again, and only trigger labels (`collect/...`) are ever removed;
- with a run store, the run's record is kept under the PR's number (the one resolved above)
  after the comment is posted, and the next comment compares with it
  (`bot/github/pull_history.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.github.api import PullRequest, RepoApi
from bot.github.approval import check_approval
from bot.github.events import WorkflowRunEvent
from bot.github.facts import Applied, apply_plan_actions
from bot.github.labels import is_trigger_name
from bot.github.plan import (
    LABELER_LACKS_PERMISSION,
    NEW_COMMITS,
    REQUIRED_PERMISSION,
    Plan,
    lacks_permission_notice,
    new_commits_notice,
    permission_rank,
)
from bot.github.publish import PublishOptions, PublishReport, publish
from bot.render.rendered import Rendered, load_rendered
from bot.result_bundle import COMPARISON_JSON, LOG_TXT, RUN_DIR, ResultBundle
from bot.store import RunStore
from collector.errors import UserError


@dataclass
class Delivery:
    action: str  # published | notice | nothing | no-pull-request
    detail: str
    pr: int | None = None
    report: PublishReport | None = None
    applied: Applied | None = None
    rendered: Rendered | None = None
    warnings: list[str] = field(default_factory=list)


def check_binding(bundle: ResultBundle, event: WorkflowRunEvent) -> None:
    """The bundle must be the one of the run GitHub says finished."""
    meta = bundle.meta
    checks = [
        ("repo", str(meta["repo"]).lower(), event.repo.lower()),
        ("workflow_run_id", meta["workflow_run_id"], event.run_id),
        ("head_sha", meta["head_sha"], event.head_sha),
    ]
    for name, got, want in checks:
        if got != want:
            raise UserError(
                f"{bundle.path / 'bundle.json'}: {name} {got!r} is not the finished run's "
                f"{want!r}; refusing a bundle of another run"
            )


def pulls_of_run(api: RepoApi, event: WorkflowRunEvent) -> list[PullRequest]:
    """The open PRs whose head is the run's head repository and branch, at the run's SHA.

    The SHA alone names no PR: anyone can open a second PR (from their fork) with the same
    head commit. The head repository and branch are GitHub's record of where the run's code
    came from; only PRs from there count. One branch opened against several bases leaves
    more than one: GitHub's own list of the run's PRs (same-repository runs) narrows it.
    """
    if not event.head_repo or not event.head_branch:
        return []
    matches = [
        p
        for p in api.open_pulls_for_branch(event.head_repo, event.head_branch)
        if p.head_sha == event.head_sha
    ]
    if len(matches) > 1 and event.pull_requests:
        matches = [p for p in matches if p.number in event.pull_requests]
    return matches


def the_pull_of_run(api: RepoApi, event: WorkflowRunEvent) -> PullRequest:
    """The one open PR from the run's head repository and branch at its head SHA; never a
    number the PR's code wrote, nor a PR someone else opened on the same commit."""
    matches = pulls_of_run(api, event)
    if len(matches) != 1:
        found = ", ".join(f"#{p.number}" for p in matches) or "none"
        raise UserError(
            f"--event: expected one open pull request from {branch_text(event)} at "
            f"{event.head_sha[:12]} on {api.repo}, found {found}"
        )
    return matches[0]


def branch_text(event: WorkflowRunEvent) -> str:
    """The run's head repository and branch for a message (a branch name is anyone's text)."""
    return repr(f"{event.head_repo or '(deleted)'}:{event.head_branch}")[:160]


def resolve_pull(api: RepoApi, bundle: ResultBundle, event: WorkflowRunEvent) -> PullRequest | None:
    """The PR of the run (`pulls_of_run`), refused while ambiguous; None for no PR's run."""
    head_sha = event.head_sha
    matches = pulls_of_run(api, event)
    claimed = bundle.plan.get("pr")
    if len(matches) > 1:
        found = ", ".join(f"#{p.number}" for p in matches)
        raise UserError(
            f"more than one open pull request has head {branch_text(event)} at {head_sha[:12]}: "
            f"{found}"
        )
    if not matches:
        if claimed is not None:
            raise UserError(
                f"no open pull request has head {branch_text(event)} at {head_sha[:12]} (the "
                f"bundle names #{claimed}; closed, or new commits since)"
            )
        return None
    pull = matches[0]
    if claimed is not None and claimed != pull.number:
        raise UserError(
            f"{bundle.path / 'plan.json'}: names pull request #{claimed}, but head "
            f"{head_sha[:12]} is #{pull.number}'s"
        )
    return pull


def trusted_skip_plan(api: RepoApi, pull: PullRequest, bundle: ResultBundle) -> Plan | None:
    """The side effects of a skipped plan, derived here from GitHub's own answers."""
    plan = bundle.plan
    code = plan["code"]
    common: dict[str, Any] = {
        "trigger": False,
        "code": code,
        "event": str(plan.get("event") or "pull_request"),
        "repo": api.repo,
        "pr": pull.number,
        "head_sha": pull.head_sha,
    }
    on_pr = {name.lower(): name for name in pull.labels}
    if code == LABELER_LACKS_PERMISSION:
        label, labeler = plan.get("label"), plan.get("labeler")
        if not label or not is_trigger_name(label) or not labeler:
            raise UserError(f"{bundle.path / 'plan.json'}: {code} without a trigger label")
        permission, _ = api.permission(labeler)
        if permission_rank(permission) >= permission_rank(REQUIRED_PERMISSION):
            raise UserError(
                f"{bundle.path / 'plan.json'}: says {labeler} lacks {REQUIRED_PERMISSION} "
                f"permission, but GitHub says {permission}; nothing done"
            )
        present = on_pr.get(label.lower())
        return Plan(
            **common,
            action="labeled",
            reason=f"`{label}` applied by {labeler} ({permission})",
            label=label,
            labeler=labeler,
            labeler_permission=permission,
            remove_labels=[present] if present else [],
            notice=lacks_permission_notice(label),
        )
    if code == NEW_COMMITS:
        labels = [name for name in pull.labels if is_trigger_name(name)]
        if not labels:
            return None
        return Plan(
            **common,
            action="synchronize",
            reason="new commits",
            remove_labels=labels,
            notice=new_commits_notice(None, pull.head_sha, labels),
        )
    return None


def render_bundle(
    bundle: ResultBundle,
    out: Path,
    head_sha: str,
    artifacts_url: str | None,
    since: dict[str, Any] | None = None,
    site_url: str | None = None,
) -> Path:
    """Render the comment of a comparison or run bundle with this (trusted) code."""
    from bot.render.comment import RenderOptions, render_comment, render_run_comment
    from bot.render.rendered import comparison_meta, run_meta, write_rendered

    marker = bundle.meta.get("marker") or {}
    opts = RenderOptions(
        head_sha=head_sha,
        artifacts_url=artifacts_url,
        backend=marker.get("backend") or bundle.plan.get("backend"),
        gpu=marker.get("gpu"),
        run_id=marker.get("run_id"),
        started_at=marker.get("started_at"),
        since_previous=since,
        site_url=site_url,
    )
    comment = out / "comment.md"
    if bundle.kind == "comparison":
        from bot.compare.comparison import load_comparison

        comparison = load_comparison(bundle.file(COMPARISON_JSON))
        body = render_comment(comparison, opts)
        write_rendered(comment, body, comparison_meta(comparison, body, artifacts_url))
        return comment
    from bot.render.run_summary import load_run_info

    log = bundle.file(LOG_TXT)
    info = load_run_info(
        bundle.file(RUN_DIR),
        stage=bundle.meta.get("stage"),
        error=bundle.meta.get("error"),
        log=log if log.is_file() else None,
    )
    body = render_run_comment(info, opts)
    write_rendered(comment, body, run_meta(info, body, artifacts_url))
    return comment


def deliver(
    api: RepoApi,
    event: WorkflowRunEvent,
    bundle: ResultBundle,
    opts: PublishOptions,
    workdir: Path,
    artifacts_url: str | None,
) -> Delivery:
    check_binding(bundle, event)
    pull = resolve_pull(api, bundle, event)
    if bundle.kind == "skip":
        if pull is None:
            return Delivery("nothing", f"skipped ({bundle.plan['code']}); no pull request")
        trusted = trusted_skip_plan(api, pull, bundle)
        if trusted is None:
            return Delivery(
                "nothing", f"skipped ({bundle.plan['code']}): nothing to say", pr=pull.number
            )
        applied = apply_plan_actions(api, trusted, bot_login=opts.bot_login)
        return Delivery(
            "notice",
            f"{trusted.code}: removed {', '.join(applied.labels_removed) or 'no label'}, "
            f"wrote {len(applied.comments_written)} comment(s)",
            pr=pull.number,
            applied=applied,
        )
    # Before anything is posted: did a maintainer approve this run? GitHub says, not the bundle.
    approval = check_approval(api, pull, event, bundle.plan.get("label")) if pull else None
    warnings: list[str] = []
    history = _pull_history(opts, api.repo, pull, bundle) if pull else None
    since = _since_previous(history, bundle, workdir, warnings) if history else None
    comment = render_bundle(
        bundle, workdir, event.head_sha, artifacts_url, since, site_url=opts.site_url
    )
    rendered = load_rendered(comment)
    if pull is None:
        if opts.summary_path is not None:
            from bot.github.publish import write_summary

            write_summary(rendered, opts.summary_path)
        return Delivery(
            "no-pull-request",
            f"no open pull request has head {event.head_sha[:12]}; the comment is at {comment}",
            rendered=rendered,
        )
    assert approval is not None
    label = approval.label  # the label GitHub says approved the run, not the bundle's
    labels = list(opts.remove_labels)
    if label and is_trigger_name(label) and label not in labels:
        labels.append(label)
    report = publish(
        api,
        pull,
        rendered,
        PublishOptions(
            check=opts.check,
            remove_labels=labels,
            bot_login=opts.bot_login,
            details_url=opts.details_url,
            summary_path=opts.summary_path,
        ),
    )
    if history is not None and report.comment is not None and report.comment.action != "stale":
        _remember(history, bundle, warnings)
    return Delivery(
        "published",
        rendered.meta.headline,
        pr=pull.number,
        report=report,
        rendered=rendered,
        warnings=warnings,
    )


def _pull_history(
    opts: PublishOptions, repo: str, pull: PullRequest, bundle: ResultBundle
) -> RunStore | None:
    """The namespace of the PR GitHub resolved (never a number from the bundle), when a store
    is configured and the bundle carries the run's record."""
    if not opts.store or bundle.kind != "comparison":
        return None
    if not (bundle.file(RUN_DIR) / "run.json").is_file():
        return None
    from bot.github.pull_history import pull_store

    return pull_store(opts.store, repo, pull.number)


def _since_previous(
    store: RunStore, bundle: ResultBundle, workdir: Path, warnings: list[str]
) -> dict[str, Any] | None:
    """The 'since the previous run of this PR' summary; a store problem is a warning only."""
    from bot.compare.comparison import load_comparison
    from bot.github.pull_history import settings_of, since_previous

    settings = settings_of(load_comparison(bundle.file(COMPARISON_JSON)))
    try:
        return since_previous(store, bundle.file(RUN_DIR), settings, workdir)
    except (UserError, OSError) as exc:
        warnings.append(f"the PR's previous run could not be compared: {exc}")
        return None


def _remember(store: RunStore, bundle: ResultBundle, warnings: list[str]) -> None:
    from bot.github.pull_history import remember

    try:
        remember(store, bundle.file(RUN_DIR))
    except (UserError, OSError) as exc:
        warnings.append(f"this run was not kept for the PR's next comparison: {exc}")
