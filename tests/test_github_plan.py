"""plan over GitHub's recorded webhook payloads, against the local server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.github.labels import LabelError, parse_label
from tests.github_fixtures import BOT_TOKEN, DATA, HEAD, PR, payload
from tests.github_server import GitHubServer

runner = CliRunner()
BACKENDS = ("torch", "vllm")
OPS = ("context_attention", "gemm", "generation_attention")
TRIGGER = "collect/torch:gemm"
WEBHOOK_SCHEMA = json.loads((DATA / "webhook-schema-subset.json").read_text())


def check_payload(data: dict[str, Any], event: str) -> None:
    """A payload derived in a test must still be a valid event under GitHub's own schema."""
    schema = {**WEBHOOK_SCHEMA, "$ref": f"#/definitions/{event}"}
    jsonschema.Draft7Validator(schema).validate(data)


def labeled(
    label: str = TRIGGER, sender: str = "Codertocat", fork: str | None = None
) -> dict[str, Any]:
    data = payload("pull_request.labeled")
    data["label"]["name"] = label
    data["pull_request"]["labels"][0]["name"] = label
    data["sender"]["login"] = sender
    if fork:
        owner = fork.split("/")[0]
        repo = data["pull_request"]["head"]["repo"]
        repo.update(full_name=fork, fork=True, name=fork.split("/")[1])
        repo["owner"]["login"] = owner
        data["pull_request"]["head"]["label"] = f"{owner}:changes"
        data["pull_request"]["head"]["user"]["login"] = owner
    check_payload(data, "pull_request$labeled")
    return data


def run_plan(tmp_path: Path, data: dict[str, Any], *extra: str) -> tuple[dict[str, Any], str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(data))
    out = tmp_path / "plan.json"
    result = runner.invoke(
        app,
        [
            "plan",
            "--event",
            str(event),
            "--event-name",
            "pull_request",
            "--out",
            str(out),
            "--backends",
            ",".join(BACKENDS),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.output


def test_the_recorded_payloads_are_valid_events() -> None:
    for name in ("labeled", "unlabeled", "synchronize", "opened"):
        check_payload(payload(f"pull_request.{name}"), f"pull_request${name}")


def test_trigger_label_on_a_same_repo_pr(gh: GitHubServer, tmp_path: Path) -> None:
    gh.pulls[PR].labels = [TRIGGER]
    plan, output = run_plan(tmp_path, labeled())
    assert plan["trigger"] is True and plan["code"] == "approved"
    assert plan["backend"] == "torch" and plan["ops"] == ["gemm"] and plan["case_set"] == "default"
    assert plan["head_sha"] == HEAD and plan["fork"] is False and plan["pr"] == PR
    assert plan["labeler_permission"] == "admin"
    assert output.startswith("collect (approved): `collect/torch:gemm` applied by Codertocat")


def test_trigger_label_on_a_fork_pr(gh: GitHubServer, tmp_path: Path) -> None:
    gh.pulls[PR].labels = ["collect/vllm:attention@smoke"]
    gh.pulls[PR].head_repo = "contributor/Hello-World"
    plan, output = run_plan(
        tmp_path, labeled("collect/vllm:attention@smoke", fork="contributor/Hello-World")
    )
    assert plan["trigger"] is True and plan["fork"] is True
    assert plan["head_repo"] == "contributor/Hello-World" and plan["head_sha"] == HEAD
    assert plan["ops"] == ["context_attention", "generation_attention"]
    assert plan["case_set"] == "smoke"
    assert "from fork contributor/Hello-World" in output


def test_an_unrelated_label(gh: GitHubServer, tmp_path: Path) -> None:
    plan, _ = run_plan(tmp_path, payload("pull_request.labeled"))
    assert plan["trigger"] is False and plan["code"] == "unrelated-label"
    assert "`bug` is not a trigger label" in plan["reason"]
    assert gh.log == []  # decided from the payload alone: no API call


def test_an_unlabeled_event(gh: GitHubServer, tmp_path: Path) -> None:
    data = payload("pull_request.unlabeled")
    data["label"]["name"] = TRIGGER
    check_payload(data, "pull_request$unlabeled")
    plan, _ = run_plan(tmp_path, data)
    assert plan["trigger"] is False and plan["code"] == "label-removed"
    plan, _ = run_plan(tmp_path, payload("pull_request.unlabeled"))
    assert plan["code"] == "unrelated-label"


def test_synchronize_after_labelling_drops_the_label_and_says_why(
    gh: GitHubServer, tmp_path: Path
) -> None:

    data = payload("pull_request.synchronize")
    data["pull_request"]["labels"][0]["name"] = TRIGGER
    check_payload(data, "pull_request$synchronize")
    gh.pulls[PR].labels = [TRIGGER, "bug"]
    # An earlier evidence comment exists: the explanation goes into it.
    evidence = '<!-- collectbot {"backend": "torch", "gpu": "H200", "head_sha": "old", "run_id": "r1", "started_at": "2026-11-29T00:00:00+00:00"} -->\n## ✅ collectbot: 10 unchanged\n'
    cid = gh.add_comment(PR, evidence, BOT_TOKEN)
    plan, output = run_plan(tmp_path, data)
    assert plan["trigger"] is False and plan["code"] == "new-commits"
    assert plan["remove_labels"] == [TRIGGER]
    assert plan["applied"] == {"labels_removed": [TRIGGER], "comments_written": [cid]}
    assert gh.pulls[PR].labels == ["bug"]
    body = gh.comments[cid]["body"]
    assert body.startswith(evidence.splitlines()[0] + "\n> [!CAUTION]\n> New commits arrived")
    assert "collect/torch:gemm" in body and "## ✅ collectbot: 10 unchanged" in body
    # Replaying the event changes nothing more.
    gh.pulls[PR].labels = ["bug"]
    plan, _ = run_plan(tmp_path, data)
    assert plan["applied"] == {"labels_removed": [], "comments_written": []}
    assert "new commits arrived" in output


def test_synchronize_without_an_earlier_comment_posts_a_notice(
    gh: GitHubServer, tmp_path: Path
) -> None:
    data = payload("pull_request.synchronize")
    data["pull_request"]["labels"][0]["name"] = TRIGGER
    gh.pulls[PR].labels = [TRIGGER]
    run_plan(tmp_path, data)
    [notice] = gh.issue_comments(PR)
    assert notice["body"].splitlines()[0].startswith("<!-- collectbot ")
    assert '"gpu": "*"' in notice["body"].splitlines()[0]
    assert gh.pulls[PR].labels == []


def test_dry_run_makes_no_writes(gh: GitHubServer, tmp_path: Path) -> None:
    data = payload("pull_request.synchronize")
    data["pull_request"]["labels"][0]["name"] = TRIGGER
    gh.pulls[PR].labels = [TRIGGER]
    plan, _ = run_plan(tmp_path, data, "--dry-run")
    assert plan["remove_labels"] == [TRIGGER] and "applied" not in plan
    assert gh.log == [] and gh.pulls[PR].labels == [TRIGGER]


@pytest.mark.parametrize(
    ("permission", "role"), [("read", "triage"), ("read", "read"), ("none", "none")]
)
def test_a_labeler_without_write_access_is_refused(
    gh: GitHubServer, tmp_path: Path, permission: str, role: str
) -> None:
    gh.permissions["triager"] = (permission, role)
    gh.pulls[PR].labels = [TRIGGER]
    plan, output = run_plan(tmp_path, labeled(sender="triager"))
    assert plan["trigger"] is False and plan["code"] == "labeler-lacks-permission"
    assert plan["labeler"] == "triager" and plan["labeler_permission"] == permission
    assert "needs write permission" in output
    assert gh.pulls[PR].labels == []  # not an approval: removed, with a notice
    assert len(gh.issue_comments(PR)) == 1


def test_maintain_and_write_roles_may_approve(gh: GitHubServer, tmp_path: Path) -> None:
    gh.permissions["maintainer2"] = ("write", "maintain")
    gh.pulls[PR].labels = [TRIGGER]
    plan, _ = run_plan(tmp_path, labeled(sender="maintainer2"))
    assert plan["trigger"] is True


def test_a_head_that_moved_since_labelling_is_refused(gh: GitHubServer, tmp_path: Path) -> None:
    gh.pulls[PR].labels = [TRIGGER]
    gh.pulls[PR].head_sha = "1" * 40
    plan, _ = run_plan(tmp_path, labeled())
    assert plan["trigger"] is False and plan["code"] == "head-moved"
    assert HEAD[:12] in plan["reason"] and "111111111111" in plan["reason"]


def test_a_label_removed_before_the_plan_ran(gh: GitHubServer, tmp_path: Path) -> None:
    plan, _ = run_plan(tmp_path, labeled())
    assert plan["code"] == "label-gone"


def test_a_malformed_trigger_label_is_reported(gh: GitHubServer, tmp_path: Path) -> None:
    plan, _ = run_plan(tmp_path, labeled("collect/vllm:conv"))
    assert plan["code"] == "bad-label" and "unknown op or op family 'conv'" in plan["reason"]
    plan, _ = run_plan(tmp_path, labeled("collect/tensorrt"))
    assert plan["code"] == "bad-label" and "unknown backend 'tensorrt'" in plan["reason"]


def test_github_output_carries_the_decision(
    gh: GitHubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    gh.pulls[PR].labels = [TRIGGER]
    plan, _ = run_plan(tmp_path, labeled())
    text = output.read_text()
    assert "trigger=true\n" in text and f"head_sha={HEAD}\n" in text and "ops=gemm\n" in text
    blob = text.split("plan<<", 1)[1].split("\n")[1]
    assert json.loads(blob) == plan


def test_other_events_never_trigger(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload("workflow_run.completed")))
    out = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", "--event", str(event), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["code"] == "not-a-pull-request-event"
    result = runner.invoke(
        app, ["plan", "--event", str(event), "--event-name", "pull_request", "--out", str(out)]
    )
    assert result.exit_code == 2 and "event.json: missing field 'number'" in result.output


@pytest.mark.parametrize(
    ("label", "backend", "ops", "case_set"),
    [
        ("collect/vllm", "vllm", (), "default"),
        ("Collect/VLLM:GEMM", "vllm", ("gemm",), "default"),
        (
            "collect/vllm:gemm+attention",
            "vllm",
            ("gemm", "context_attention", "generation_attention"),
            "default",
        ),
        (
            "collect/torch:gemm,context_attention@smoke",
            "torch",
            ("gemm", "context_attention"),
            "smoke",
        ),
        ("collect/vllm:gemm~paired", "vllm", ("gemm",), "default"),
        ("collect/vllm@smoke~Paired", "vllm", (), "smoke"),
        ("collect/vllm:gemm~store", "vllm", ("gemm",), "default"),
        ("collect/torch@smoke~Store", "torch", (), "smoke"),
    ],
)
def test_label_grammar(label: str, backend: str, ops: tuple[str, ...], case_set: str) -> None:
    parsed = parse_label(label, backends=BACKENDS, ops=OPS)
    assert parsed is not None
    assert (parsed.backend, parsed.ops, parsed.case_set) == (backend, ops, case_set)
    # Paired (same GPU by construction) unless the label opts into the stored baseline.
    assert parsed.baseline == ("store" if "~store" in label.lower() else "paired")


@pytest.mark.parametrize(
    ("label", "needle"),
    [
        ("collect/", "no backend"),
        ("collect/vllm:", "empty op"),
        ("collect/vllm:gemm+", "empty op"),
        ("collect/vllm@", "bad case set"),
        ("collect/jax", "unknown backend 'jax'"),
        ("collect/vllm~fast", "unknown baseline 'fast'"),
    ],
)
def test_label_grammar_errors(label: str, needle: str) -> None:
    with pytest.raises(LabelError, match=needle):
        parse_label(label, backends=BACKENDS, ops=OPS)
    assert parse_label("bug", backends=BACKENDS, ops=OPS) is None


def test_client_config_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bot.github.client import DEFAULT_API_URL, config_from_env
    from collector.errors import UserError

    for var in (
        "GITHUB_API_URL",
        "GITHUB_TOKEN",
        "COLLECTBOT_APP_ID",
        "COLLECTBOT_APP_PRIVATE_KEY",
        "COLLECTBOT_APP_PRIVATE_KEY_FILE",
        "COLLECTBOT_APP_INSTALLATION_ID",
        "COLLECTBOT_GITHUB_THROTTLE",
    ):
        monkeypatch.delenv(var, raising=False)
    cfg = config_from_env()
    assert cfg.api_url == DEFAULT_API_URL and cfg.auth_kind == "none"
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example.com/api/v3/")
    monkeypatch.setenv("GITHUB_TOKEN", "env-token")
    cfg = config_from_env()
    assert cfg.api_url == "https://ghe.example.com/api/v3" and cfg.token == "env-token"
    assert config_from_env(token="opt").token == "opt"
    # A configured App wins over the ambient GITHUB_TOKEN; an explicit token wins over both.
    monkeypatch.setenv("COLLECTBOT_APP_ID", "12")
    monkeypatch.setenv("COLLECTBOT_APP_PRIVATE_KEY", "-----BEGIN PRIVATE KEY-----")
    assert config_from_env().auth_kind == "app"
    assert config_from_env(token="opt").auth_kind == "token"
    monkeypatch.delenv("COLLECTBOT_APP_PRIVATE_KEY")
    with pytest.raises(UserError, match="no private key"):
        config_from_env()
    monkeypatch.setenv("COLLECTBOT_GITHUB_THROTTLE", "fast")
    monkeypatch.delenv("COLLECTBOT_APP_ID")
    with pytest.raises(UserError, match="COLLECTBOT_GITHUB_THROTTLE: not a number"):
        config_from_env()


def test_shards_and_baseline_reach_the_matrix(
    gh: GitHubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    store = f"{TRIGGER}~store"
    gh.pulls[PR].labels = [store]
    plan, _ = run_plan(tmp_path, labeled(store), "--shards", "3")
    assert plan["shards"] == 3 and plan["baseline"] == "store"
    text = output.read_text()
    assert "shards=[1, 2, 3]\n" in text and "shard_count=3\n" in text and "baseline=store\n" in text
    # A paired campaign (the default) runs on one GPU, whatever the fleet.
    for label in (TRIGGER, f"{TRIGGER}~paired"):
        output.write_text("")
        gh.pulls[PR].labels = [label]
        plan, _ = run_plan(tmp_path, labeled(label), "--shards", "3")
        assert plan["trigger"] and plan["baseline"] == "paired" and plan["shards"] == 1
        assert "shards=[1]\n" in output.read_text() and "baseline=paired\n" in output.read_text()
    # A skipped plan still hands the matrix a valid list.
    output.write_text("")
    plan, _ = run_plan(tmp_path, labeled("bug"), "--shards", "3")
    assert not plan["trigger"] and "shards=[1]\n" in output.read_text()


def dispatch(**inputs: str) -> dict[str, Any]:
    data = payload("workflow_dispatch")
    data["inputs"] = inputs
    check_payload(data, "workflow_dispatch$event")
    return data


def run_dispatch(tmp_path: Path, data: dict[str, Any], *extra: str) -> dict[str, Any]:
    event = tmp_path / "dispatch.json"
    event.write_text(json.dumps(data))
    out = tmp_path / "plan.json"
    result = runner.invoke(
        app, ["plan", "--event", str(event), "--out", str(out), "--backends", "torch,vllm", *extra]
    )
    assert result.exit_code == 0, result.output
    plan: dict[str, Any] = json.loads(out.read_text())
    return plan


def test_workflow_dispatch_is_approved_and_checked_by_the_label_grammar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SHA", HEAD)
    plan = run_dispatch(tmp_path, dispatch(backend="torch", ops="gemm", case_set="smoke"))
    assert plan["trigger"] and plan["code"] == "dispatched"
    assert (plan["backend"], plan["ops"], plan["case_set"]) == ("torch", ["gemm"], "smoke")
    assert plan["head_sha"] == HEAD and plan["pr"] is None and plan["repo"] == "octo-org/octo-repo"
    assert plan["baseline"] == "store"  # no `base` to pair with: the stored baseline
    plan = run_dispatch(tmp_path, dispatch(backend="torch", base="main"))
    assert plan["trigger"] and plan["baseline"] == "paired" and plan["base_sha"] == "main"
    plan = run_dispatch(tmp_path, dispatch(backend="torch", baseline="auto", base="main"))
    assert plan["baseline"] == "paired"
    plan = run_dispatch(tmp_path, dispatch(backend="torch", baseline="store", base="main"))
    assert plan["trigger"] and plan["baseline"] == "store"
    plan = run_dispatch(tmp_path, dispatch(backend="torch", baseline="nearest"))
    assert plan["code"] == "bad-input" and "unknown baseline 'nearest'" in plan["reason"]
    plan = run_dispatch(tmp_path, dispatch(backend="jax"))
    assert plan["code"] == "bad-input" and "unknown backend 'jax'" in plan["reason"]
    plan = run_dispatch(tmp_path, dispatch(backend="torch", baseline="paired"))
    assert plan["code"] == "bad-input" and "needs the `base` input" in plan["reason"]
    plan = run_dispatch(tmp_path, dispatch(backend="torch", baseline="paired", base="main"))
    assert plan["trigger"] and plan["base_sha"] == "main" and plan["shards"] == 1
    monkeypatch.delenv("GITHUB_SHA")
    plan = run_dispatch(tmp_path, dispatch(backend="torch"))
    assert plan["code"] == "bad-input"
    plan = run_dispatch(tmp_path, dispatch(backend="torch"), "--head-sha", HEAD, "--shards", "2")
    assert plan["trigger"] and plan["shards"] == 2
