"""The fork-safe split: an untrusted job's bundle, the trusted publisher, the local server.

The collection side writes bundles (`bundle make`, `conclude`); the publishing side
(`publish --result --event`) verifies them, binds them to the finished run, resolves the PR
from the head SHA, renders with its own code and posts. Every tampering here must be refused
with one line and nothing written on the server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.render.comment import Marker
from bot.result_bundle import load_result
from bot.store import RunStore
from collector.caseplan import shard_of
from collector.errors import UserError
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.github_fixtures import HEAD, PR, REPO, finished_run, payload
from tests.github_server import GitHubServer

runner = CliRunner()
RUN_ID = 4242
LABEL = "collect/torch:gemm"
CASES = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32)]


def _plan(tmp: Path, sender: str, labels: list[str], gh: GitHubServer) -> Path:
    """A real plan decision, made by `collectbot plan --dry-run` on a recorded payload."""
    data = payload("pull_request.labeled")
    data["label"]["name"] = LABEL
    data["pull_request"]["labels"][0]["name"] = LABEL
    data["sender"]["login"] = sender
    for name in labels:
        gh.label(PR, name, sender)
    event = tmp / "labeled.json"
    event.write_text(json.dumps(data))
    out = tmp / "plan.json"
    result = runner.invoke(
        app,
        ["plan", "--event", str(event), "--out", str(out), "--dry-run", "--backends", "torch"],
    )
    assert result.exit_code == 0, result.output
    return out


def _event(tmp: Path, head: str = HEAD, run_id: int = RUN_ID, **run: Any) -> Path:
    data = finished_run(head, run_id, **run)
    path = tmp / "workflow_run.json"
    path.write_text(json.dumps(data))
    return path


def _make(tmp: Path, plan: Path, *extra: str, name: str = "bundle") -> Path:
    out = tmp / name
    result = runner.invoke(
        app,
        ["result", "make", "--plan", str(plan), "--out", str(out), "--run-id", str(RUN_ID), *extra],
    )
    assert result.exit_code == 0, result.output
    return out


def _publish(bundle: Path, event: Path, *extra: str) -> Any:
    return runner.invoke(app, ["publish", "--result", str(bundle), "--event", str(event), *extra])


def _records(tmp: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    base = write_record(tmp / "base", CASES, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp / "cand",
        CASES,
        lambda c: None if c is CASES[0] else simulated_runs(rng, 1.0),
        failures=[failure(CASES[0], "kernel exploded @octocat")],
    )
    return base, cand


def _comparison(tmp: Path, rng: np.random.Generator) -> Path:
    base, cand = _records(tmp, rng)
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp / "cmp")])
    assert result.exit_code == 0, result.output
    return tmp / "cmp"


def test_an_unapproved_label_is_removed_and_explained_by_the_publisher(
    gh: GitHubServer, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, "outsider", [LABEL], gh)
    assert json.loads(plan.read_text())["code"] == "labeler-lacks-permission"
    assert gh.requests("DELETE") == [] and gh.issue_comments(PR) == []  # the plan only decided
    bundle = _make(tmp_path, plan)
    assert load_result(bundle).kind == "skip"
    result = _publish(bundle, _event(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("notice: labeler-lacks-permission: removed collect/torch:gemm")
    assert gh.pulls[PR].labels == []
    [comment] = gh.issue_comments(PR)
    assert "was removed: it was applied by an account without write permission" in comment["body"]
    assert Marker.parse(comment["body"]) is not None
    # The permission was looked up again by the publisher, not taken from the bundle.
    assert len(gh.requests("GET", "collaborators/outsider/permission")) == 2


def test_a_bundle_that_lies_about_the_labeler_changes_nothing(
    gh: GitHubServer, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, "outsider", [LABEL], gh)
    data = json.loads(plan.read_text())
    data["labeler"] = "Codertocat"  # an admin: the label is legitimate
    plan.write_text(json.dumps(data))
    bundle = _make(tmp_path, plan)
    result = _publish(bundle, _event(tmp_path))
    assert result.exit_code == 2
    assert "says Codertocat lacks write permission, but GitHub says admin" in result.output
    assert gh.pulls[PR].labels == [LABEL] and gh.issue_comments(PR) == []


def test_a_comparison_bundle_becomes_one_sticky_comment_rendered_by_the_publisher(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    assert json.loads(plan.read_text())["trigger"] is True
    bundle = _make(tmp_path, plan, "--comparison", str(_comparison(tmp_path, rng)))
    assert load_result(bundle).kind == "comparison"
    event = _event(tmp_path)
    result = _publish(bundle, event)
    assert result.exit_code == 0, result.output
    [comment] = gh.issue_comments(PR)
    body = comment["body"]
    marker = Marker.parse(body)
    assert marker is not None and marker.head_sha == HEAD
    assert "❌" in body.split("\n")[1] and "new failure group" in body
    assert "@octocat" not in body  # the exception text is neutralised
    assert f"https://github.com/{REPO}/actions/runs/{RUN_ID}" in body
    assert gh.pulls[PR].labels == []  # the trigger label is consumed
    [status] = gh.statuses
    assert status["sha"] == HEAD and status["state"] == "failure"
    # The same bundle again: the comment is updated in place, not duplicated.
    result = _publish(bundle, event)
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1


def test_a_run_bundle_says_which_stage_failed(gh: GitHubServer, tmp_path: Path) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    bundle = _make(tmp_path, plan, "--stage", "merge", "--error", "no shard left a record (of 2)")
    result = _publish(bundle, _event(tmp_path))
    assert result.exit_code == 0, result.output
    [comment] = gh.issue_comments(PR)
    assert "collection failed in the merge stage" in comment["body"]
    assert "no shard left a record (of 2)" in comment["body"]
    assert gh.statuses[0]["state"] == "error"


@pytest.mark.parametrize(
    "tamper",
    ["edit", "extra", "missing", "schema", "run-id", "head", "plan-head", "pr", "repo", "name"],
)
def test_tampered_or_foreign_bundles_are_refused_and_nothing_is_written(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, tamper: str
) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    bundle = _make(tmp_path, plan, "--comparison", str(_comparison(tmp_path, rng)))
    meta_path = bundle / "bundle.json"
    meta = json.loads(meta_path.read_text())
    event = _event(tmp_path)
    expected = {
        "edit": "checksum mismatch",
        "extra": "not listed in bundle.json",
        "missing": "listed but missing",
        "schema": "comparison.json: verdict/level",
        "run-id": "workflow_run_id 4242 is not the finished run's 7",
        "head": f"head_sha '{HEAD}' is not the finished run's '{'3' * 40}'",
        "plan-head": f"plan.json: head_sha '{HEAD}' differs from bundle.json's",
        "pr": "names pull request #9, but head",
        "repo": "repo 'someone/else' is not the finished run's",
        "name": "bad file name",
    }[tamper]
    if tamper == "edit":
        raw = (bundle / "comparison.json").read_bytes()
        (bundle / "comparison.json").write_bytes(raw.replace(b'"collectbot"', b'"Collectbot"', 1))
    elif tamper == "extra":
        (bundle / "comment.md").write_text("<!-- collectbot ... --> pwned")
    elif tamper == "missing":
        (bundle / "comparison.json").unlink()
    elif tamper in ("schema", "pr"):
        name = "comparison.json" if tamper == "schema" else "plan.json"
        data = json.loads((bundle / name).read_text())
        if tamper == "schema":
            data["verdict"]["level"] = "purple"
        else:
            data["pr"] = 9
        (bundle / name).write_text(json.dumps(data))
        import hashlib

        raw = (bundle / name).read_bytes()
        meta["files"][name] = {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
        meta_path.write_text(json.dumps(meta))
    elif tamper == "run-id":
        event = _event(tmp_path, run_id=7)
    elif tamper == "head":
        event = _event(tmp_path, head="3" * 40)  # another head's run finished
    elif tamper == "plan-head":
        meta["head_sha"] = "3" * 40  # relabelled as another head's bundle
        meta_path.write_text(json.dumps(meta))
        event = _event(tmp_path, head="3" * 40)
    elif tamper == "repo":
        meta["repo"] = "someone/else"
        meta_path.write_text(json.dumps(meta))
    elif tamper == "name":
        meta["files"]["../escape"] = meta["files"]["plan.json"]
        meta_path.write_text(json.dumps(meta))
    result = _publish(bundle, event)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and expected in result.output, result.output
    assert gh.issue_comments(PR) == [] and gh.statuses == [] and gh.pulls[PR].labels == [LABEL]


def test_no_bundle_and_no_pull_request(gh: GitHubServer, tmp_path: Path) -> None:
    event = _event(tmp_path)
    result = _publish(tmp_path / "absent", event, "--if-present")
    assert result.exit_code == 0 and "no result at" in result.output
    result = _publish(tmp_path / "absent", event)
    assert result.exit_code == 2 and "bundle directory not found" in result.output
    # A skip bundle of a run no open PR has (e.g. a closed one): nothing to do.
    plan = _plan(tmp_path, "outsider", [LABEL], gh)
    data = json.loads(plan.read_text())
    data["pr"] = None
    plan.write_text(json.dumps(data))
    gh.pulls[PR].state = "closed"
    result = _publish(_make(tmp_path, plan), event)
    assert result.exit_code == 0 and result.output.startswith("nothing:"), result.output
    assert gh.issue_comments(PR) == []


def test_bundle_verify_command(gh: GitHubServer, tmp_path: Path) -> None:
    bundle = _make(tmp_path, _plan(tmp_path, "outsider", [LABEL], gh))
    result = runner.invoke(app, ["result", "verify", str(bundle), "--event", str(_event(tmp_path))])
    assert result.exit_code == 0 and result.output.startswith("ok: skip bundle of"), result.output
    result = runner.invoke(
        app, ["result", "verify", str(bundle), "--event", str(_event(tmp_path, run_id=5))]
    )
    assert result.exit_code == 2 and "refusing a bundle of another run" in result.output


def test_bundle_make_refuses_what_the_publisher_would(tmp_path: Path, gh: GitHubServer) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    bad = tmp_path / "bad-cmp"
    bad.mkdir()
    (bad / "comparison.json").write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(UserError, match="required property"):
        from bot.result_bundle import make_result

        make_result(tmp_path / "b", plan_path=plan, workflow_run_id=1, comparison=bad)
    data = json.loads(plan.read_text())
    data["head_sha"] = "main"
    plan.write_text(json.dumps(data))
    result = runner.invoke(
        app, ["result", "make", "--plan", str(plan), "--out", str(tmp_path / "c"), "--run-id", "1"]
    )
    assert result.exit_code == 2 and "is not a 40-digit commit SHA" in result.output


def run_conclude(tmp_path: Path, plan: Path, store: str, out: Path) -> Any:
    """`collectbot conclude` of the two shards under tmp_path/shards; it must succeed."""
    result = runner.invoke(
        app,
        [
            *("conclude", "--plan", str(plan), "--shards-dir", str(tmp_path / "shards")),
            *("--shards", "2", "--store", store, "--out", str(out), "--run-id", str(RUN_ID)),
        ],
    )
    assert result.exit_code == 0, result.output
    return result


def _shard(tmp: Path, rng: np.random.Generator, index: int, n: int = 2) -> Path:
    mine = [c for c in CASES if shard_of(c.key, n) == index]
    return write_record(
        tmp / "shards" / f"shard-{index}",
        mine,
        lambda c: simulated_runs(rng, 1.0),
        meta_extra={"shard": [index, n], "run_id": f"s{index}"},
    )


def test_conclude_merges_compares_with_the_store_and_bundles(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    store = str(tmp_path / "store")
    base = write_record(tmp_path / "base", CASES, lambda c: simulated_runs(rng, 1.0))
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    base_ref = json.loads(plan.read_text())["base_ref"]
    # The baseline is the one stored under the PR's base branch, not any other branch's.
    other = write_record(tmp_path / "other", CASES, lambda c: simulated_runs(rng, 1.0))
    RunStore(store).put(base, ref=base_ref)
    RunStore(store).put(other, ref="release-1.0")
    for i in (1, 2):
        _shard(tmp_path, rng, i)
    out = tmp_path / "concluded"
    result = run_conclude(tmp_path, plan, store, out)
    assert "merged 2 of 2 shards" in result.output
    assert load_result(out / "result").kind == "comparison"
    assert (out / "report.html").is_file() and (out / "comment.md").is_file()
    cmp = json.loads((out / "comparison" / "comparison.json").read_text())
    assert cmp["baseline"]["kind"] == "previous-run" and cmp["baseline"]["store"]["url"] == store
    assert cmp["baseline"]["run_id"] == "base"
    result = _publish(out / "result", _event(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1


@pytest.mark.parametrize("case", ["no-shards", "no-store", "no-baseline", "seen-error"])
def test_conclude_turns_every_failing_stage_into_a_run_bundle(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, case: str
) -> None:
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    (tmp_path / "shards").mkdir()
    if case != "no-shards":
        _shard(tmp_path, rng, 1)
    args = ["conclude", "--plan", str(plan), "--shards-dir", str(tmp_path / "shards")]
    args += ["--shards", "2", "--out", str(tmp_path / "o"), "--run-id", str(RUN_ID)]
    if case != "no-store":
        args += ["--store", str(tmp_path / "empty-store")]
    if case == "seen-error":
        args += ["--error", "shard job 2 was cancelled"]
    result = runner.invoke(app, args, env={"COLLECTBOT_STORE": ""})
    assert result.exit_code == 0, result.output
    bundle = load_result(tmp_path / "o" / "result")
    assert bundle.kind == "run"
    expected = {
        "no-shards": ("merge", "no shard left a record (of 2)"),
        "no-store": ("compare", "no run store configured"),
        "no-baseline": ("compare", "no stored run for torch"),
        "seen-error": (None, "shard job 2 was cancelled"),
    }[case]
    assert bundle.meta["stage"] == expected[0]
    assert expected[1] in bundle.meta["error"]
    has_run = (tmp_path / "o" / "result" / "run" / "run.json").is_file()
    assert has_run == (case in ("no-store", "no-baseline"))
    result = _publish(tmp_path / "o" / "result", _event(tmp_path))
    assert result.exit_code == 0, result.output
    [comment] = gh.issue_comments(PR)
    assert expected[1] in comment["body"]
    shutil.rmtree(tmp_path / "o")


def test_the_baseline_ref_follows_the_pull_requests_base_branch() -> None:
    from bot.conclude import baseline_ref_for

    assert baseline_ref_for({"event": "pull_request", "base_ref": "release-2"}, None) == "release-2"
    assert baseline_ref_for({"event": "pull_request", "base_ref": "release-2"}, "main") == "main"
    dispatched = {"event": "workflow_dispatch", "base_ref": "refs/heads/feature"}
    assert baseline_ref_for(dispatched, None) == "main"
    assert baseline_ref_for({}, None) == "main"


def _forged_approval(tmp: Path, gh: GitHubServer, rng: np.random.Generator) -> Path:
    """What a hostile run uploads: a plan rewritten to `trigger: true, code: approved`."""
    plan = _plan(tmp, "outsider", [], gh)
    data = json.loads(plan.read_text())
    data.update(trigger=True, code="approved", label=LABEL, remove_labels=[], notice=None)
    plan.write_text(json.dumps(data))
    return _make(tmp, plan, "--comparison", str(_comparison(tmp, rng)), name="forged")


@pytest.mark.parametrize("how", ["no-label", "reader-label", "old-label", "other-actor"])
def test_a_bundle_claiming_approval_is_checked_against_github(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, how: str
) -> None:
    """Attack 5: the bundle says approved; GitHub's event log and permissions say otherwise."""
    from datetime import datetime, timedelta

    bundle = _forged_approval(tmp_path, gh, rng)
    actor = "outsider"
    if how == "reader-label":  # a read-only account labels its own run
        gh.label(PR, LABEL, "outsider")
    elif how == "old-label":  # a maintainer's label from before the head moved
        gh.label(PR, LABEL, "Codertocat")
        actor = "Codertocat"
        gh._clock += timedelta(hours=2)
    elif how == "other-actor":  # a maintainer labelled; the run is another writer's push
        gh.label(PR, LABEL, "Codertocat")
        gh.permissions["pusher"] = ("write", "write")
        actor = "pusher"
    created = (gh._clock + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    data = finished_run(HEAD, RUN_ID, actor=actor)
    data["workflow_run"]["created_at"] = created
    event = tmp_path / "run.json"
    event.write_text(json.dumps(data))
    assert datetime.fromisoformat(created) > gh._clock
    result = _publish(bundle, event)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: run 4242 of #2 at ") and "not approved" in result.output
    assert gh.issue_comments(PR) == [] and gh.statuses == []
    # The same bundle, once a maintainer's label did start the run, is published.
    gh.label(PR, LABEL, "Codertocat")
    data["workflow_run"]["actor"]["login"] = "Codertocat"
    data["workflow_run"]["created_at"] = gh.now()
    event.write_text(json.dumps(data))
    result = _publish(bundle, event)
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1 and gh.statuses[0]["state"] == "failure"


def test_a_second_pull_request_on_the_same_commit_neither_blocks_nor_receives(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """Attack 6: someone opens a PR from their fork with the victim's head SHA."""
    from tests.github_server import PullState

    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    bundle = _make(tmp_path, plan, "--comparison", str(_comparison(tmp_path, rng)))
    decoy = PullState(
        number=66, head_sha=HEAD, base_sha=gh.pulls[PR].base_sha, head_repo="mallory/Hello-World"
    )
    gh.add_pull(decoy)
    result = _publish(bundle, _event(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1 and gh.issue_comments(66) == []
    # Still ambiguous after the head repository and branch (one branch, two bases, and no
    # PR list from GitHub to choose): refused, nothing written.
    twin = PullState(
        number=67, head_sha=HEAD, base_sha="9" * 40, head_repo=REPO, base_ref="release-1"
    )
    gh.add_pull(twin)
    before = len(gh.requests("POST")) + len(gh.requests("PATCH"))
    result = _publish(bundle, _event(tmp_path))
    assert result.exit_code == 2 and "more than one open pull request" in result.output
    assert len(gh.requests("POST")) + len(gh.requests("PATCH")) == before
    # GitHub's own list of the run's PRs settles it.
    result = _publish(bundle, _event(tmp_path, pull_requests=[PR]))
    assert result.exit_code == 0, result.output
    assert gh.issue_comments(67) == []


def test_approving_label_reads_the_event_log_as_github_writes_it() -> None:
    """The pure rule: the run's actor's trigger label, just before the run was created."""
    from datetime import UTC, datetime

    from bot.github.api import IssueEvent
    from bot.github.approval import approving_label

    created = datetime(2026, 11, 30, 12, 10, tzinfo=UTC)
    events = [
        IssueEvent("labeled", "Codertocat", "collect/torch", "2026-11-30T11:50:00Z"),  # old
        IssueEvent("labeled", "Codertocat", "bug", "2026-11-30T12:09:00Z"),  # not a trigger
        IssueEvent("unlabeled", "Codertocat", "collect/torch", "2026-11-30T12:09:10Z"),
        IssueEvent("labeled", "someone", "collect/vllm", "2026-11-30T12:09:20Z"),  # not the actor
        IssueEvent("labeled", "codertocat", "collect/torch:gemm", "2026-11-30T12:09:30"),
        IssueEvent("labeled", "Codertocat", "collect/vllm", "2026-11-30T12:09:40Z"),
        IssueEvent("labeled", "Codertocat", "collect/torch", "2026-11-30T12:12:00Z"),  # after
    ]
    found = approving_label(events, "Codertocat", created)
    assert found is not None and found.label == "collect/vllm"  # the latest that fits
    hinted = approving_label(events, "Codertocat", created, prefer="COLLECT/torch:gemm")
    assert hinted is not None and hinted.label == "collect/torch:gemm"  # a hint, if it fits
    assert approving_label(events, "Codertocat", created, prefer="collect/torch") == found
    assert approving_label(events, "someone-else", created) is None
    assert approving_label(events[:4], "Codertocat", created) is None
