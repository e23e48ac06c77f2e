"""Webhook payloads, as Actions hands them over in `$GITHUB_EVENT_PATH`.

Everything here is read from a file that GitHub wrote, but much of it (branch names, titles,
label names) is chosen by people; only the sanitisers in `bot/render/sanitize.py` may put
such text into a comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector import jsonfile
from collector.errors import UserError
from collector.jsonfile import read_bytes

PR_EVENTS = ("pull_request", "pull_request_target")


@dataclass(frozen=True)
class PullRequestEvent:
    event: str  # pull_request or pull_request_target
    action: str
    number: int
    repo: str  # the base repository, owner/name
    state: str
    merged: bool
    draft: bool
    base_ref: str
    base_sha: str
    head_ref: str
    head_sha: str
    head_repo: str  # owner/name of the head repository ("" when it was deleted)
    fork: bool
    sender: str
    sender_type: str
    label: str | None  # the label of a labeled / unlabeled event
    labels: tuple[str, ...]  # labels on the PR when the event fired
    before: str | None  # synchronize: the previous head


@dataclass(frozen=True)
class WorkflowRunEvent:
    """A `workflow_run` event: the trusted publisher's view of a finished untrusted run."""

    action: str
    repo: str
    run_id: int
    workflow: str
    triggering_event: str
    conclusion: str | None
    head_sha: str
    head_repo: str
    head_branch: str
    # Empty for fork PRs, and never proof of anything: resolve the PR from head_sha instead.
    pull_requests: tuple[int, ...]
    html_url: str = ""  # the run's page (its artifacts are linked from there)
    # Who sent the event that started the run (the labeler, for a `labeled` pull_request
    # event) and when GitHub created the run: the publisher re-derives approval from these.
    actor: str = ""
    created_at: str = ""


def load_payload(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"{path}: event payload not found")
    data = jsonfile.loads(read_bytes(path), f"{path}: event payload")
    if not isinstance(data, dict):
        raise UserError(f"{path}: event payload must be a JSON object")
    return data


def infer_event_name(payload: dict[str, Any]) -> str:
    if "pull_request" in payload and "number" in payload:
        return "pull_request"
    if "workflow_run" in payload:
        return "workflow_run"
    if "inputs" in payload and "ref" in payload:
        return "workflow_dispatch"
    if "pusher" in payload and "ref" in payload:
        return "push"
    return "unknown"


class _Reader:
    """Field access that fails with the file and the dotted field name."""

    def __init__(self, source: str, data: dict[str, Any]) -> None:
        self.source = source
        self.data = data

    def get(self, dotted: str, typ: type | tuple[type, ...] = str, optional: bool = False) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node or node[part] is None:
                if optional:
                    return None
                raise UserError(f"{self.source}: missing field {dotted!r}")
            node = node[part]
        if not isinstance(node, typ) or (typ is int and isinstance(node, bool)):
            raise UserError(f"{self.source}: field {dotted!r} has unexpected value {node!r}")
        return node


def parse_pull_request_event(
    payload: dict[str, Any], event: str = "pull_request", source: str = "event payload"
) -> PullRequestEvent:
    r = _Reader(source, payload)
    repo = r.get("repository.full_name")
    head_repo = r.get("pull_request.head.repo.full_name", optional=True) or ""
    labels = tuple(
        str(lbl.get("name"))
        for lbl in r.get("pull_request.labels", list, optional=True) or []
        if isinstance(lbl, dict) and lbl.get("name")
    )
    label = r.get("label.name", optional=True)
    return PullRequestEvent(
        event=event,
        action=r.get("action"),
        number=r.get("number", int),
        repo=repo,
        state=r.get("pull_request.state"),
        merged=bool(r.get("pull_request.merged", bool, optional=True)),
        draft=bool(r.get("pull_request.draft", bool, optional=True)),
        base_ref=r.get("pull_request.base.ref"),
        base_sha=r.get("pull_request.base.sha"),
        head_ref=r.get("pull_request.head.ref"),
        head_sha=r.get("pull_request.head.sha"),
        head_repo=head_repo,
        # A deleted head repository can only have been a fork; a same-repo head is not one.
        fork=head_repo.lower() != repo.lower(),
        sender=r.get("sender.login"),
        sender_type=r.get("sender.type", optional=True) or "User",
        label=label,
        labels=labels,
        before=r.get("before", optional=True),
    )


def parse_workflow_run_event(
    payload: dict[str, Any], source: str = "event payload"
) -> WorkflowRunEvent:
    r = _Reader(source, payload)
    prs = r.get("workflow_run.pull_requests", list, optional=True) or []
    numbers = []
    for i, pr in enumerate(prs):
        number = pr.get("number") if isinstance(pr, dict) else None
        if not isinstance(number, int) or isinstance(number, bool):
            raise UserError(
                f"{source}: field 'workflow_run.pull_requests[{i}].number' has unexpected "
                f"value {number!r:.80}"
            )
        numbers.append(number)
    return WorkflowRunEvent(
        action=r.get("action"),
        repo=r.get("repository.full_name"),
        run_id=r.get("workflow_run.id", int),
        workflow=r.get("workflow_run.name", optional=True) or "",
        triggering_event=r.get("workflow_run.event"),
        conclusion=r.get("workflow_run.conclusion", optional=True),
        head_sha=r.get("workflow_run.head_sha"),
        head_repo=r.get("workflow_run.head_repository.full_name", optional=True) or "",
        head_branch=r.get("workflow_run.head_branch", optional=True) or "",
        pull_requests=tuple(numbers),
        html_url=r.get("workflow_run.html_url", optional=True) or "",
        actor=r.get("workflow_run.actor.login", optional=True) or "",
        created_at=r.get("workflow_run.created_at", optional=True) or "",
    )
