"""Main compared with its previous baseline: the one tracking issue and the commit status,
through `collectbot track` against the local GitHub server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from bot.cli import app
from bot.render.tracking import marker_key
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.github_server import GitHubServer
from tests.github_server.server import User

runner = CliRunner()
CASES = [gemm_case(m) for m in (1, 2, 4, 8)]
SHAS = [f"{i:x}" * 40 for i in range(1, 6)]
CONTEXT = "collectbot/main/torch/Test GPU"


def _baseline(tmp: Path, name: str, rng: np.random.Generator, broken: bool) -> Path:
    return write_record(
        tmp / name,
        CASES,
        lambda c: None if broken and c is CASES[0] else simulated_runs(rng, 1.0),
        failures=[failure(CASES[0], "merged kernel faults for m=1")] if broken else [],
    )


def _track(tmp: Path, previous: Path, new: Path, sha: str) -> str:
    out = tmp / f"cmp-{new.name}"
    result = runner.invoke(app, ["compare", str(previous), str(new), "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["track", str(out), "--sha", sha, "--ref", "main", "--repo", "Codertocat/Hello-World"]
    )
    assert result.exit_code == 0, result.output
    return result.output


def _ours(gh: GitHubServer) -> list[dict[str, object]]:
    return [i for i in gh.issues.values() if i["user"].type == "Bot"]


def test_a_red_baseline_opens_one_issue_the_next_updates_it_and_a_clean_one_closes_it(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    # Someone pastes the marker into their own issue: it is never taken for the bot's.
    clean_run = _baseline(tmp_path, "b0", rng, broken=False)
    key = "torch/2.11.0/test-gpu/gemm"
    forged = gh.create_issue(
        "fake", f"<!-- collectbot-tracking key={key} -->\nmine", User("maintainer", 5)
    )
    broken = _baseline(tmp_path, "b1", rng, broken=True)
    assert "tracking issue: opened" in _track(tmp_path, clean_run, broken, SHAS[0])
    [issue] = _ours(gh)
    assert issue["number"] != forged["number"] and forged["body"].endswith("mine")
    assert marker_key(str(issue["body"])) == key and issue["state"] == "open"
    assert "merged kernel faults" in str(issue["body"]) and "❌" in str(issue["body"])
    assert [(s["sha"], s["state"], s["context"]) for s in gh.statuses] == [
        (SHAS[0], "failure", CONTEXT)
    ]
    # Still red at the next baseline (compared with the previous one: a new group again).
    broken2 = write_record(
        tmp_path / "b2", CASES, lambda c: None if c is CASES[1] else simulated_runs(rng, 1.0),
        failures=[failure(CASES[1], "another fault")],
    )  # fmt: skip
    assert "tracking issue: updated" in _track(tmp_path, broken, broken2, SHAS[1])
    [issue] = _ours(gh)
    assert "another fault" in str(issue["body"]) and issue["state"] == "open"
    # Clean: the same issue says so and is closed; the status is success.
    clean2 = _baseline(tmp_path, "b3", rng, broken=False)
    assert "tracking issue: closed" in _track(tmp_path, broken2, clean2, SHAS[2])
    [issue] = _ours(gh)
    assert issue["state"] == "closed" and "is clean again" in str(issue["body"])
    assert gh.statuses[-1]["state"] == "success" and gh.statuses[-1]["sha"] == SHAS[2]
    # Clean again: nothing to update. Red again: the one issue is reopened, not a second.
    clean3 = _baseline(tmp_path, "b4", rng, broken=False)
    assert "tracking issue: clean" in _track(tmp_path, clean2, clean3, SHAS[3])
    broken3 = _baseline(tmp_path, "b5", rng, broken=True)
    assert "tracking issue: reopened" in _track(tmp_path, clean3, broken3, SHAS[4])
    [again] = _ours(gh)
    assert again["number"] == issue["number"] and again["state"] == "open"
    assert forged["body"].endswith("mine") and forged["state"] == "open"


def test_a_bad_sha_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["track", str(tmp_path), "--sha", "main"])
    assert result.exit_code == 2 and result.output.startswith("error: --sha: 'main'")


def test_the_issue_body_carries_the_stored_baselines_change_points(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """The store job writes the change points (`history --markdown`), the track job puts
    them in the issue: the steps of main's history, by commit, beside the verdict."""
    from tests.history_store import commit_of, grid_cases, make_store

    store = make_store(
        tmp_path / "store", tmp_path / "work", grid_cases(12), samples=4, collector_runs=4
    )
    block = tmp_path / "against" / "change-points.md"
    result = runner.invoke(
        app, ["history", "--store", store.url, "--ref", "main", "--markdown", str(block)],
        env={"GITHUB_REPOSITORY": "Codertocat/Hello-World"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    old, new = commit_of(store.step_at - 1)[:7], commit_of(store.step_at)[:7]
    assert f"`{old}..{new}`" in block.read_text()
    clean_run = _baseline(tmp_path, "b0", rng, broken=False)
    broken = _baseline(tmp_path, "b1", rng, broken=True)
    out = tmp_path / "cmp"
    assert (
        runner.invoke(app, ["compare", str(clean_run), str(broken), "--out", str(out)]).exit_code
        == 0
    )
    args = ["track", str(out), "--sha", SHAS[0], "--repo", "Codertocat/Hello-World"]
    result = runner.invoke(app, [*args, "--change-points", str(block)])
    assert result.exit_code == 0, result.output
    [issue] = _ours(gh)
    body = str(issue["body"])
    assert "merged kernel faults" in body and f"`{old}..{new}`" in body
    # A missing file is one error line, exit 2.
    result = runner.invoke(app, [*args, "--change-points", str(tmp_path / "nope.md")])
    assert result.exit_code == 2 and result.output.count("error:") == 1
