"""Approval, re-derived by the publisher from GitHub's own answers (never from a bundle).

A result bundle says `trigger: true, code: approved`, but the run that wrote it ran the pull
request's code (and, for `pull_request` runs, the PR's own workflow files), so the publisher
believes none of it. Before any comment or status it asks GitHub:

- a `pull_request` run: the PR's event log holds a trigger label (`collect/...`) applied by
  the run's actor (the account whose event started the run), at most `LABEL_TO_RUN` before
  GitHub created the run. The run's head SHA is GitHub's record of the PR head when that
  event fired, so the label was applied while the head was the measured commit;
- a `workflow_dispatch` run: its actor dispatched it;

and in both cases the actor has write permission or more now, looked up through the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.github.api import IssueEvent, PullRequest, RepoApi
from bot.github.events import WorkflowRunEvent
from bot.github.labels import is_trigger_name
from bot.github.plan import REQUIRED_PERMISSION, permission_rank
from collector.errors import UserError

# GitHub creates a run seconds after its event; a label older than this did not start it.
LABEL_TO_RUN = timedelta(minutes=10)
# Event and run timestamps come from different services: allow them to disagree a little.
CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True)
class Approval:
    actor: str
    permission: str
    label: str | None  # the approving trigger label (None for a dispatched run)


def _when(text: str, what: str) -> datetime:
    """GitHub's ISO 8601 time; one without a zone is UTC (so any two compare)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{what}: not a timestamp ({text!r:.40})") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def approving_label(
    events: list[IssueEvent], actor: str, run_created: datetime, prefer: str | None = None
) -> IssueEvent | None:
    """The trigger-label event by `actor` that started a run created at `run_created`: the
    one named `prefer` (the bundle's label, a hint only) if it fits, else the latest."""
    fits = []
    for event in events:
        if event.event != "labeled" or not event.label or not is_trigger_name(event.label):
            continue
        if event.actor.lower() != actor.lower():
            continue
        at = _when(event.created_at, "issue event created_at")
        if run_created - LABEL_TO_RUN <= at <= run_created + CLOCK_SKEW:
            fits.append(event)
    named = [e for e in fits if prefer and str(e.label).lower() == prefer.lower()]
    chosen = named or fits
    return chosen[-1] if chosen else None


def check_approval(
    api: RepoApi, pull: PullRequest, event: WorkflowRunEvent, hint: str | None = None
) -> Approval:
    """GitHub's evidence that a maintainer approved this run of this PR, or a one-line error."""
    refuse = f"run {event.run_id} of #{pull.number} at {event.head_sha[:12]}: not approved"
    if not event.actor:
        raise UserError(f"{refuse} (the workflow_run event names no actor)")
    if event.triggering_event == "pull_request":
        if not event.created_at:
            raise UserError(f"{refuse} (the workflow_run event has no created_at)")
        created = _when(event.created_at, "workflow_run.created_at")
        label = approving_label(api.issue_events(pull.number), event.actor, created, hint)
        if label is None:
            raise UserError(
                f"{refuse}: GitHub records no trigger label applied by {event.actor} when the "
                "run started; a bundle's word is not an approval"
            )
        applied: str | None = label.label
    elif event.triggering_event == "workflow_dispatch":
        applied = None
    else:
        raise UserError(f"{refuse}: a {event.triggering_event!r} run never approves a collection")
    permission, _ = api.permission(event.actor)
    if permission_rank(permission) < permission_rank(REQUIRED_PERMISSION):
        raise UserError(
            f"{refuse}: {event.actor} has {permission} permission; approving needs "
            f"{REQUIRED_PERMISSION}"
        )
    return Approval(actor=event.actor, permission=permission, label=applied)
