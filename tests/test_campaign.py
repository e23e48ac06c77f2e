"""Paired A/B campaigns for real: two git refs of this repository, collected on the CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.campaign.runner import Campaign, device_identity
from bot.cli import app
from collector.caseplan import CaseSelector, build_plan
from collector.errors import UserError
from collector.record import read_record, sha256_file
from tests.factories import small_campaign
from tests.schema_check import assert_valid_comparison

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
CANARY = "m=64,n=512"
FILTER = "m=64"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    out = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of this checkout with two commits: base, and head with a collector change."""
    dest = tmp_path_factory.mktemp("ab") / "repo"
    files = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard").splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "base")
    with (dest / "collector" / "ops" / "gemm.py").open("a") as fh:
        fh.write("\n# head: a collector change (the code each side runs differs)\n")
    _git(dest, "commit", "-q", "-am", "head")
    yield dest


def _campaign_args(repo: Path, out: Path, *extra: str) -> list[str]:
    return [
        "campaign",
        "--repo",
        str(repo),
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--out",
        str(out),
        "--runs",
        "3",
        "--confirm-runs",
        "3",
        "--case-set",
        "smoke",
        "--case-filter",
        FILTER,
        "--samples",
        # Ten: a run's 10% trimmed value drops one sample at each end, so one sample that a
        # shared CI host stalled cannot move the run (five trim none: CI saw a x10 canary
        # judged inconclusive).
        "10",
        "--warmup",
        "1",
        "--idle-ratio",
        "0",
        "--target-sample-ms",
        "2",
        "--quiet",
        *extra,
    ]


def _figures(case: dict[str, Any]) -> str:
    """A case's verdict and the figures behind it, short enough for pytest to print whole."""
    names = ("verdict", "ratio", "lo", "hi", "q", "noise", "threshold", "levels", "drift")
    shown = {n: case.get(n) for n in names}
    return f"{case['key']}: {shown}; replication {case.get('confirmation')}"


@pytest.fixture(scope="module")
def campaign_dir(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Any]]:
    out = tmp_path_factory.mktemp("campaign") / "ab"
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # steadier CPU timings under load
    result = runner.invoke(
        app, _campaign_args(repo, out, "--canary-slow", CANARY, "--canary-factor", "10")
    )
    yield out, result


@pytest.mark.slow
def test_campaign_alternates_two_refs_and_keeps_raw_rounds(
    campaign_dir: tuple[Path, Any], repo: Path
) -> None:
    out, result = campaign_dir
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "campaign.json").read_text())
    assert manifest["status"] == "complete"
    base_sha, head_sha = _git(repo, "rev-parse", "HEAD~1"), _git(repo, "rev-parse", "HEAD")
    assert (manifest["base"]["sha"], manifest["head"]["sha"]) == (base_sha, head_sha)
    main = [r["side"] for r in manifest["rounds"] if r["phase"] == "main"]
    assert main == ["base", "head", "head", "base", "base", "head"]
    confirm = [r["side"] for r in manifest["rounds"] if r["phase"] == "confirm"]
    assert confirm == ["head", "base", "base", "head", "head", "base"]
    # Every round is its own record, kept with its checksum.
    for r in manifest["rounds"]:
        assert sha256_file(out / r["path"] / "run.json") == r["run_json_sha256"]
        assert read_record(out / r["path"]).meta["git_sha"] == r["sha"]
    base, head = read_record(out / "main" / "base-run"), read_record(out / "main" / "head-run")
    # Each side ran its own ref's code.
    assert (base.meta["git_sha"], head.meta["git_sha"]) == (base_sha, head_sha)
    assert base.meta["collector_hash"] != head.meta["collector_hash"]
    assert head.meta["canary"]["slow"] == CANARY and base.meta["canary"] is None
    # The merged records hold every round's runs.
    assert sorted(set(base.samples["gemm"].column("run").to_pylist())) == [0, 1, 2]
    assert base.meta["protocol"]["runs"] == 3
    assert len(base.meta["rounds"]) == 3
    assert manifest["device_identity"]["kind"] == "cpu"


@pytest.mark.slow
def test_campaign_confirms_the_canary_before_commenting(campaign_dir: tuple[Path, Any]) -> None:
    out, result = campaign_dir
    assert result.exit_code == 0, result.output
    slowed = {
        c.key
        for c in build_plan(
            ("gemm",), case_set="smoke", case_filter=CaseSelector.parse(FILTER)
        ).cases
        if CaseSelector.parse(CANARY).matches(c)
    }
    first = assert_valid_comparison(out / "first-pass")
    assert first["confirmation"]["performed"] is False
    flagged = set((out / "confirm" / "cases.txt").read_text().split())
    first_changed = {c["key"] for c in first["latency"]["cases"] if c["verdict"] != "same"}
    assert flagged == first_changed
    assert slowed <= flagged
    final = assert_valid_comparison(out / "comparison")
    assert final["baseline"]["kind"] == "merge-base"
    assert final["baseline"]["paired"] is True
    assert final["confirmation"]["performed"] is True
    assert final["confirmation"]["remeasured"] == len(flagged)
    by_key = {c["key"]: c for c in final["latency"]["cases"]}
    for key in slowed:
        case = by_key[key]
        assert case["remeasured"] and case["base_runs"] == 6
        assert case["verdict"] == "regressed", _figures(case)
        assert case["confirmed"] is True
    assert final["verdict"]["level"] == "red"
    comment = (out / "comment.md").read_text()
    assert "confirmed" in comment
    assert "baseline: merge base's run (paired)" in comment


@pytest.mark.slow
def test_the_comparison_is_recomputed_from_stored_samples(
    campaign_dir: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, result = campaign_dir
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "campaign.json").read_text())
    command = manifest["recompute"]
    assert command[:2] == ["collectbot", "compare"]
    stored = json.loads((out / "comparison" / "comparison.json").read_text())
    shutil.move(out / "comparison", out / "comparison.orig")
    monkeypatch.chdir(out)
    again = runner.invoke(app, command[1:])
    assert again.exit_code == 0, again.output
    recomputed = json.loads((out / "comparison" / "comparison.json").read_text())
    for section in ("latency", "failure_groups", "coverage", "verdict", "settings"):
        assert recomputed[section] == stored[section], section
    for name in ("remeasured", "confirmed", "overturned", "resolved"):
        assert recomputed["confirmation"][name] == stored["confirmation"][name]


def test_device_identity() -> None:
    cuda = {"device": {"kind": "cuda", "uuid": "GPU-1", "name": "H200", "host": "a"}}
    assert device_identity(cuda) == {"kind": "cuda", "uuid": "GPU-1"}
    cpu = {"device": {"kind": "cpu", "host": "a", "cpu": "EPYC", "name": "CPU (EPYC)"}}
    assert device_identity(cpu) == {"kind": "cpu", "host": "a", "cpu": "EPYC"}


@pytest.mark.slow
def test_a_round_on_another_device_stops_the_campaign(repo: Path, tmp_path: Path) -> None:
    campaign = Campaign(small_campaign(repo, tmp_path / "ab"))
    campaign.identity = {"kind": "cpu", "host": "elsewhere", "cpu": "another CPU"}
    from bot.campaign.git import worktree

    with worktree(campaign.repo, campaign.shas["base"], tmp_path / "tree") as tree:
        from bot.campaign.runner import Side

        side = Side("base", "HEAD~1", campaign.shas["base"], tree)
        with pytest.raises(UserError, match="must stay on one device"):
            campaign._collect(side, tmp_path / "ab" / "r0", campaign.cfg.selection_args, "main")
    assert "worktree" not in _git(repo, "worktree", "list").split()[-1]


def test_bad_campaign_inputs_are_one_line_errors(repo: Path, tmp_path: Path) -> None:
    for args, needle in (
        (["--base", "no-such-ref"], "names no commit"),
        (["--device", "cuda"], "cuda:N"),
        (["--base", "--upload-pack=x"], "may not start"),
    ):
        cmd = _campaign_args(repo, tmp_path / "x")
        for flag, value in zip(args[::2], args[1::2], strict=True):
            cmd[cmd.index(flag) + 1] if flag in cmd else None
            if flag in cmd:
                cmd[cmd.index(flag) + 1] = value
            else:
                cmd += [flag, value]
        result = runner.invoke(app, cmd)
        assert result.exit_code == 2, result.output
        assert needle in result.output
