"""Fetch what the plan decision needs from the API, and carry out its side effects."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.github.api import RepoApi
from bot.github.events import PullRequestEvent
from bot.github.plan import Facts, Plan
from bot.github.sticky import WILDCARD, post_notice
from bot.render.sanitize import md_text


def gather_facts(api: RepoApi, event: PullRequestEvent) -> Facts:
    permission, role = api.permission(event.sender)
    pr = api.pull(event.number)
    return Facts(
        labeler_permission=permission,
        labeler_role=role,
        current_head_sha=pr.head_sha,
        current_state=pr.state,
        current_labels=pr.labels,
    )


@dataclass
class Applied:
    labels_removed: list[str] = field(default_factory=list)
    comments_written: list[int] = field(default_factory=list)


def apply_plan_actions(api: RepoApi, plan: Plan, *, bot_login: str | None) -> Applied:
    """Remove the labels the plan drops and explain why on the PR's bot comment(s)."""
    applied = Applied()
    if plan.pr is None:
        return applied
    for label in plan.remove_labels:
        if api.remove_label(plan.pr, label):
            applied.labels_removed.append(label)
    if plan.notice:
        backend = plan.backend or WILDCARD
        if plan.remove_labels and not plan.backend:
            from bot.github.labels import PREFIX

            first = plan.remove_labels[0][len(PREFIX) :]
            backend = first.split(":", 1)[0].split("@", 1)[0].lower() or WILDCARD
        applied.comments_written = post_notice(
            api,
            plan.pr,
            str(md_text(plan.notice, limit=1000)),
            backend=backend,
            head_sha=plan.head_sha or "",
            bot_login=bot_login,
        )
    return applied
