"""Property tests: webhook payloads, the label grammar and the plan decision.

A payload is partly written by people (labels, branch names, titles) and a workflow may be
handed a damaged or crafted one. For any payload derived from GitHub's recorded ones (a field
dropped, retyped or replaced): parsing gives an event or a one-line `UserError` naming the
file and the field, never another exception. For any parsed event and any facts the API
could return, the decision is made without an exception, and a collection is approved only
when every control holds: a trigger label, applied by write permission or more, still on an
open PR, whose head is the labelled commit.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.github.events import (
    PullRequestEvent,
    parse_pull_request_event,
    parse_workflow_run_event,
)
from bot.github.labels import LabelError, TriggerLabel, parse_label
from bot.github.plan import (
    APPROVED,
    PERMISSIONS,
    REQUIRED_PERMISSION,
    Facts,
    Plan,
    decide_event,
    decide_with_facts,
    permission_rank,
)
from collector.errors import UserError
from tests.github_fixtures import payload
from tests.hostile import hostile_text, json_values

BACKENDS = ("torch", "vllm")
OPS = ("context_attention", "gemm", "generation_attention")
SOURCE = "event.json"


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


RECORDED = {
    name: payload(name)
    for name in (
        "pull_request.labeled",
        "pull_request.unlabeled",
        "pull_request.synchronize",
        "pull_request.opened",
        "workflow_run.completed",
    )
}
# The recorded workflow_run is a fork's (no pull_requests); a same-repo one lists its PR.
RECORDED["workflow_run.same_repo"] = copy.deepcopy(RECORDED["workflow_run.completed"])
RECORDED["workflow_run.same_repo"]["workflow_run"]["pull_requests"] = [
    {
        "id": 1,
        "number": 2,
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2",
        "head": {"ref": "changes", "sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821"},
        "base": {"ref": "master", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"},
    }
]
PATHS = {name: _paths(data) for name, data in RECORDED.items()}


# Fields the parsers read: half of the damage goes there, the rest anywhere.
READ = {
    "pull_request": [
        ("action",), ("number",), ("repository", "full_name"), ("pull_request", "state"),
        ("pull_request", "merged"), ("pull_request", "draft"), ("pull_request", "base", "ref"),
        ("pull_request", "base", "sha"), ("pull_request", "head", "ref"),
        ("pull_request", "head", "sha"), ("pull_request", "head", "repo"),
        ("pull_request", "head", "repo", "full_name"), ("pull_request", "labels"),
        ("pull_request", "labels", 0), ("pull_request", "labels", 0, "name"), ("label",),
        ("label", "name"), ("sender", "login"), ("sender", "type"), ("before",),
        ("pull_request",), ("repository",),
    ],
    "workflow_run": [
        ("action",), ("repository", "full_name"), ("workflow_run", "id"),
        ("workflow_run", "name"), ("workflow_run", "event"), ("workflow_run", "conclusion"),
        ("workflow_run", "head_sha"), ("workflow_run", "head_repository", "full_name"),
        ("workflow_run", "head_branch"), ("workflow_run", "pull_requests"),
        ("workflow_run", "pull_requests", 0), ("workflow_run", "pull_requests", 0, "number"),
        ("workflow_run",),
    ],
}  # fmt: skip


@st.composite
def damaged(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A recorded payload with a few fields dropped or replaced by any JSON value."""
    data = copy.deepcopy(RECORDED[name])
    read = [p for p in READ[name.split(".")[0]] if p in PATHS[name]]
    for _ in range(draw(st.integers(1, 3))):
        anywhere = draw(st.integers(0, 4)) == 0
        path = draw(st.sampled_from(PATHS[name] if anywhere else read))
        node: Any = data
        try:
            for part in path[:-1]:
                node = node[part]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed or retyped the parent
    return data


def _one_line(exc: UserError) -> None:
    message = str(exc)
    assert message.startswith(f"{SOURCE}: ") and "\n" not in message, message


@settings(max_examples=300)
@given(name=st.sampled_from([n for n in RECORDED if n.startswith("pull_request")]), data=st.data())
def test_any_damaged_pull_request_payload_parses_or_is_one_line(
    name: str, data: st.DataObject
) -> None:
    event_payload = data.draw(damaged(name))
    try:
        event = parse_pull_request_event(event_payload, "pull_request", SOURCE)
    except UserError as exc:
        _one_line(exc)
        return
    assert isinstance(event.number, int) and not isinstance(event.number, bool)
    for value in (event.action, event.repo, event.head_sha, event.base_sha, event.sender):
        assert isinstance(value, str)
    assert all(isinstance(label, str) for label in event.labels)
    decision = decide_event("pull_request", event, backends=BACKENDS, ops=OPS)
    assert isinstance(decision, Plan | TriggerLabel)
    if isinstance(decision, Plan):
        assert decision.trigger is False  # the payload alone never approves a collection


@settings(max_examples=300)
@given(name=st.sampled_from(["workflow_run.completed", "workflow_run.same_repo"]), data=st.data())
def test_any_damaged_workflow_run_payload_parses_or_is_one_line(
    name: str, data: st.DataObject
) -> None:
    event_payload = data.draw(damaged(name))
    try:
        event = parse_workflow_run_event(event_payload, SOURCE)
    except UserError as exc:
        _one_line(exc)
        return
    assert isinstance(event.head_sha, str) and isinstance(event.run_id, int)
    assert all(isinstance(n, int) and not isinstance(n, bool) for n in event.pull_requests)


@settings(max_examples=300)
@given(payload_value=json_values)
def test_any_json_value_as_a_payload_is_handled(payload_value: Any) -> None:
    for parse in (
        lambda p: parse_pull_request_event(p, "pull_request", SOURCE),
        lambda p: parse_workflow_run_event(p, SOURCE),
    ):
        try:
            parse(payload_value if isinstance(payload_value, dict) else {"x": payload_value})
        except UserError as exc:
            _one_line(exc)


backend_word = st.sampled_from([*BACKENDS, "Torch", "VLLM", "nope", "", "torch "])
scope_word = st.sampled_from([*OPS, "attention", "GEMM", "bogus", ""])


@settings(max_examples=500)
@given(
    name=st.one_of(
        hostile_text,
        st.builds(
            lambda pre, b, scopes, cs: f"{pre}{b}{':' + '+'.join(scopes) if scopes else ''}{cs}",
            st.sampled_from(["collect/", "COLLECT/", " collect/", "Collect/", "collec/"]),
            backend_word,
            st.lists(scope_word, max_size=3),
            st.sampled_from(["", "@smoke", "@default", "@", "@bad set", "@x@y"]),
        ),
    )
)
def test_any_label_is_a_trigger_a_clear_refusal_or_not_ours(name: str) -> None:
    try:
        trigger = parse_label(name, backends=BACKENDS, ops=OPS)
    except LabelError as exc:
        assert name.strip().lower().startswith("collect/")
        assert str(exc).startswith("label ") and "\n" not in str(exc).replace(name, "")
        return
    if trigger is None:
        assert not name.strip().lower().startswith("collect/")
        return
    assert trigger.backend in BACKENDS
    assert set(trigger.ops) <= set(OPS) and len(set(trigger.ops)) == len(trigger.ops)
    assert trigger.case_set and trigger.case_set == trigger.case_set.lower()
    # The canonical spelling of what it selects parses back to the same selection.
    canonical = f"collect/{trigger.backend}"
    canonical += (":" + "+".join(trigger.ops)) if trigger.ops else ""
    canonical += f"@{trigger.case_set}"
    again = parse_label(canonical, backends=BACKENDS, ops=OPS)
    assert again is not None
    assert (again.backend, again.ops, again.case_set) == (
        trigger.backend,
        trigger.ops,
        trigger.case_set,
    )


@st.composite
def labeled_events(draw: st.DrawFn) -> PullRequestEvent:
    data = copy.deepcopy(RECORDED["pull_request.labeled"])
    label = draw(st.sampled_from(["collect/torch", "collect/vllm:gemm@smoke", "Collect/Torch"]))
    data["label"]["name"] = label
    data["pull_request"]["labels"] = [{"name": label}]
    data["pull_request"]["state"] = draw(st.sampled_from(["open", "closed"]))
    data["pull_request"]["head"]["sha"] = draw(st.sampled_from(["a" * 40, "b" * 40]))
    data["sender"]["login"] = draw(st.sampled_from(["maintainer", "outsider"]))
    return parse_pull_request_event(data, "pull_request", SOURCE)


facts_strategy = st.builds(
    Facts,
    labeler_permission=st.sampled_from([*PERMISSIONS, "maintain", "triage", "", "ADMIN"]),
    labeler_role=st.one_of(st.none(), st.sampled_from(["admin", "triage", "read"])),
    current_head_sha=st.sampled_from(["a" * 40, "b" * 40, ""]),
    current_state=st.sampled_from(["open", "closed"]),
    current_labels=st.lists(
        st.sampled_from(["collect/torch", "COLLECT/TORCH", "collect/vllm:gemm@smoke", "bug"]),
        max_size=3,
    ).map(tuple),
)


@settings(max_examples=1000)
@given(event=labeled_events(), facts=facts_strategy)
def test_a_collection_is_approved_only_when_every_control_holds(
    event: PullRequestEvent, facts: Facts
) -> None:
    decision = decide_event("pull_request", event, backends=BACKENDS, ops=OPS)
    if isinstance(decision, Plan):
        assert not decision.trigger
        return
    plan = decide_with_facts(event, decision, facts)
    controls = (
        permission_rank(facts.labeler_permission) >= permission_rank(REQUIRED_PERMISSION),
        facts.current_state == "open",
        decision.name.lower() in {name.lower() for name in facts.current_labels},
        facts.current_head_sha == event.head_sha,
    )
    assert plan.trigger == all(controls), (plan.code, controls)
    assert (plan.code == APPROVED) == plan.trigger
    if plan.trigger:
        assert plan.head_sha == event.head_sha  # exactly the labelled commit
    if not controls[0]:
        assert plan.remove_labels == [decision.name]  # a refused label does not linger
