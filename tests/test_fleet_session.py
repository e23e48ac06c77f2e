"""The H200 fleet validation script, every step end to end on the CPU (tiny case set)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from bench.gpu import fleet_session as fs
from collector.caseplan import build_plan

TABLE = fs.default_table() or Path("unset")


@pytest.mark.skipif(not TABLE.is_file(), reason="the H200 reference table is not here")
def test_draw_is_seeded_outside_the_project_cases_and_matches_the_committed_file(
    tmp_path: Path,
) -> None:
    out = tmp_path / "cases.yaml"
    report = fs.draw(TABLE, 26, 64, out)
    assert report["drawn"] == 64 and set(report["by_dtype"]) == {"bfloat16", "fp8"}
    plan = build_plan(("gemm",), case_file=out)
    shapes = {
        (c.params["gemm_dtype"], c.params["m"], c.params["n"], c.params["k"]) for c in plan.cases
    }
    assert len(shapes) == 64 and not shapes & fs.project_shapes()
    # The committed case file is this draw: what runs on the GPU is what was drawn here.
    assert out.read_text() == fs.CASE_FILE.read_text()
    other = tmp_path / "other.yaml"
    fs.draw(TABLE, 27, 64, other)
    assert other.read_text() != out.read_text()


def test_bad_inputs_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fs.main(["analyse", str(tmp_path)]) == 2
    missing = tmp_path / "none.tar.gz"
    args = ["cand", "--out", str(tmp_path / "o"), "--baseline", str(missing), "--device", "cpu"]
    assert fs.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err), err


def test_base_cand_and_analyse_run_end_to_end_on_cpu_stand_in_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # base on one CPU worker (stand-in device 0); cand on two (devices 0 and 1), so half
    # the cases cross devices and are calibrated through the panels, as on a fleet.
    common = ["--cases", str(fs.CASE_FILE), "--case-set", "cpu", "--device", "cpu"]
    common += ["--test-protocol"]
    base_out = tmp_path / "base-out"
    assert fs.main(["base", "--out", str(base_out), "--work", str(tmp_path / "wb"), *common]) == 0
    assert sorted(p.name for p in base_out.iterdir()) == sorted([fs.BASE_SUMMARY, fs.BASE_TAR])
    base = json.loads((base_out / fs.BASE_SUMMARY).read_text())
    assert base["status"] == "complete" and len(base["gpu_uuids"]) == 1
    assert base["cost"]["panel_runs_per_kernel"] == 3 and base["cost"]["cases"] == 6

    cand_out = tmp_path / "cand-out"
    args = ["cand", "--out", str(cand_out), "--work", str(tmp_path / "wc"), *common]
    args += ["--baseline", str(base_out / fs.BASE_TAR), "--workers", "2"]
    assert fs.main(args) == 0
    files = sorted(cand_out.iterdir())
    assert [p.name for p in files] == sorted([fs.CAND_SUMMARY, fs.CAND_TAR])
    assert all(p.stat().st_size < 16 << 20 for p in files)
    with tarfile.open(cand_out / fs.CAND_TAR) as tar:
        names = set(tar.getnames())
    for cmp in ("A-vs-base", "C-vs-base", "A-vs-B"):
        assert f"comparisons/{cmp}/comparison.json" in names
        assert f"comparisons/{cmp}/comment.md" in names
    assert "store" in names and "A/run.json" in names
    summary = json.loads((cand_out / fs.CAND_SUMMARY).read_text())
    cmps = summary["comparisons"]
    assert cmps["A-vs-base"]["gpu_cases"]["calibrated"] > 0
    assert cmps["A-vs-base"]["gpu_cases"]["same"] > 0
    assert cmps["A-vs-base"]["baseline_selection"] == "same-model"
    assert cmps["A-vs-B"]["mode"] == "same-gpu"
    assert cmps["C-vs-base"]["slowed"] == summary["canary"]["cases"] > 0
    assert len(summary["candidates"]["A"]["gpu_uuids"]) == 2

    (cand_out / fs.BASE_SUMMARY).write_text((base_out / fs.BASE_SUMMARY).read_text())
    capsys.readouterr()
    assert fs.main(["analyse", str(cand_out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cross_gpu"] is True
    assert report["unchanged_vs_base"]["of"] == 6
    assert report["canary_vs_base"]["of"] == summary["canary"]["cases"]
    assert report["cost"]["panel_kernels"] == 4
    assert report["phase_seconds"]["base"] == base["seconds"]
    # The comparisons redone here from the packed records and store (a GPU machine without
    # the comparison's dependencies still returns its records) give the same verdicts.
    assert fs.main(["analyse", str(cand_out), "--recompute"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["unchanged_vs_base"] == report["unchanged_vs_base"]
    assert again["same_gpu_aa"] == report["same_gpu_aa"]
