"""The workflow files' security properties, checked statically (the e2e test runs them).

zizmor (`make workflows`) audits the same files offline; these tests pin down the rules this
project relies on beyond its audits, so a later edit cannot quietly drop one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.act_support import (
    ROOT,
    definition_files,
    load_yaml,
    remote_actions,
    steps_of,
)

WORKFLOWS = {p.name: load_yaml(p) for p in sorted((ROOT / ".github" / "workflows").glob("*.yml"))}
# The reusable workflows (every repository's jobs) and collectbot's own thin callers of them.
REUSABLE = {"collect.yml": "collectbot-collect.yml", "publish.yml": "collectbot-publish.yml",
            "baseline.yml": "collectbot-baseline.yml"}  # fmt: skip
SETUP = "Install the pinned collectbot"
APPROVED = "Check the checkout against the approved head"
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")


def _on(doc: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True.
    on = doc["on"] if "on" in doc else dict[Any, Any](doc)[True]
    assert isinstance(on, dict)
    return on


def test_the_callers_and_the_reusable_workflows_exist() -> None:
    assert set(WORKFLOWS) == {"ci.yml", *REUSABLE, *REUSABLE.values()}
    for caller, reusable in REUSABLE.items():
        assert set(_on(WORKFLOWS[reusable])) == {"workflow_call"}, reusable
        # A thin caller: one job, the reusable workflow, nothing run of its own.
        [job] = WORKFLOWS[caller]["jobs"].values()
        assert job["uses"] == f"./.github/workflows/{reusable}", caller
        assert "steps" not in job
    assert set(_on(WORKFLOWS["collect.yml"])) == {"pull_request", "workflow_dispatch"}
    assert _on(WORKFLOWS["collect.yml"])["pull_request"]["types"] == ["labeled", "synchronize"]
    assert set(_on(WORKFLOWS["publish.yml"])) == {"workflow_run"}
    assert _on(WORKFLOWS["publish.yml"])["workflow_run"]["workflows"] == [
        WORKFLOWS["collect.yml"]["name"]
    ]
    assert set(_on(WORKFLOWS["baseline.yml"])) == {"push", "schedule", "workflow_dispatch"}


def test_every_remote_action_is_pinned_by_commit_sha() -> None:
    actions = remote_actions()
    assert actions, "no remote actions found: the parser broke"
    for action in actions:
        assert re.fullmatch(r"[0-9a-f]{40}", action.ref), action.spec
    for path in definition_files():
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:-\s+)?uses:\s*([^\s#]+)(.*)", line)
            if m and not m.group(1).startswith("./"):
                assert PINNED.match(m.group(1)), f"{path.name}: {line.strip()}"
                assert re.search(r"#\s*v\d", m.group(2)), f"{path.name}: no version comment: {line}"


def test_no_expression_is_expanded_inside_a_script() -> None:
    """Untrusted values (branch names, labels, titles) reach scripts through env only."""
    for path in definition_files():
        for where, step in steps_of(load_yaml(path)):
            assert "${{" not in str(step.get("run") or ""), f"{path.name} {where}"


def test_remote_actions_other_than_checkout_run_under_act_only_as_test_stand_ins() -> None:
    """act runs the artifact actions as working stand-ins (tests/act_support.py); any other
    remote action must be skipped under act."""
    from tests.act_support import WORKING_STANDINS

    for path in definition_files():
        for where, step in steps_of(load_yaml(path)):
            uses = str(step.get("uses") or "")
            if uses and not uses.startswith(("./", "actions/checkout@")):
                if uses.split("@")[0] in WORKING_STANDINS:
                    continue
                assert "!env.ACT" in str(step.get("if") or ""), f"{path.name} {where}: {uses}"


def test_checkouts_never_persist_credentials() -> None:
    for path in definition_files():
        for where, step in steps_of(load_yaml(path)):
            if str(step.get("uses") or "").startswith("actions/checkout@"):
                assert (step.get("with") or {}).get("persist-credentials") is False, where


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_least_permissions_per_job(name: str) -> None:
    doc = WORKFLOWS[name]
    assert doc["permissions"] == {}, "workflow-level permissions must be empty"
    text = (ROOT / ".github" / "workflows" / name).read_text()
    for job_id, job in doc["jobs"].items():
        assert "permissions" in job, f"{name}: job {job_id} inherits permissions"
        for scope, level in (job["permissions"] or {}).items():
            if level == "write":
                publishers = (
                    ("publish.yml", "collectbot"),
                    ("collectbot-publish.yml", "publish"),
                )
                # Main's own regressions: the baseline's GitHub-hosted track job, no checkout.
                trackers = (("baseline.yml", "collectbot"), ("collectbot-baseline.yml", "track"))
                allowed = publishers + (trackers if scope in ("issues", "statuses") else ())
                assert (name, job_id) in allowed, (name, job_id, scope)
            # Each granted permission says why, on its line.
            line = next(ln for ln in text.splitlines() if re.match(rf"\s+{scope}: {level}\b", ln))
            assert "#" in line, f"{name}: {job_id}: {scope} without a reason"


def test_only_the_publisher_writes_and_it_checks_out_nothing() -> None:
    grants = {"actions": "read", "pull-requests": "write", "statuses": "write"}
    assert WORKFLOWS["publish.yml"]["jobs"]["collectbot"]["permissions"] == grants
    assert WORKFLOWS["collectbot-publish.yml"]["jobs"]["publish"]["permissions"] == grants
    steps = [s for _, s in steps_of(WORKFLOWS["collectbot-publish.yml"])]
    assert not [s for s in steps if "checkout" in str(s.get("uses") or "")]
    assert steps[0]["name"] == SETUP
    script = " ".join(str(s.get("run") or "") for s in steps)
    assert "collectbot publish --result" in script and "--event" in script


def test_the_plan_runs_only_the_pinned_collectbot_with_a_read_only_token() -> None:
    """No checkout: no code of the pull request (nor of its base) runs in the plan."""
    plan = WORKFLOWS["collectbot-collect.yml"]["jobs"]["plan"]
    assert plan["permissions"] == {"pull-requests": "read"}
    steps = plan["steps"]
    assert not [s for s in steps if "checkout" in str(s.get("uses") or "")]
    assert steps[0]["name"] == SETUP
    decide = next(s for s in steps if s.get("id") == "plan")
    assert "collectbot plan --dry-run" in decide["run"]


def test_jobs_that_use_pr_files_first_check_the_approved_head() -> None:
    jobs = WORKFLOWS["collectbot-collect.yml"]["jobs"]
    for job_id in ("image", "collect", "campaign"):
        steps = jobs[job_id]["steps"]
        assert steps[0]["uses"].startswith("actions/checkout@"), job_id
        assert steps[1]["name"] == APPROVED, job_id
        assert steps[1]["env"]["APPROVED"] == "${{ needs.plan.outputs.head_sha }}", job_id
        assert steps[2]["name"] == SETUP, job_id
        assert "needs.plan.outputs.trigger == 'true'" in jobs[job_id]["if"], job_id
    # conclude merges, compares and renders with the pinned collectbot: no checkout at all.
    conclude = jobs["conclude"]
    assert conclude["permissions"] == {} and conclude["steps"][0]["name"] == SETUP
    assert not [s for s in conclude["steps"] if "checkout" in str(s.get("uses") or "")]


def test_every_job_installs_the_pinned_collectbot_and_never_runs_the_checkouts_bot() -> None:
    """collectbot is installed (a pinned version, checked), not run from the checkout."""
    for reusable in REUSABLE.values():
        doc = WORKFLOWS[reusable]
        inputs = _on(doc)["workflow_call"]["inputs"]
        assert inputs["collectbot-version"]["required"] is True, reusable
        text = (ROOT / ".github" / "workflows" / reusable).read_text()
        assert "PYTHONPATH" not in text and "-m bot" not in text, reusable
        for job_id, job in doc["jobs"].items():
            names = [s.get("name") for s in job["steps"]]
            runs = [
                i
                for i, s in enumerate(job["steps"])
                if s.get("name") != SETUP and "collectbot " in str(s.get("run") or "")
            ]
            if runs:
                assert SETUP in names and names.index(SETUP) < runs[0], (reusable, job_id)
            for step in job["steps"]:
                if step.get("name") == SETUP:
                    assert step["env"]["VERSION"] == "${{ inputs.collectbot-version }}"
                    assert '"collectbot $VERSION"' in step["run"]  # the installed version
    for name in ("collect.yml", "publish.yml", "baseline.yml"):
        text = (ROOT / ".github" / "workflows" / name).read_text()
        assert "PYTHONPATH" not in text and "-m bot" not in text, name


def test_collectbots_own_callers_pin_this_release_and_measure_the_checkouts_collector() -> None:
    from bot import __version__

    for caller in REUSABLE:
        [job] = WORKFLOWS[caller]["jobs"].values()
        assert job["with"]["collectbot-version"] == __version__, caller
        if caller != "publish.yml":
            assert job["with"]["collector"] == "checkout", caller
            assert job["with"]["manifest"] == "images/manifest.yaml", caller


def test_concurrency_per_pull_request_and_trigger() -> None:
    collect = WORKFLOWS["collect.yml"]["concurrency"]
    assert "github.event.pull_request.number" in collect["group"]
    assert "github.event.label.name" in collect["group"]
    assert collect["cancel-in-progress"] is False
    publish = WORKFLOWS["publish.yml"]["concurrency"]
    assert "workflow_run.head_repository.full_name" in publish["group"]
    assert "workflow_run.head_branch" in publish["group"]
    assert publish["cancel-in-progress"] is False


def test_gpu_jobs_run_on_self_hosted_gpu_runners_by_default() -> None:
    for name, default in (
        ("collectbot-collect.yml", '\'["self-hosted","gpu"]\''),
        ("collectbot-baseline.yml", '\'["self-hosted","gpu","collectbot-trusted"]\''),
    ):
        for job_id in ("image", "collect"):
            runs_on = WORKFLOWS[name]["jobs"][job_id]["runs-on"]
            assert default in runs_on, (name, job_id)


def test_trusted_and_untrusted_jobs_use_separate_runner_groups() -> None:
    """Every self-hosted job of a pull request asks for the untrusted group's variables,
    every baseline job for the trusted group's: one never lands on the other's runners."""
    for job_id, job in WORKFLOWS["collectbot-collect.yml"]["jobs"].items():
        assert "TRUSTED" not in job["runs-on"], job_id
    # The reusable baseline runs its trusted jobs for the default branch only, whoever calls
    # it: every job needs `settings`, which runs for schedule or the default branch's ref.
    jobs = WORKFLOWS["collectbot-baseline.yml"]["jobs"]
    [resolve] = jobs["settings"]["steps"]
    guard = resolve["env"]["DEFAULT_BRANCH"]
    assert "format('refs/heads/{0}', github.event.repository.default_branch)" in guard
    assert "github.event_name != 'pull_request'" in guard
    assert 'if [ "$DEFAULT_BRANCH" != true ]' in resolve["run"]
    for job_id, job in jobs.items():
        if job_id == "settings":
            continue  # GitHub-hosted, no PR code and no store
        assert "settings" in job["needs"], job_id
        assert "needs.settings.outputs.trusted == 'true'" in job["if"], job_id
        names = set(re.findall(r"vars\.(COLLECTBOT_[A-Z_]+)", job["runs-on"]))
        if job_id == "track":  # GitHub-hosted like the publisher: no checkout, no PR code
            assert names == {"COLLECTBOT_PUBLISH_RUNNER"}, job_id
            assert not any("checkout" in str(s.get("uses")) for s in job["steps"]), job_id
            continue
        assert names and all(n.startswith("COLLECTBOT_TRUSTED_") for n in names), job_id


def _store_access(doc: dict[str, Any]) -> dict[str, str]:
    """Each job's run-store access (its COLLECTBOT_SETUP_ACCESS; read unless set)."""
    return {
        job_id: (job.get("env") or {}).get("COLLECTBOT_SETUP_ACCESS", "read")
        for job_id, job in doc["jobs"].items()
    }


def test_pull_request_jobs_never_write_the_store() -> None:
    """Attack 1: the store holds baselines; a pull request's jobs get it read-only and hand
    shards, the campaign and the result over as their own run's artifacts only."""
    writes = re.compile(r"collectbot store (put|stash|drop|prune)")
    for where, step in steps_of(WORKFLOWS["collectbot-collect.yml"]):
        assert not writes.search(str(step.get("run") or "")), where
    assert set(_store_access(WORKFLOWS["collectbot-collect.yml"]).values()) == {"read"}
    [setup] = {
        s["run"] for _, s in steps_of(WORKFLOWS["collectbot-collect.yml"]) if s.get("name") == SETUP
    }
    assert 'access="${COLLECTBOT_SETUP_ACCESS:-read}"' in setup
    assert "COLLECTBOT_STORE_ACCESS=$access" in setup
    # Only the baseline's store job may write baselines (only there is `store put`), and the
    # publisher (GitHub-hosted, default branch's code) the PRs' namespaces.
    writers = sorted(
        (name, job_id)
        for name, doc in WORKFLOWS.items()
        for job_id, access in _store_access(doc).items()
        if access != "read"
    )
    assert writers == [
        ("collectbot-baseline.yml", "store"),
        ("collectbot-publish.yml", "publish"),
    ], writers
    puts = [
        (name, where)
        for name, doc in WORKFLOWS.items()
        for where, step in steps_of(doc)
        if writes.search(str(step.get("run") or ""))
    ]
    assert puts == [("collectbot-baseline.yml", "jobs.store.steps[3]")], puts


def test_baseline_shards_travel_only_between_the_baseline_runs_own_jobs() -> None:
    """Attack 1: a PR job once overwrote a baseline run's shard stash in the shared store.
    The baseline's shards are now artifacts of its own run (no `run-id`: this run), which
    no other run can write, and nothing reads shards from the store."""
    doc = WORKFLOWS["collectbot-baseline.yml"]
    uploads = [
        s["with"]["name"] for _, s in steps_of(doc) if "upload-artifact" in str(s.get("uses") or "")
    ]
    assert uploads[0] == "collectbot-shard-${{ matrix.shard }}"
    fetch = [s for _, s in steps_of(doc) if "download-artifact" in str(s.get("uses") or "")]
    assert [s["with"] for s in fetch] == [
        {"pattern": "collectbot-shard-*", "path": "${{ runner.temp }}/fetched"},
        # The track job: this run's comparison with the previous baseline (no run-id).
        {"name": "collectbot-against-previous", "path": "${{ runner.temp }}/against-previous"},
    ]
    for name, wf in WORKFLOWS.items():
        for where, step in steps_of(wf):
            assert "store unstash" not in str(step.get("run") or ""), (name, where)


def test_the_publisher_reads_results_only_from_the_finished_runs_artifacts() -> None:
    """Attack 1: no store a pull request's job could write feeds the publisher."""
    for path in definition_files():
        assert "RESULTS_FROM_STORE" not in path.read_text(), path.name
    doc = WORKFLOWS["collectbot-publish.yml"]
    for where, step in steps_of(doc):
        if step.get("name") == SETUP:
            # The store only for the PR's previous runs (pulls/), never for the result.
            assert step["env"]["STORE"] == "${{ vars.COLLECTBOT_STORE }}", where
    fetch = [s for _, s in steps_of(doc) if "download-artifact" in str(s.get("uses") or "")]
    assert [s["with"]["run-id"] for s in fetch] == ["${{ github.event.workflow_run.id }}"]
    assert all("if" not in s for s in fetch)
    scripts = " ".join(str(s.get("run") or "") for _, s in steps_of(doc))
    assert "collectbot store" not in scripts


def test_the_reusable_workflows_inputs_are_described_and_documented() -> None:
    doc_text = (ROOT / "docs" / "workflows.md").read_text()
    for reusable in REUSABLE.values():
        doc = WORKFLOWS[reusable]
        for name, spec in _on(doc)["workflow_call"]["inputs"].items():
            assert spec.get("description"), f"{reusable}: input {name}"
            assert f"`{name}`" in doc_text, f"docs/workflows.md does not document {name}"


def test_the_docs_name_every_repository_variable() -> None:
    readme = (ROOT / "docs" / "workflows.md").read_text()
    names = set()
    for path in definition_files():
        names.update(re.findall(r"vars\.(COLLECTBOT_[A-Z_]+)", path.read_text()))
    assert names
    missing = sorted(n for n in names if n not in readme)
    assert not missing, f"docs/workflows.md does not document {missing}"


def test_image_check_accepts_the_workflows(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bot.cli import app

    result = CliRunner().invoke(app, ["image", "check", "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
