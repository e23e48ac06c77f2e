"""The plan decision: does this event run PR code on a GPU runner, and which code exactly?

A maintainer's trigger label is the approval (docs/security.md). It approves the head SHA
the PR had when the label was applied, only when the labeler has write permission or more,
and it is dropped as soon as new commits arrive. `decide_event` needs only the payload;
`decide_with_facts` adds what only the API knows (the labeler's permission, the current head,
state and labels). Both are pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bot.github.events import PR_EVENTS, PullRequestEvent
from bot.github.labels import LabelError, TriggerLabel, is_trigger_name, parse_label

# Collaborator permission levels (REST `permission`), lowest first; maintain reads as write.
PERMISSIONS = ("none", "read", "write", "admin")
REQUIRED_PERMISSION = "write"

# Machine-readable decision codes.
APPROVED = "approved"
NOT_A_PR_EVENT = "not-a-pull-request-event"
NOT_A_LABEL_EVENT = "not-a-label-event"
UNRELATED_LABEL = "unrelated-label"
BAD_LABEL = "bad-label"
LABEL_REMOVED = "label-removed"
NEW_COMMITS = "new-commits"
PR_CLOSED = "pr-closed"
LABELER_LACKS_PERMISSION = "labeler-lacks-permission"
LABEL_GONE = "label-gone"
HEAD_MOVED = "head-moved"
DISPATCHED = "dispatched"
BAD_INPUT = "bad-input"


@dataclass(frozen=True)
class Facts:
    """What the API says now."""

    labeler_permission: str
    labeler_role: str | None
    current_head_sha: str
    current_state: str
    current_labels: tuple[str, ...]


@dataclass
class Plan:
    trigger: bool
    code: str
    reason: str
    event: str
    action: str
    repo: str | None = None
    pr: int | None = None
    label: str | None = None
    backend: str | None = None
    ops: list[str] = field(default_factory=list)
    case_set: str | None = None
    head_sha: str | None = None  # the approved head: collect exactly this commit
    base_sha: str | None = None
    base_ref: str | None = None
    head_repo: str | None = None
    fork: bool = False
    labeler: str | None = None
    labeler_permission: str | None = None
    # How the run is compared (`store` or `paired`) and how many shards it is cut into.
    baseline: str | None = None
    shards: int = 1
    # Side effects the decision asks for (the `plan` command carries them out).
    remove_labels: list[str] = field(default_factory=list)
    notice: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, **asdict(self)}


def short(sha: str | None) -> str:
    return (sha or "")[:12] or "unknown"


def new_commits_notice(before: str | None, head: str, labels: list[str]) -> str:
    names = ", ".join(f"`{name}`" for name in labels)
    moved = f"head {short(before)} → {short(head)}" if before else f"head is now {short(head)}"
    return (
        f"New commits arrived ({moved}). A trigger label approves only the commit it was "
        f"applied to, so {names} was removed; results below are for the earlier head. A "
        "maintainer can re-apply the label to collect the new head."
    )


def lacks_permission_notice(label: str) -> str:
    return (
        f"`{label}` was removed: it was applied by an account without {REQUIRED_PERMISSION} "
        "permission on this repository, and only a maintainer's label approves running this "
        "pull request's code on a GPU runner."
    )


def _base(event: PullRequestEvent, **kw: Any) -> Plan:
    return Plan(
        event=event.event,
        action=event.action,
        repo=event.repo,
        pr=event.number,
        head_sha=event.head_sha,
        base_sha=event.base_sha,
        base_ref=event.base_ref,
        head_repo=event.head_repo,
        fork=event.fork,
        labeler=event.sender if event.action in ("labeled", "unlabeled") else None,
        **kw,
    )


def _skip(event: PullRequestEvent, code: str, reason: str, **kw: Any) -> Plan:
    """A plan that collects nothing, with its code and the reason the comment gives."""
    return _base(event, trigger=False, code=code, reason=reason, **kw)


def decide_event(
    event_name: str,
    event: PullRequestEvent | None,
    *,
    backends: tuple[str, ...],
    ops: tuple[str, ...],
) -> Plan | TriggerLabel:
    """The decision from the payload alone, or the trigger label that needs the API's facts."""
    if event_name not in PR_EVENTS or event is None:
        return Plan(
            trigger=False,
            code=NOT_A_PR_EVENT,
            reason=f"`{event_name}` events never trigger a collection; label a pull request.",
            event=event_name,
            action=event.action if event else "",
        )
    if event.action == "synchronize":
        labels = [name for name in event.labels if is_trigger_name(name)]
        if not labels:
            reason = f"new commits ({short(event.head_sha)}); no trigger label to drop."
            return _skip(event, NEW_COMMITS, reason)
        names = ", ".join(f"`{name}`" for name in labels)
        return _skip(
            event,
            NEW_COMMITS,
            f"new commits arrived (head is now {short(event.head_sha)}); a label approves "
            f"only the commit it was applied to, so {names} must be applied again.",
            remove_labels=labels,
            notice=new_commits_notice(event.before, event.head_sha, labels),
        )
    label = event.label
    trigger_label = label is not None and is_trigger_name(label)
    if event.action == "unlabeled" and trigger_label:
        reason = f"trigger label `{label}` was removed; nothing to collect."
        return _skip(event, LABEL_REMOVED, reason, label=label)
    if event.action not in ("labeled", "unlabeled"):
        reason = f"`{event.action}` does not trigger a collection; a maintainer's label does."
        return _skip(event, NOT_A_LABEL_EVENT, reason)
    if event.action == "unlabeled" or label is None or not trigger_label:
        reason = f"label `{label}` is not a trigger label (`collect/<backend>...`)."
        return _skip(event, UNRELATED_LABEL, reason, label=label)
    try:
        trigger = parse_label(label, backends=backends, ops=ops)
    except LabelError as exc:
        return _skip(event, BAD_LABEL, str(exc), label=label)
    assert trigger is not None
    if event.state != "open":
        reason = f"the pull request is {event.state}; nothing to collect."
        return _skip(event, PR_CLOSED, reason, label=label)
    return trigger


def permission_rank(permission: str) -> int:
    level = "write" if permission == "maintain" else permission
    return PERMISSIONS.index(level) if level in PERMISSIONS else 0


def decide_with_facts(event: PullRequestEvent, trigger: TriggerLabel, facts: Facts) -> Plan:
    common: dict[str, Any] = {
        "label": trigger.name,
        "backend": trigger.backend,
        "ops": list(trigger.ops),
        "case_set": trigger.case_set,
        "baseline": trigger.baseline,
        "labeler_permission": facts.labeler_permission,
    }
    who = f"{event.sender} ({facts.labeler_role or facts.labeler_permission})"
    if permission_rank(facts.labeler_permission) < permission_rank(REQUIRED_PERMISSION):
        return _skip(
            event,
            LABELER_LACKS_PERMISSION,
            f"`{trigger.name}` was applied by {who}; approving a collection needs "
            f"{REQUIRED_PERMISSION} permission or more, so the label was removed.",
            remove_labels=[trigger.name],
            notice=lacks_permission_notice(trigger.name),
            **common,
        )
    if facts.current_state != "open":
        reason = f"the pull request is {facts.current_state} now; nothing to collect."
        return _skip(event, PR_CLOSED, reason, **common)
    if trigger.name.lower() not in {name.lower() for name in facts.current_labels}:
        reason = f"`{trigger.name}` is no longer on the pull request; nothing to collect."
        return _skip(event, LABEL_GONE, reason, **common)
    if facts.current_head_sha != event.head_sha:
        return _skip(
            event,
            HEAD_MOVED,
            f"the head moved from {short(event.head_sha)} (labelled) to "
            f"{short(facts.current_head_sha)} since `{trigger.name}` was applied; the label "
            "approves only the labelled commit. Re-apply it to collect the new head.",
            **common,
        )
    origin = f"fork {event.head_repo or '(deleted)'}" if event.fork else "this repository"
    scope = ", ".join(trigger.ops) if trigger.ops else "the default ops"
    return _base(
        event,
        trigger=True,
        code=APPROVED,
        reason=(
            f"`{trigger.name}` applied by {who} approves head {short(event.head_sha)} from "
            f"{origin}: collect {trigger.backend} ({scope}, case set {trigger.case_set})."
        ),
        **common,
    )


def decide_dispatch(
    payload: dict[str, Any],
    head_sha: str,
    *,
    backends: tuple[str, ...],
    ops: tuple[str, ...],
) -> Plan:
    """A `workflow_dispatch` run: whoever may dispatch has write access, so it is approved;
    its inputs are checked with the label grammar, so both triggers mean the same thing."""
    inputs = payload.get("inputs") or {}
    repo = (payload.get("repository") or {}).get("full_name")
    sender = (payload.get("sender") or {}).get("login")
    ref = str(payload.get("ref") or "")
    common: dict[str, Any] = {
        "event": "workflow_dispatch",
        "action": "",
        "repo": repo,
        "head_sha": head_sha or None,
        "base_ref": ref or None,
        "labeler": sender,
    }

    def text(name: str, default: str = "") -> str:
        value = inputs.get(name)
        return default if value is None or str(value).strip() == "" else str(value).strip()

    scope = "+".join(w for w in text("ops").replace(",", "+").split("+") if w.strip())
    label = f"collect/{text('backend')}"
    label += f":{scope}" if scope else ""
    base = text("base") or None
    # `auto` (the default): paired when a `base` is given, else the stored baseline.
    baseline = text("baseline", "auto")
    if baseline.lower() == "auto":
        baseline = "paired" if base else "store"
    label += f"@{text('case_set', 'default')}~{baseline}"
    try:
        trigger = parse_label(label, backends=backends, ops=ops)
    except LabelError as exc:
        return Plan(trigger=False, code=BAD_INPUT, reason=str(exc), label=label, **common)
    assert trigger is not None
    if not head_sha:
        return Plan(
            trigger=False,
            code=BAD_INPUT,
            reason="workflow_dispatch: no commit to collect ($GITHUB_SHA is not set)",
            label=label,
            **common,
        )
    if trigger.baseline == "paired" and base is None:
        return Plan(
            trigger=False,
            code=BAD_INPUT,
            reason="workflow_dispatch: a paired run needs the `base` input (the ref to compare "
            "with)",
            label=label,
            **common,
        )
    scope_text = ", ".join(trigger.ops) if trigger.ops else "the default ops"
    return Plan(
        trigger=True,
        code=DISPATCHED,
        reason=(
            f"dispatched by {sender}: collect {trigger.backend} ({scope_text}, case set "
            f"{trigger.case_set}) at {short(head_sha)} of {ref or 'the default branch'}."
        ),
        label=None,
        backend=trigger.backend,
        ops=list(trigger.ops),
        case_set=trigger.case_set,
        baseline=trigger.baseline,
        base_sha=base,
        **common,
    )
