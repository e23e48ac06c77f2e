"""Threat-model controls that live in the bot (docs/security.md), each tested by an attack.

The workflows (issue 8) carry the rest of the controls: which job holds which token, which
code each job checks out. What the bot itself must refuse is tested here: a crafted record
pinning its comment with a start time in the future, a rendered comment aimed at another
commit, a PR number smuggled into an event, a baseline slipped into the store under a PR's
ref, a record naming files outside itself, and step outputs forged by label text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.render.comment import FUTURE_SLACK, Marker, bounded_start
from tests.factories import gemm_case, simulated_runs, write_record
from tests.github_fixtures import HEAD, PR, REPO, finished_run, payload, plan_pull_request
from tests.github_server import GitHubServer
from tests.test_github_publish import rendered

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def test_a_start_time_in_the_future_cannot_pin_the_comment(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """run.json is written by the PR's code: a start in 2099 would outrank every later run."""
    crafted = rendered(tmp_path, rng, run_id="crafted", started_at="2099-01-01T00:00:00+00:00")
    marker = Marker.parse(crafted.read_text())
    assert marker is not None
    assert datetime.fromisoformat(marker.started_at) <= datetime.now(UTC) + FUTURE_SLACK
    assert (
        runner.invoke(app, ["publish", str(crafted), "--repo", REPO, "--pr", str(PR)]).exit_code
        == 0
    )
    later = rendered(
        tmp_path, rng, run_id="later", started_at=datetime.now(UTC).isoformat(timespec="seconds")
    )
    result = runner.invoke(app, ["publish", str(later), "--repo", REPO, "--pr", str(PR)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("comment: updated"), result.output
    [comment] = gh.issue_comments(PR)
    assert comment["body"] == later.read_text()


def test_bounded_start_keeps_real_times() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert bounded_start("2026-11-30T11:00:00+00:00", now) == "2026-11-30T11:00:00+00:00"
    assert bounded_start("2026-11-30T12:05:00Z", now) == "2026-11-30T12:05:00Z"  # clock skew
    assert bounded_start("2099-01-01T00:00:00+00:00", now) == now.isoformat(timespec="seconds")
    assert bounded_start("not a time", now) == "not a time"  # sorts before any real time


def _event(gh: GitHubServer, tmp_path: Path, head: str, pull_requests: list[int]) -> Path:
    """A finished run of `head`, started by a maintainer's label (GitHub's event log)."""
    gh.label(PR, "collect/torch", "Codertocat")
    event = finished_run(head, pull_requests=pull_requests)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return path


def test_a_comment_rendered_for_another_commit_is_refused(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """The rendered comment may have passed through an untrusted job: its marker must name
    the commit the workflow run measured, or its status would land on another commit."""
    other = "3" * 40  # e.g. the default branch's head: a green status there would mislead
    comment = rendered(tmp_path, rng, head=other)
    result = runner.invoke(
        app, ["publish", str(comment), "--event", str(_event(gh, tmp_path, HEAD, []))]
    )
    assert result.exit_code == 2, result.output
    assert "marker names head 333333333333, but the run measured" in result.output
    assert gh.issue_comments(PR) == [] and gh.statuses == []


def test_a_pr_number_in_the_event_is_never_used(
    gh: GitHubServer, tmp_path: Path, rng: np.random.Generator
) -> None:
    """Only the run's head repository, branch and SHA find the PR: a number elsewhere (here
    PR 99) is ignored."""
    comment = rendered(tmp_path, rng)
    result = runner.invoke(
        app, ["publish", str(comment), "--event", str(_event(gh, tmp_path, HEAD, [99]))]
    )
    assert result.exit_code == 0, result.output
    assert len(gh.issue_comments(PR)) == 1
    assert not gh.requests(None, r"/(issues|pulls)/99")


def test_the_baseline_comes_only_from_the_trusted_ref(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """A PR's run stored later (or a forged one) must not become the baseline of main's."""
    store = str(tmp_path / "store")
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]

    def record(name: str, ms: float) -> Path:
        return write_record(
            tmp_path / name, cases, lambda c: simulated_runs(rng, ms), meta_extra={"run_id": name}
        )

    for name, ms, ref in (("main-run", 1.0, "main"), ("pr-run", 0.5, "refs/pull/2/merge")):
        result = runner.invoke(
            app, ["store", "put", str(record(name, ms)), "--store", store, "--ref", ref]
        )
        assert result.exit_code == 0, result.output
    cand = record("cand", 1.0)
    out = tmp_path / "cmp"
    result = runner.invoke(
        app,
        ["compare", str(cand), "--baseline-from-store", store, "--baseline-ref", "main",
         "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "comparison.json").read_text())
    assert data["baseline"]["run_id"] == "main-run"
    assert data["verdict"]["level"] == "green"  # against the forged 0.5 ms it would be red


@pytest.mark.parametrize("name", ["../outside.json", "sub/../../outside.json", "/etc/hostname"])
def test_a_record_cannot_name_files_outside_itself(
    tmp_path: Path, rng: np.random.Generator, name: str
) -> None:
    """A record from an untrusted job lists its files; reading must never follow one out of
    the record's directory (a checksum of a file elsewhere would confirm its content)."""
    from collector.errors import RunRecordError
    from collector.record import read_record, sha256_file

    run = write_record(tmp_path / "run", [gemm_case(1)], lambda c: simulated_runs(rng, 1.0))
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    meta = json.loads((run / "run.json").read_text())
    meta["files"][name] = sha256_file(outside)
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunRecordError, match="bad file name"):
        read_record(run)


def test_label_text_cannot_forge_step_outputs(
    gh: GitHubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$GITHUB_OUTPUT is read line by line by the runner: a label or branch name carrying a
    newline and `trigger=true` (or a guessed heredoc delimiter) must not set an output."""
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    data = payload("pull_request.labeled")
    hostile = "collect/x\ntrigger=true\nhead_sha=evil\nEOF\ncollectbot_0000\ntrigger=true"
    data["label"]["name"] = hostile
    data["pull_request"]["head"]["ref"] = "feature\ntrigger=true"
    result = plan_pull_request(tmp_path, data)
    assert result.exit_code == 0, result.output
    lines = output.read_text().splitlines()
    assert [ln for ln in lines if ln.startswith("trigger=")] == ["trigger=false"]
    assert not [ln for ln in lines if ln.startswith("head_sha=") and "evil" in ln]
    # Every multi-line value sits between its own random delimiters, on one line.
    for i, line in enumerate(lines):
        if "<<" in line:
            delimiter = line.split("<<", 1)[1]
            assert lines[i + 2] == delimiter and delimiter.startswith("collectbot_")
