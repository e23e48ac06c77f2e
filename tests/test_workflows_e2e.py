"""Our real workflow files, run end to end with act, against the local GitHub server and a
real Docker engine.

A scratch repository holds this checkout's files: `main` is the base, and a pull request's
head breaks one GEMM shape (a kernel that raises for k=512), as a real regression would. The
sequence is the product's:

1. the baseline workflow (`act push`, trusted) collects main in the pinned image, as two
   shards handed over as that run's artifacts, merges them and stores the reference run;
2. a maintainer's `collect/torch:gemm@smoke~store` label (`act pull_request`, recorded
   `labeled` payload; untrusted): plan, image, two shards on "GPU" runners (CPU here) handed
   to conclude as the run's artifacts, conclude against the stored baseline with the store
   read-only, and a result bundle as the run's artifact;
3. the publishing workflow (`act workflow_run`, trusted) on the default branch's code: takes
   the bundle from the finished run's artifacts, verifies it, finds the PR from the run's
   head repository and branch on the local server, re-derives the approval from the PR's
   event log, renders and posts;

and the server ends with exactly one sticky comment whose verdict is red with the new failure
group, a failure status on the head, and the trigger label consumed. Artifacts are kept by
act stand-ins of the artifact actions (tests/act_support.py), per run id, as GitHub does; no
pull request job writes the run store. The same label applied
by an account with read permission runs no collection at all, and the publisher removes the
label with an explanation.

The workflows are collectbot's thin callers of its reusable workflows, and every job installs
the pinned collectbot: the wheel built from this checkout (the runners' COLLECTBOT_PACKAGE),
layered on this interpreter's dependencies. The last test is the install story: a new
repository with only the documented callers and a config file, the reusable workflows taken
from this checkout through act's `--local-repository`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.render.comment import Marker, baseline_words
from bot.store import RunStore
from collector.record import read_record
from tests.act_support import ROOT, act_binary, act_command, run_act, standin_args
from tests.github_fixtures import BOT_TOKEN, REPO, payload
from tests.github_server import GitHubServer, PullState

pytestmark = pytest.mark.slow

PR = 7
LABEL = "collect/torch:gemm@smoke~store"
SHARDS = 2
BREAKAGE = (
    "    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:\n"
    '        if case.op == "gemm" and case.params["k"] == 512:\n'
    '            raise RuntimeError("new tiling: k=512 is not supported")\n'
)
# Quick, still real: three runs of three samples per case, in the container, on the CPU.
# act names a called workflow's jobs <caller job>/<reusable workflow's name>/<job>.
JOBS = "collectbot/collectbot collect (reusable)/"
COLLECT_OPTIONS = "--runs 3 --samples 3 --warmup 1 --target-sample-ms 0.2 --idle-ratio 0"


CAMPAIGN_OPTIONS = (
    "--runs 2 --samples 3 --warmup 1 --target-sample-ms 0.2 --idle-ratio 0 --no-confirm"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _git_init(repo: Path, message: str) -> str:
    """`repo`'s files as a new repository: branch main, origin on GitHub at REPO, everything
    in one commit with `message`; that commit's SHA."""
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "ci@example.invalid")
    _git(repo, "config", "user.name", "ci")
    _git(repo, "remote", "add", "origin", f"https://github.com/{REPO}.git")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _copy_checkout(dest: Path) -> None:
    """This checkout's files (tracked and new, not ignored): what a clone of the PR holds."""
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


@dataclass
class Env:
    work: Path
    repo: Path
    store: Path
    base_sha: str
    head_sha: str
    variables: dict[str, str]
    env: dict[str, str]
    standins: list[str]
    logs: Path
    artifacts: Path
    manifest: str  # the framework pins for this machine (CPU torch)

    def act(
        self, event: str, workflow: str, data: dict[str, Any], run_id: int, **extra: Any
    ) -> str:
        """act `event` on `workflow`; `repo`, `standins` and `variables` default to the scratch
        copy of collectbot's repository and its settings."""
        repo: Path = extra.get("repo", self.repo)
        event_file = self.work / f"{event}-{run_id}.json"
        event_file.write_text(json.dumps(data))
        cmd = act_command(
            event,
            event_file,
            workflow=repo / ".github" / "workflows" / workflow,
            standins=extra.get("standins", self.standins),
            env={**self.env, "GITHUB_RUN_ID": str(run_id), **extra.get("env", {})},
            variables={**self.variables, **extra.get("variables", {})},
            secrets=extra.get("secrets"),
            cache=self.work / "act-cache",
        )
        started = time.monotonic()
        proc = run_act(cmd, repo, timeout=900)
        log = proc.stdout + proc.stderr
        (self.logs / f"{workflow}-{event}-{run_id}.log").write_text(log)
        took = time.monotonic() - started
        print(f"act {event} -W {workflow}: exit {proc.returncode} in {took:.0f} s")
        assert proc.returncode == 0, f"act {event} {workflow} failed:\n{log[-6000:]}"
        return log


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from bot.images.engine import connect
    from collector.errors import UserError
    from tests.docker_support import ensure_base_image

    try:
        act_binary()
        client = connect()
    except (FileNotFoundError, UserError) as exc:
        if os.environ.get("COLLECTBOT_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COLLECTBOT_REQUIRE_DOCKER=1 but {exc}")
        pytest.skip(str(exc))
    base_image = ensure_base_image(client)
    work = tmp_path_factory.mktemp("e2e")
    repo = work / "repo"
    repo.mkdir()
    _copy_checkout(repo)
    import torch

    # The config file: the framework pins, with this machine's CPU torch for the stand-in base.
    manifest = (
        "schema_version: 1\nframeworks:\n  vllm:\n"
        f'    version: "0.24.0"\n    torch: "{str(torch.__version__).split("+")[0]}"\n'
        '    flashinfer: "0.6.12"\n    cuda: "cpu"\n'
        '    base_image: "docker.io/vllm/vllm-openai:v0.24.0@sha256:'
        '251eba5cc7c12fed0b75da22a9240e582b1c9e39f6fbc064f86781b963bd814f"\n'
    )
    (repo / "images" / "manifest.yaml").write_text(manifest)
    # The pinned collectbot the workflows install: the wheel built from this checkout (the
    # runners' COLLECTBOT_PACKAGE, as an offline fleet's wheel house would provide it).
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
    )
    (wheel,) = dist.glob("collectbot-*.whl")
    base_sha = _git_init(repo, "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    backend = repo / "collector" / "backends" / "torch_backend.py"
    text = backend.read_text()
    anchor = "    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:\n"
    assert anchor in text, "the torch backend changed: update BREAKAGE"
    backend.write_text(text.replace(anchor, BREAKAGE))
    _git(repo, "commit", "-q", "-am", "new GEMM tiling")
    head_sha = _git(repo, "rev-parse", "HEAD")
    store = work / "store"
    repository = f"collectbot-e2e-{os.getpid()}"
    logs = work / "logs"
    logs.mkdir()
    env = Env(
        work=work,
        repo=repo,
        store=store,
        base_sha=base_sha,
        head_sha=head_sha,
        variables={
            "COLLECTBOT_SHARDS": str(SHARDS),
            "COLLECTBOT_DEVICE": "cpu",
            "COLLECTBOT_STORE": str(store),
            "COLLECTBOT_IMAGE_OPTIONS": (
                f"--base-image {base_image} --build-network none --repository {repository}"
            ),
            "COLLECTBOT_COLLECT_OPTIONS": COLLECT_OPTIONS,
            "COLLECTBOT_BASELINE_BACKEND": "torch",
            "COLLECTBOT_BASELINE_OPS": "gemm",
            "COLLECTBOT_BASELINE_CASE_SET": "smoke",
            "COLLECTBOT_CAMPAIGN_OPTIONS": f"{CAMPAIGN_OPTIONS}",
        },
        env={
            # The runners' own set-up: an interpreter with the dependencies (collectbot goes
            # into a venv layered on it) and where pip gets the pinned collectbot.
            "COLLECTBOT_PYTHON": sys.executable,
            "COLLECTBOT_PACKAGE": str(wheel),
            "COLLECTBOT_GITHUB_THROTTLE": "0",
        },
        standins=standin_args(work / "standins", repo, artifacts=work / "artifacts"),
        logs=logs,
        artifacts=work / "artifacts",
        manifest=manifest,
    )
    yield env
    for image in client.images.list(name=repository):
        for tag in image.tags:
            client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def baseline(e2e: Env) -> dict[str, Any]:
    """The baseline workflow on a push to main: the reference run lands in the store."""
    _git(e2e.repo, "checkout", "-q", "main")
    data = payload("push")
    data.update(ref="refs/heads/main", before="0" * 40, after=e2e.base_sha)
    data["repository"]["full_name"] = REPO
    data["repository"].update(default_branch="main", master_branch="main")
    e2e.act("push", "baseline.yml", data, run_id=101)
    [entry] = RunStore(str(e2e.store)).entries()
    assert entry.ref == "main" and entry.status == "complete"
    summary: dict[str, Any] = entry.summary()
    return summary


def _server(head_sha: str, base_sha: str) -> GitHubServer:
    server = GitHubServer(REPO)
    server.add_token(BOT_TOKEN, "github-actions[bot]", "Bot")
    server.permissions.update({"Codertocat": ("admin", "admin"), "outsider": ("read", "read")})
    server.add_pull(
        PullState(
            number=PR,
            head_sha=head_sha,
            base_sha=base_sha,
            head_repo=REPO,
            head_ref="feature",
        )
    )
    return server


def _labeled(e2e: Env, sender: str, label: str = LABEL) -> dict[str, Any]:
    data = payload("pull_request.labeled")
    data["number"] = PR
    data["label"]["name"] = label
    pr = data["pull_request"]
    pr["number"] = PR
    pr["labels"][0]["name"] = label
    pr["head"].update(sha=e2e.head_sha, ref="feature")
    pr["base"].update(sha=e2e.base_sha, ref="main")
    pr["head"]["repo"]["full_name"] = REPO
    pr["base"]["repo"]["full_name"] = REPO
    data["repository"]["full_name"] = REPO
    data["sender"]["login"] = sender
    return data


def _finished(
    e2e: Env, run_id: int, actor: str, created_at: str, conclusion: str = "success"
) -> dict[str, Any]:
    data = payload("workflow_run.completed")
    data["repository"]["full_name"] = REPO
    data["repository"]["default_branch"] = "main"
    run = data["workflow_run"]
    run.update(
        id=run_id,
        name="collectbot collect",
        event="pull_request",
        conclusion=conclusion,
        head_sha=e2e.head_sha,
        head_branch="feature",
        pull_requests=[],
        html_url=f"https://github.com/{REPO}/actions/runs/{run_id}",
        created_at=created_at,
    )
    run["actor"] = {"login": actor, "type": "User"}
    run["head_repository"]["full_name"] = REPO
    run["repository"]["full_name"] = REPO
    return data


def _flow(
    e2e: Env, server: GitHubServer, sender: str, run_id: int, label: str = LABEL
) -> tuple[str, str]:
    """`sender` labels the PR; the collection workflow on the PR head, then the publisher on
    main (GitHub created the run right after the label event: its created_at)."""
    labelled = server.label(PR, label, sender)
    conn = {
        "env": {"GITHUB_API_URL": server.url},
        "secrets": {"GITHUB_TOKEN": BOT_TOKEN},
    }
    _git(e2e.repo, "checkout", "-q", "feature")
    collected = e2e.act("pull_request", "collect.yml", _labeled(e2e, sender, label), run_id, **conn)
    _git(e2e.repo, "checkout", "-q", "main")  # workflow_run runs the default branch's code
    finished = _finished(e2e, run_id, sender, labelled)
    published = e2e.act("workflow_run", "publish.yml", finished, run_id + 1, **conn)
    return collected, published


def test_a_maintainers_label_becomes_one_sticky_comment_with_the_verdict(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    server = _server(e2e.head_sha, e2e.base_sha)
    with server.running():
        collected, published = _flow(e2e, server, "Codertocat", run_id=202)
        # Run again (a maintainer re-applies the label): still one comment, updated.
        _flow(e2e, server, "Codertocat", run_id=204)
    assert not server.violations, "\n".join(server.violations[:10])
    # Both shards ran, each in the pinned image, and were merged into one complete record.
    for shard in range(1, SHARDS + 1):
        assert f"collect {shard}/{SHARDS}" in collected
    assert "merged 2 of 2 shards" in collected
    comments = server.issue_comments(PR)
    assert len(comments) == 1, [c["body"][:200] for c in comments]
    body = comments[0]["body"]
    marker = Marker.parse(body)
    assert marker is not None and marker.backend == "torch" and marker.head_sha == e2e.head_sha
    headline = body.split("\n")[1]
    assert headline.startswith("## ❌"), headline
    assert "new failure group" in body and "k=512 is not supported" in body
    assert f"https://github.com/{REPO}/actions/runs/204" in body
    assert server.pulls[PR].labels == []
    states = [(s["sha"], s["state"]) for s in server.statuses]
    assert states and set(states) == {(e2e.head_sha, "failure")}
    # The comment came from the publisher's own rendering of the verified bundle.
    assert "published:" in published
    assert baseline["ref"] == "main"
    # The trust split: the shards and the result went through run 204's own artifacts; the
    # pull request's jobs wrote nothing to the store (read-only to them), so it still holds
    # exactly the baseline, and no stash.
    assert sorted(p.name for p in (e2e.artifacts / "204").iterdir()) == [
        "collectbot-report",
        "collectbot-result",
        "collectbot-shard-1",
        "collectbot-shard-2",
    ]
    assert "store: " in collected and "(read)" in collected
    store = RunStore(str(e2e.store))
    assert [e.run_id for e in store.entries()] == [baseline["run_id"]]
    assert not (e2e.store / "stash").exists()


def test_an_unapproved_label_runs_no_collection_and_is_explained(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    server = _server(e2e.head_sha, e2e.base_sha)
    stored = len(RunStore(str(e2e.store)).entries())
    with server.running():
        collected, published = _flow(e2e, server, "outsider", run_id=302)
    assert not server.violations, "\n".join(server.violations[:10])
    assert "skip (labeler-lacks-permission)" in collected
    for job in ("image", "collect 1/", "conclude"):
        assert f"{JOBS}{job}" not in collected, job
    assert "notice: labeler-lacks-permission" in published
    [comment] = server.issue_comments(PR)
    assert "was removed: it was applied by an account without write permission" in comment["body"]
    assert server.pulls[PR].labels == []
    assert server.statuses == []
    assert len(RunStore(str(e2e.store)).entries()) == stored  # nothing was collected


def test_the_stored_baseline_is_a_merged_record_of_both_shards(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    store = RunStore(str(e2e.store))
    entry = next(e for e in store.entries() if e.run_id == baseline["run_id"])
    record = read_record(store.get(entry, e2e.work / "baseline-check"))
    merged = record.meta["merged_from"]
    assert merged["count"] == SHARDS and merged["missing"] == []
    assert [s["index"] for s in merged["shards"]] == [1, 2]
    # A trusted job runs the image it built itself, by id (never a tag another job could move).
    assert record.meta["image"]["ref"] == record.meta["image"]["digest"]
    assert record.meta["image"]["ref"].startswith("sha256:")
    assert record.meta["container"]["trust"] == "trusted"
    assert record.meta["container"]["jit_cache"] == "persistent (trusted, read-write)"
    assert record.meta["counts"]["ok"] == record.meta["counts"]["planned"] == 16


def test_a_paired_label_runs_an_ab_campaign_of_base_and_head(e2e: Env) -> None:
    """A label without `~store` (the default, paired): no shards and no stored baseline; the
    image job builds the head's image and the merge base's, and base and head alternate on
    one device, each round in its side's image."""
    label = "collect/torch:gemm@smoke"
    server = _server(e2e.head_sha, e2e.base_sha)
    with server.running():
        collected, published = _flow(e2e, server, "Codertocat", run_id=402, label=label)
    assert "published:" in published
    assert not server.violations, "\n".join(server.violations[:10])
    assert f"{JOBS}paired campaign" in collected
    assert f"{JOBS}image" in collected and f"{JOBS}collect 1/" not in collected
    images = re.findall(r"(base|head) image: (\S+)", collected)
    assert {side for side, _ in images} == {"base", "head"}
    # base and head differ by the collector (the head breaks a shape): two images.
    assert len({ref for _, ref in images}) == 2
    assert "main round round-01: base" in collected
    [comment] = server.issue_comments(PR)
    body = comment["body"]
    assert body.split("\n")[1].startswith("## ❌") and "new failure group" in body
    # The baseline is the PR's base, collected alongside, named in the comment's words.
    assert f"baseline: {baseline_words('merge-base')} (paired)" in body
    assert server.pulls[PR].labels == []


def test_a_result_planted_in_the_store_is_never_published(e2e: Env, tmp_path: Path) -> None:
    """Attack 1, the publisher's side: a PR job writes a green result bundle for another run
    where the publisher once read results (`results/<repo>/<run id>` in the store). The
    publisher reads only that run's own artifacts: the planted bundle is never posted."""
    import numpy as np
    from typer.testing import CliRunner

    from bot.cli import app
    from bot.github.plan import Plan
    from bot.result_bundle import make_result
    from tests.factories import gemm_case, simulated_runs, write_record

    victim = 999  # a run of the victim PR that left no result (cancelled, say)
    rng = np.random.default_rng(7)
    cases = [gemm_case(m) for m in (1, 2, 4)]
    base = write_record(tmp_path / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(tmp_path / "cand", cases, lambda c: simulated_runs(rng, 1.0))
    result = CliRunner().invoke(
        app, ["compare", str(base), str(cand), "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    plan = Plan(
        trigger=True, code="approved", reason="forged", event="pull_request", action="labeled",
        repo=REPO, pr=PR, label=LABEL, backend="torch", head_sha=e2e.head_sha,
    )  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_json()))
    forged = tmp_path / "forged"
    make_result(forged, plan_path=tmp_path / "plan.json", workflow_run_id=victim,
                repo=REPO, head_sha=e2e.head_sha, comparison=tmp_path / "c")  # fmt: skip
    planted = e2e.store / "results" / REPO / str(victim)  # where a result could be read from
    shutil.copytree(forged, planted)
    server = _server(e2e.head_sha, e2e.base_sha)
    with server.running():
        labelled = server.label(PR, LABEL, "Codertocat")  # so approval alone would not stop it
        conn = {"env": {"GITHUB_API_URL": server.url}, "secrets": {"GITHUB_TOKEN": BOT_TOKEN}}
        _git(e2e.repo, "checkout", "-q", "main")
        finished = _finished(e2e, victim, "Codertocat", labelled)
        published = e2e.act("workflow_run", "publish.yml", finished, victim + 1, **conn)
    assert "no result at" in published and "left nothing to publish" in published
    assert server.issue_comments(PR) == [] and server.statuses == []
    assert server.pulls[PR].labels == [LABEL]
    assert not server.violations, "\n".join(server.violations[:10])


# A repository that installs collectbot as docs/workflows.md says: its callers name
# collectbot's reusable workflows at a commit SHA, which act maps to this checkout.
UPSTREAM = "collectbot-dev/collectbot"
UPSTREAM_SHA = "c0ffee" + "0" * 34


def _documented_callers() -> dict[str, str]:
    """The caller workflows of docs/workflows.md, with the placeholders filled in."""
    from bot import __version__

    text = (ROOT / "docs" / "workflows.md").read_text()
    callers = {}
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        block = textwrap.dedent(block)
        m = re.match(r"# (\.github/workflows/[a-z]+\.yml)\n", block)
        if m:
            assert f'collectbot-version: "{__version__}"' in block, m[1]
            callers[m[1]] = block.replace("OWNER/collectbot", UPSTREAM).replace(
                "@SHA ", f"@{UPSTREAM_SHA} "
            )
    assert sorted(callers) == [
        f".github/workflows/{n}.yml" for n in ("baseline", "collect", "publish")
    ]
    return callers


@dataclass
class NewRepo:
    path: Path
    base_sha: str
    head_sha: str
    where: dict[str, Any]  # Env.act's repository, stand-ins and variables for it


@pytest.fixture(scope="module")
def new_repo(e2e: Env) -> NewRepo:
    """A repository holding only the documented callers and a config file: `main`, and a
    pull request's head on `feature`."""
    repo = e2e.work / "new-repo"
    for rel, text in _documented_callers().items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    config = repo / ".github" / "collectbot" / "manifest.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(e2e.manifest)
    base_sha = _git_init(repo, "collectbot: callers and config")
    assert _git(repo, "ls-files").split() == [
        ".github/collectbot/manifest.yaml",
        ".github/workflows/baseline.yml",
        ".github/workflows/collect.yml",
        ".github/workflows/publish.yml",
    ]
    # The documented callers pass the same audit as collectbot's own workflows.
    audit = subprocess.run(
        [str(Path(sys.executable).parent / "zizmor"), "--offline", "--persona=auditor",
         "--no-progress", str(repo / ".github")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert audit.returncode == 0, audit.stdout[-3000:]
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "kernels.txt").write_text("a faster GEMM\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "a kernel change")
    head_sha = _git(repo, "rev-parse", "HEAD")
    standins = [
        *standin_args(e2e.work / "standins-upstream", ROOT, artifacts=e2e.artifacts),
        "--local-repository",
        f"{UPSTREAM}@{UPSTREAM_SHA}={ROOT}",
    ]
    where = {
        "repo": repo,
        "standins": standins,
        "variables": {"COLLECTBOT_STORE": str(e2e.work / "new-store")},
    }
    return NewRepo(repo, base_sha, head_sha, where)


def _new_repo_labeled(e2e: Env, new: NewRepo) -> dict[str, Any]:
    event = _labeled(e2e, "Codertocat")
    event["pull_request"]["head"]["sha"] = new.head_sha
    event["pull_request"]["base"]["sha"] = new.base_sha
    return event


def test_a_new_repository_with_only_the_callers_and_a_config_file_gets_one_sticky_comment(
    e2e: Env, new_repo: NewRepo
) -> None:
    """Acceptance (issue 24): no collectbot sources in the repository; every job installs the
    pinned collectbot (the wheel built from this checkout, as the runners' package)."""
    from bot import __version__

    repo, base_sha, head_sha, where = (
        new_repo.path, new_repo.base_sha, new_repo.head_sha, new_repo.where
    )  # fmt: skip
    server = _server(head_sha, base_sha)
    with server.running():
        labelled = server.label(PR, LABEL, "Codertocat")
        conn = {"env": {"GITHUB_API_URL": server.url}, "secrets": {"GITHUB_TOKEN": BOT_TOKEN}}
        event = _new_repo_labeled(e2e, new_repo)
        _git(repo, "checkout", "-q", "feature")
        collected = e2e.act("pull_request", "collect.yml", event, 502, **conn, **where)
        _git(repo, "checkout", "-q", "main")
        finished = _finished(e2e, 502, "Codertocat", labelled)
        finished["workflow_run"]["head_sha"] = head_sha
        published = e2e.act("workflow_run", "publish.yml", finished, 503, **conn, **where)
    assert not server.violations, "\n".join(server.violations[:10])
    # Every job ran the installed release, never code of the repository (it has none).
    assert f"collectbot {__version__} (" in collected and ".whl) on " in collected
    assert f"collectbot {__version__} (" in published
    for shard in range(1, SHARDS + 1):
        assert f"collect {shard}/{SHARDS}" in collected
    assert "merged 2 of 2 shards" in collected
    assert "published:" in published
    [comment] = server.issue_comments(PR)
    body = comment["body"]
    marker = Marker.parse(body)
    assert marker is not None and marker.backend == "torch" and marker.head_sha == head_sha
    # No baseline stored yet: the comment says what was measured and that there is none.
    assert "cases measured; no baseline to compare with" in body, body[:600]
    assert f"https://github.com/{REPO}/actions/runs/502" in body
    assert server.pulls[PR].labels == []
    assert sorted(p.name for p in (e2e.artifacts / "502").iterdir()) == [
        "collectbot-report",
        "collectbot-result",
        "collectbot-shard-1",
        "collectbot-shard-2",
    ]


def test_a_pull_request_calling_the_reusable_baseline_gets_no_trusted_job(
    e2e: Env, new_repo: NewRepo
) -> None:
    """A pull request's run uses the PR's own workflow files: one that makes its collection
    caller call the baseline workflow (at the pinned SHA, which it cannot edit) would reach
    the trusted runners and the store's write access. The reusable baseline runs nothing
    outside the default branch."""
    repo = new_repo.path
    _git(repo, "checkout", "-q", "-b", "hostile", "feature")
    caller = repo / ".github" / "workflows" / "collect.yml"
    text = caller.read_text()
    assert "collectbot-collect.yml" in text
    caller.write_text(text.replace("collectbot-collect.yml", "collectbot-baseline.yml"))
    _git(repo, "commit", "-q", "-am", "run the baseline from a pull request")
    event = _new_repo_labeled(e2e, new_repo)
    event["pull_request"]["head"]["sha"] = _git(repo, "rev-parse", "HEAD")
    try:
        log = e2e.act("pull_request", "collect.yml", event, 602, **new_repo.where)
    finally:
        _git(repo, "checkout", "-q", "feature")
    assert "not a run of the default branch (pull_request, refs/pull/" in log
    for job in ("image", "collect 1/", "store"):
        assert f"collectbot baseline (reusable)/{job}" not in log, job
    assert "Install the pinned collectbot" not in log
    assert (
        not (e2e.work / "new-store").exists() or not RunStore(str(e2e.work / "new-store")).entries()
    )


def test_the_baseline_uploads_its_history_site_for_pages(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    """The baseline's site job: its `github-pages` artifact is one tar of the site of the
    stored baselines, the form actions/deploy-pages takes."""
    [packed] = (e2e.artifacts / "101" / "github-pages").rglob("artifact.tar")
    with tarfile.open(packed) as tar:
        names = tar.getnames()
    assert {"./index.html", "./style.css"} <= set(names), names[:20]
    pages = [n for n in names if re.search(r"/case-[0-9a-f]{16}\.html$", n)]
    assert pages, names[:20]


# --- the previous run: of the same pull request, and of main (issue 19) -------------------
SECOND_PR, SECOND_BRANCH = 8, "fix-and-break"
EPILOGUE = (
    "    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:\n"
    '        if case.op == "gemm" and case.params["n"] == 512:\n'
    '            raise RuntimeError("new epilogue: n=512 is not supported")\n'
)
MAIN_BREAKAGE = (
    "    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:\n"
    '        if case.op == "gemm" and case.params["m"] == 64:\n'
    '            raise RuntimeError("merged on main: m=64 faults")\n'
)
BACKEND_FILE = Path("collector") / "backends" / "torch_backend.py"


def _pr_run(e2e: Env, server: GitHubServer, run_id: int, sha: str) -> str:
    """A maintainer labels PR 8 at `sha`; collection on that head, publisher on main."""
    server.pulls[SECOND_PR].head_sha = sha
    labelled = server.label(SECOND_PR, LABEL, "Codertocat")
    conn = {"env": {"GITHUB_API_URL": server.url}, "secrets": {"GITHUB_TOKEN": BOT_TOKEN}}
    event = _labeled(e2e, "Codertocat")
    event["number"] = event["pull_request"]["number"] = SECOND_PR
    event["pull_request"]["head"].update(sha=sha, ref=SECOND_BRANCH)
    _git(e2e.repo, "checkout", "-q", SECOND_BRANCH)
    try:
        e2e.act("pull_request", "collect.yml", event, run_id, **conn)
    finally:
        _git(e2e.repo, "checkout", "-q", "main")
    finished = _finished(e2e, run_id, "Codertocat", labelled)
    finished["workflow_run"].update(head_sha=sha, head_branch=SECOND_BRANCH)
    return e2e.act("workflow_run", "publish.yml", finished, run_id + 1, **conn)


def test_a_second_label_after_new_commits_says_what_changed_since_the_previous_run(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    """Label; push a commit that fixes the k=512 group and breaks n=512; label again: the
    comment's verdict is against main, and "since the previous run of this PR" lists the fix
    and the new group (the publisher kept the first run under PR 8's number)."""
    _git(e2e.repo, "branch", SECOND_BRANCH, "feature")
    first = e2e.head_sha  # k=512 raises
    server = _server(first, e2e.base_sha)
    server.add_pull(
        PullState(
            number=SECOND_PR,
            head_sha=first,
            base_sha=e2e.base_sha,
            head_repo=REPO,
            head_ref=SECOND_BRANCH,
        )
    )
    with server.running():
        published = _pr_run(e2e, server, 702, first)
        assert "published:" in published
        [comment] = server.issue_comments(SECOND_PR)
        assert "### Since the previous run of this PR" not in comment["body"]
        # A new commit on the PR's branch: the tiling fixed, a new epilogue broken.
        _git(e2e.repo, "checkout", "-q", SECOND_BRANCH)
        backend = e2e.repo / BACKEND_FILE
        backend.write_text(backend.read_text().replace(BREAKAGE, EPILOGUE))
        _git(e2e.repo, "commit", "-q", "-am", "fix the tiling, new epilogue")
        second = _git(e2e.repo, "rev-parse", "HEAD")
        _git(e2e.repo, "checkout", "-q", "main")
        published = _pr_run(e2e, server, 704, second)
    assert "published:" in published, published[-3000:]
    assert not server.violations, "\n".join(server.violations[:10])
    [comment] = server.issue_comments(SECOND_PR)
    body = comment["body"]
    assert body.split("\n")[1].startswith("## ❌")  # against main: the epilogue group is new
    since = body[body.index("### Since the previous run of this PR") :]
    since = since[: since.index("### Failure groups")]
    # One group per dtype (bfloat16, float32) of each breakage.
    fixed = [ln for ln in since.splitlines() if ln.startswith("| ✔️ fixed")]
    new = [ln for ln in since.splitlines() if ln.startswith("| 🆕 new")]
    assert len(fixed) == 2 and all("new tiling" in ln for ln in fixed), since
    assert len(new) == 2 and all("new epilogue" in ln for ln in new), since
    against_main = body[body.index("### Failure groups") :].split("### Coverage")[0]
    assert "new epilogue" in against_main and "new tiling" not in against_main
    # Kept by the publisher under PR 8's number; main's baselines untouched.
    pulls = RunStore(f"{e2e.store}/pulls/codertocat/hello-world/{SECOND_PR}")
    assert len(pulls.entries()) == 2
    assert [e.run_id for e in RunStore(str(e2e.store)).entries()] == [baseline["run_id"]]


def _baseline_run(e2e: Env, server: GitHubServer, run_id: int) -> str:
    sha = _git(e2e.repo, "rev-parse", "HEAD")
    data = payload("push")
    data.update(ref="refs/heads/main", before="0" * 40, after=sha)
    data["repository"]["full_name"] = REPO
    data["repository"].update(default_branch="main", master_branch="main")
    conn = {"env": {"GITHUB_API_URL": server.url}, "secrets": {"GITHUB_TOKEN": BOT_TOKEN}}
    return e2e.act("push", "baseline.yml", data, run_id=run_id, **conn)


def test_a_baseline_that_adds_a_failure_group_opens_the_tracking_issue_the_next_clean_one_closes_it(
    e2e: Env, baseline: dict[str, Any]
) -> None:
    """Main compared with its previous baseline. The repository's thresholds (a config file
    on main) leave latency noise out of the verdict, so red and clean come from the groups."""
    _git(e2e.repo, "checkout", "-q", "main")
    config = e2e.repo / ".github" / "collectbot.yml"
    config.write_text("min_effect: 5.0\n")
    backend = e2e.repo / BACKEND_FILE
    original = backend.read_text()
    anchor = "    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:\n"
    backend.write_text(original.replace(anchor, MAIN_BREAKAGE))
    _git(e2e.repo, "add", "-A")
    _git(e2e.repo, "commit", "-q", "-m", "a regression merged to main")
    broken = _git(e2e.repo, "rev-parse", "HEAD")
    server = _server(e2e.head_sha, e2e.base_sha)
    with server.running():
        log = _baseline_run(e2e, server, 801)
        assert "tracking issue: opened" in log, log[-4000:]
        [issue] = server.issues.values()
        assert issue["state"] == "open" and issue["user"].login == "github-actions[bot]"
        assert "merged on main" in issue["body"]
        assert [(s["sha"], s["state"]) for s in server.statuses] == [(broken, "failure")]
        backend.write_text(original)
        _git(e2e.repo, "commit", "-q", "-am", "revert the regression")
        fixed = _git(e2e.repo, "rev-parse", "HEAD")
        log = _baseline_run(e2e, server, 811)
        assert "tracking issue: closed" in log, log[-4000:]
    assert not server.violations, "\n".join(server.violations[:10])
    [issue] = server.issues.values()  # the same issue, updated
    assert issue["state"] == "closed" and "is clean again" in issue["body"]
    assert server.statuses[-1]["sha"] == fixed and server.statuses[-1]["state"] == "success"
    assert len(RunStore(str(e2e.store)).entries(ref="main")) == 3  # 101, 801 and 811
