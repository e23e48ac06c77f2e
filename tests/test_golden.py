"""Golden files for what maintainers read: the PR comment, the run-only comments and the HTML
reports, rendered from fixed inputs (tests/golden.py). `pytest --update-golden` rewrites them;
the diff is the review of a rendering change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.compare.comparison import Baseline, compare_runs, load_cases
from bot.render.comment import RenderOptions, render_comment, render_run_comment
from bot.render.html import render_html_report, render_run_html_report
from bot.render.run_summary import load_run_info
from collector.record import read_record
from tests.factories import gemm_case, write_record
from tests.golden import (
    STAMP,
    check_golden,
    fold_assets,
    golden_runs,
    inlined_assets,
    report_head,
    shipped_assets,
    shipped_head,
    stamped_failure,
)

# A comparison's JSON and every case (cases.parquet), as render reads them.
Rendered = tuple[dict[str, Any], list[dict[str, Any]]]
ARTIFACTS = "https://github.com/acme/kernels/actions/runs/123456"
REPORT = "https://acme.github.io/kernels/runs/123456/report.html"


@pytest.fixture
def comparison(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rendered:
    monkeypatch.chdir(tmp_path)  # the records' paths, as the comparison cites them, are fixed
    base, cand = golden_runs(Path("."))
    result = compare_runs(
        read_record(base),
        read_record(cand),
        baseline=Baseline(
            kind="previous-run",
            store={"url": "s3://acme-runs", "key": "torch/gemm", "entry": "e1", "ref": "main"},
        ),
    )
    data = {**result.data, "generated_at": STAMP}
    path = result.write(Path("cmp"))
    return data, load_cases(path, data)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A partial run: two cases measured, one out of memory; fixed SHA and stamps."""
    monkeypatch.chdir(tmp_path)
    cases = [gemm_case(m) for m in (1, 16, 128)]
    return write_record(
        Path("run"),
        cases,
        lambda c: None if c is cases[2] else [[0.05] * 8] * 6,
        failures=[stamped_failure(cases[2], "CUDA error: out of memory", "OutOfMemoryError")],
        status="partial",
        meta_extra={"git_sha": "841efd6666790000000000000000000000000000", "run_id": "run"},
    )


def test_the_pr_comment(comparison: Rendered, update_golden: bool) -> None:
    data, _ = comparison
    body = render_comment(data, RenderOptions(artifacts_url=ARTIFACTS, report_url=REPORT))
    check_golden("pr-comment.md", body, update_golden)


def test_the_html_report(comparison: Rendered, update_golden: bool) -> None:
    data, cases = comparison
    check_golden("report.html", fold_assets(render_html_report(data, cases)), update_golden)


def test_the_run_only_comment(run: Path, update_golden: bool) -> None:
    opts = RenderOptions(artifacts_url=ARTIFACTS)
    check_golden("run-comment.md", render_run_comment(load_run_info(run), opts), update_golden)
    report = fold_assets(render_run_html_report(load_run_info(run)))
    check_golden("run-report.html", report, update_golden)
    Path("died").mkdir()
    missing = RenderOptions(artifacts_url=ARTIFACTS, started_at=STAMP, backend="vllm", gpu="H200")
    info = load_run_info(Path("died"), stage="collect", error="the runner lost its GPU")
    check_golden("run-missing-comment.md", render_run_comment(info, missing), update_golden)


def test_the_reports_inline_the_shipped_assets(comparison: Rendered, run: Path) -> None:
    """What the golden reports hold as a sha256 line: the template's fixed head (its CSP
    among it), stylesheet and script, whole in both reports; a changed byte in any of them
    changes the folded golden."""
    shipped = shipped_assets()
    assert [b.split(">")[0] for b in shipped] == ["<style", "<script"]
    head = shipped_head()
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';' in head
    reports = [render_html_report(*comparison), render_run_html_report(load_run_info(run))]
    for report in reports:
        assert inlined_assets(report) == shipped
        assert report_head(report) == head
        changed_head = fold_assets(report.replace("default-src 'none'", "default-src *"))
        assert changed_head.splitlines()[0] != fold_assets(report).splitlines()[0]
        changed = report.replace("PAGE = ", "PAGE = 1").replace("h1 { font-size", "h1 { size")
        folded = fold_assets(changed).splitlines()
        assert len(folded) == len(fold_assets(report).splitlines())
        assert len(set(folded) - set(fold_assets(report).splitlines())) == 2


def test_a_changed_rendering_fails_with_its_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLECTBOT_UPDATE_GOLDEN", raising=False)
    body = (Path(__file__).parent / "golden" / "run-comment.md").read_text()
    with pytest.raises(AssertionError, match=r"(?s)run-comment.md differs.*\+extra line"):
        check_golden("run-comment.md", body + "extra line\n", update=False)
