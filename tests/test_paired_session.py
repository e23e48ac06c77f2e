"""The H200 paired-default validation script, both steps end to end on the CPU (tiny set)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from bench.gpu import fleet_session as fs
from bench.gpu import paired_session as ps

CPU = ["--cases", str(fs.CASE_FILE), "--case-set", "cpu", "--test-protocol"]


@pytest.fixture(scope="module")
def store_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored baseline of the cpu set, as the fleet session's base step leaves it."""
    out = tmp_path_factory.mktemp("base")
    assert fs.main(["base", "--out", str(out), "--device", "cpu", *CPU]) == 0
    return out / fs.BASE_TAR


def test_bad_inputs_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.tar.gz"
    assert ps.main(["aa", "--out", str(tmp_path / "o"), "--baseline", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {missing}: baseline tarball not found"]


@pytest.mark.parametrize("step", ["aa", "canary"])
def test_campaign_runs_end_to_end_on_the_cpu(
    step: str, store_tar: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = [step, "--out", str(out), "--baseline", str(store_tar), "--device", "cpu", *CPU]
    assert ps.main(args) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([f"paired-{step}-summary.json", f"paired-{step}-records.tar.gz"])
    summary = json.loads((out / f"paired-{step}-summary.json").read_text())
    assert json.loads(capsys.readouterr().out) == summary
    with tarfile.open(out / f"paired-{step}-records.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"campaign/campaign.json", "campaign/comparison/comparison.json"} <= names
    assert "campaign/context-vs-store/comparison.json" in names
    # Both sides ran the one throwaway commit, alternately, on one stand-in device.
    paired = summary["paired"]
    assert paired["mode"] == "same-gpu" and paired["cases"] == 6
    assert summary["device_identity"]["kind"] == "cpu"
    cost = summary["cost"]
    assert cost["rounds"] >= 2 * ps.TEST_RUNS and cost["round_seconds"]["main"] > 0
    assert cost["seconds_per_case"] > 0
    assert summary["single_collection"]["cost"]["cases"] == 6
    assert "error" not in summary["context_vs_store"], summary["context_vs_store"]
    if step == "canary":
        # The stored baseline's cases of 40 us or more (on a CPU most of them) are slowed.
        assert len(summary["canary"]["keys"]) == paired["slowed"] >= 3
        assert paired["others_flagged"] == 0
    else:
        assert summary["canary"]["keys"] == [] and "slowed" not in paired


def test_a_campaign_past_its_deadline_keeps_two_rounds_a_side_and_says_so(tmp_path: Path) -> None:
    import time

    from bot.campaign.runner import Campaign, CampaignConfig

    sha = ps.throwaway_repo(tmp_path / "repo")
    cfg = CampaignConfig(
        repo=tmp_path / "repo",
        base_ref=sha,
        head_ref=sha,
        out=tmp_path / "ab",
        runs=4,
        collect_args=["--case-set", "smoke", "--limit", "1", *ps.TEST_ROUND_ARGS],
        deadline=time.monotonic(),  # already past: only the minimum is run
    )
    result = Campaign(cfg).run()
    manifest = json.loads(result.manifest.read_text())
    assert manifest["cut_short"] is True
    assert [r["side"] for r in manifest["rounds"]] == ["base", "head", "head", "base"]
    assert result.comparison.data["confirmation"]["performed"] is False
