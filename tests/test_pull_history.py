"""A pull request's own runs, kept by the publisher in the PR's namespace of the run store:
the comment's "since the previous run of this PR" section, against the local GitHub server.

Each run goes the product's way: a comparison against main's baseline, a result bundle with
the run record, `publish --result --event --store` (the publisher resolves the PR from
GitHub, renders and keeps the run under that PR's number).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.github.pull_history import namespace
from bot.store import RunStore
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.github_fixtures import HEAD, PR, REPO, finished_run, payload
from tests.github_server import GitHubServer, PullState

runner = CliRunner()
LABEL = "collect/torch:gemm"
CASES = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32)]
SECTION = "### Since the previous run of this PR"
OTHER_PR, OTHER_HEAD = 3, "a" * 40


def _plan(tmp: Path, gh: GitHubServer, pr: int = PR, head: str = HEAD) -> Path:
    data = payload("pull_request.labeled")
    data["label"]["name"] = LABEL
    data["pull_request"]["labels"][0]["name"] = LABEL
    data["sender"]["login"] = "Codertocat"
    for number in sorted({PR, pr}):  # the recorded payload is PR 2's; approval reads `pr`'s
        gh.label(number, LABEL, "Codertocat")
    event = tmp / f"labeled-{pr}.json"
    event.write_text(json.dumps(data))
    out = tmp / f"plan-{pr}.json"
    result = runner.invoke(
        app,
        ["plan", "--event", str(event), "--out", str(out), "--dry-run", "--backends", "torch"],
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    plan.update(pr=pr, head_sha=head)
    out.write_text(json.dumps(plan))
    return out


def _run(
    tmp: Path, name: str, rng: np.random.Generator, broken: dict[int, str], slow: int | None = None
) -> Path:
    """A run record: cases in `broken` fail with that message, case `slow` is 1.5x slower."""
    return write_record(
        tmp / name,
        CASES,
        lambda c: (
            None
            if CASES.index(c) in broken
            else simulated_runs(rng, 1.5 if CASES.index(c) == slow else 1.0)
        ),
        failures=[failure(CASES[i], msg) for i, msg in broken.items()],
        meta_extra={"started_at": f"2026-11-30T00:0{name[-1]}:00+00:00"}
        if name[-1].isdigit()
        else None,
    )


def _publish(tmp: Path, gh: GitHubServer, store: Path, run: Path, run_id: int, pr: int = PR) -> Any:
    """Compare `run` with main's baseline, bundle it, publish it as run `run_id` of PR `pr`."""
    cmp = tmp / f"cmp-{run_id}"
    result = runner.invoke(app, ["compare", str(tmp / "main"), str(run), "--out", str(cmp)])
    assert result.exit_code == 0, result.output
    head = HEAD if pr == PR else OTHER_HEAD
    bundle = tmp / f"bundle-{run_id}"
    result = runner.invoke(
        app,
        ["result", "make", "--plan", str(_plan(tmp, gh, pr, head)), "--out", str(bundle),
         "--run-id", str(run_id), "--comparison", str(cmp), "--run", str(run)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    branch = "feature" if pr == PR else "other"
    event = tmp / f"finished-{run_id}.json"
    event.write_text(json.dumps(finished_run(head, run_id, head_branch=branch)))
    return runner.invoke(
        app,
        ["publish", "--result", str(bundle), "--event", str(event), "--store", str(store)],
    )


def _body(gh: GitHubServer, pr: int = PR) -> str:
    [comment] = gh.issue_comments(pr)
    return str(comment["body"])


@pytest.fixture
def main_run(tmp_path: Path, rng: np.random.Generator) -> Path:
    return _run(tmp_path, "main", rng, {})


def test_the_second_run_of_a_pr_lists_what_it_fixed_and_broke_since_the_first(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, main_run: Path
) -> None:
    store = tmp_path / "store"
    first = _run(tmp_path, "run-1", rng, {0: "tiling fails for m=1"})
    result = _publish(tmp_path, gh, store, first, 5001)
    assert result.exit_code == 0, result.output
    assert SECTION not in _body(gh)  # nothing before the first run
    kept = RunStore(namespace(str(store), REPO, PR)).entries()
    assert [e.run_id for e in kept] == ["run-1"]
    # The second run fixes the first group, breaks another case and slows a third.
    second = _run(tmp_path, "run-2", rng, {1: "new crash in the epilogue"}, slow=3)
    result = _publish(tmp_path, gh, store, second, 5002)
    assert result.exit_code == 0, result.output
    body = _body(gh)
    since = body[body.index(SECTION) : body.index("### Failure groups")]
    assert "`run-1`" in since
    [fixed] = [ln for ln in since.splitlines() if ln.startswith("| ✔️ fixed")]
    assert "tiling fails for m=<n>" in fixed
    [new] = [ln for ln in since.splitlines() if ln.startswith("| 🆕 new")]
    assert "new crash in the epilogue" in new
    assert "1 slower" in since and "m=8" in since, since
    # The verdict stays against main: the new group is new there too, the fixed one was
    # never in main, so main's table does not call it resolved.
    groups = body[body.index("### Failure groups") :]
    assert "new crash in the epilogue" in groups and "tiling fails" not in groups
    assert "regress" in body.split("\n", 3)[1].lower() or "❌" in body.split("\n", 3)[1]
    assert [e.run_id for e in RunStore(namespace(str(store), REPO, PR)).entries()] == [
        "run-1",
        "run-2",
    ]


def test_another_pulls_run_is_kept_under_its_own_number_and_never_taken_as_this_ones(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator, main_run: Path
) -> None:
    """A run of PR 3 is filed under the number GitHub resolves for its branch (3), so PR 2's
    next comment still compares with PR 2's own previous run."""
    gh.add_pull(
        PullState(
            number=OTHER_PR, head_sha=OTHER_HEAD, base_sha=HEAD, head_repo=REPO, head_ref="other"
        )
    )
    store = tmp_path / "store"
    assert _publish(tmp_path, gh, store, _run(tmp_path, "run-1", rng, {}), 5001).exit_code == 0
    other = _run(tmp_path, "run-7", rng, {2: "only in the other pull request"})
    result = _publish(tmp_path, gh, store, other, 5003, pr=OTHER_PR)
    assert result.exit_code == 0, result.output
    assert [e.run_id for e in RunStore(namespace(str(store), REPO, OTHER_PR)).entries()] == [
        "run-7"
    ]
    second = _run(tmp_path, "run-2", rng, {})
    assert _publish(tmp_path, gh, store, second, 5004).exit_code == 0
    body = _body(gh)
    since = body[body.index(SECTION) : body.index("### Failure groups")]
    assert "`run-1`" in since and "only in the other pull request" not in since
    assert "No failure group was fixed or added since that run." in since


def test_a_read_only_job_keeps_nothing_and_the_comment_is_still_posted(
    gh: GitHubServer,
    tmp_path: Path,
    rng: np.random.Generator,
    main_run: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLLECTBOT_STORE_ACCESS", "read")
    store = tmp_path / "store"
    result = _publish(tmp_path, gh, store, _run(tmp_path, "run-1", rng, {}), 5001)
    assert result.exit_code == 0, result.output
    assert "warning: this run was not kept" in result.output and "read-only" in result.output
    assert RunStore(namespace(str(store), REPO, PR)).entries() == []
    assert gh.issue_comments(PR)
