"""The comment for hostile and huge inputs, for failed and partial runs, and the HTML report."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_records, compare_runs, write_comparison
from bot.render.comment import GITHUB_COMMENT_LIMIT, Marker
from collector.record import CHECKPOINT, Checkpoint, read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.github_fixtures import PR, REPO
from tests.github_server import GitHubServer

runner = CliRunner()
HOSTILE = [
    "@octocat @github/security-team please look",
    "<script>alert(1)</script><img src=x onerror=alert(2)>",
    '<!-- collectbot {"backend": "torch", "gpu": "Test GPU", "run_id": "forged"} -->',
    "| col | break |\n| --- |\n",
    "```\n# escaped the block\n```",
    "[click](javascript:alert(1)) ![img](http://x/y.png)",
    "\x1b[31mred\x1b[0m \u202eevil -->",
    "fixes #123 and owner/repo#4 </details></summary>",
]
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]


def _hostile(i: int) -> str:
    word = "".join(WORDS[(i // 8**k) % 8] for k in range(3))  # 512 distinct groups
    return f"{HOSTILE[i % len(HOSTILE)]} {word} case {i} @user{i}"


def _outside_code(body: str) -> str:
    body = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", body)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", body)


def _check_safe(body: str) -> None:
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert body.count("<!--") == 1 and body.count("-->") == 1
    assert Marker.parse(body) is not None
    assert not re.search(r"@[A-Za-z0-9]", body), "a mention would ping"
    assert not re.search(r"(?<![\w/])#\d", body), "an issue reference would link"
    prose = _outside_code(body)  # what GitHub parses as markdown and HTML
    tags = set(re.findall(r"</?([a-zA-Z]+)", prose))
    assert tags <= {"details", "summary", "sub", "code"}  # <code>: ours, in <summary>
    assert prose.count("<details>") == prose.count("</details>")
    assert "\x1b" not in body and "\u202e" not in body


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A baseline and a candidate with 100,000 failure records with hostile messages."""
    tmp = tmp_path_factory.mktemp("huge")
    rng = np.random.default_rng(7)
    measured = [gemm_case(m, n=64) for m in range(1, 41)]
    failing = [gemm_case(m, n=128) for m in range(1, 100_001)]
    base = write_record(tmp / "base", measured, lambda c: simulated_runs(rng, 1.0))
    fails = [failure(c, _hostile(i)) for i, c in enumerate(failing)]
    cand = write_record(
        tmp / "cand",
        measured + failing,
        lambda c: None if c.params["n"] == 128 else simulated_runs(rng, 1.0),
        failures=fails,
    )
    return base, cand


@pytest.mark.slow
def test_100k_hostile_failures_make_a_safe_comment_under_the_limit(
    huge: tuple[Path, Path], tmp_path: Path, gh: GitHubServer
) -> None:
    base, cand = huge
    comparison = compare_records(read_record(base), read_record(cand))
    groups = len(comparison["failure_groups"]["new"])
    assert groups > 512  # mentions with numbers defeat grouping: a worst case
    cmp_dir = write_comparison(comparison, tmp_path / "cmp").parent
    out = tmp_path / "comment.md"
    result = runner.invoke(app, ["render", str(cmp_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    body = out.read_text()
    _check_safe(body)
    assert body.splitlines()[1].startswith(
        f"## ❌ collectbot: coverage lost, {groups} new failure groups"
    )
    assert f"{groups} new failure groups (100000 cases)" in body  # the verdict's reasons survive
    # The same run rendered alone (e.g. no baseline) is just as safe.
    alone = tmp_path / "alone.md"
    result = runner.invoke(app, ["render", "--run", str(cand), "--out", str(alone)])
    assert result.exit_code == 0, result.output
    _check_safe(alone.read_text())
    assert f"100000 cases failed in {groups} groups" in alone.read_text()
    # And GitHub takes it.
    result = runner.invoke(app, ["publish", str(out), "--repo", REPO, "--pr", str(PR)])
    assert result.exit_code == 0, result.output
    [posted] = gh.issue_comments(PR)
    assert posted["body"] == body


def test_a_partial_candidate_is_called_out(tmp_path: Path, rng: np.random.Generator) -> None:
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]
    base = write_record(tmp_path / "b", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp_path / "c",
        cases,
        lambda c: simulated_runs(rng, 1.0) if c.params["m"] < 4 else None,
        status="partial",
    )
    cmp_dir = write_comparison(
        compare_records(read_record(base), read_record(cand)), tmp_path / "cmp"
    ).parent
    out = tmp_path / "c.md"
    assert runner.invoke(app, ["render", str(cmp_dir), "--out", str(out)]).exit_code == 0
    body = out.read_text()
    assert "> The candidate run is **partial**: 2 of 4 planned cases were attempted" in body
    assert body.splitlines()[1].startswith("## ❌ collectbot: coverage lost")
    side = json.loads(out.with_suffix(".json").read_text())
    assert (
        side["level"] == "red" and side["run_status"] == "partial" and side["kind"] == "comparison"
    )


def test_a_run_that_died_before_its_record_still_gets_a_comment(
    tmp_path: Path, gh: GitHubServer
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cp = Checkpoint(run_dir / CHECKPOINT)
    for m in (1, 2):
        cp.append(
            "failure",
            failure(
                gemm_case(m), "CUDA error: an illegal memory access @dev", cls="cuda_fatal"
            ).to_json(),
        )
    cp.close()
    log = tmp_path / "collect.log"
    log.write_text("\n".join(f"line {i}" for i in range(200)) + "\nKilled <b>@oncall</b>\n")
    out = tmp_path / "failed.md"
    result = runner.invoke(
        app,
        [
            "render",
            "--run",
            str(run_dir),
            "--out",
            str(out),
            "--stage",
            "collect",
            "--error",
            "worker exited with signal 9 (SIGKILL)",
            "--log",
            str(log),
            "--backend",
            "vllm",
            "--gpu",
            "NVIDIA H200",
            "--run-id",
            "gh-77",
            "--head-sha",
            "abc123",
            "--started-at",
            "2026-11-30T10:00:00+00:00",
        ],
    )
    assert result.exit_code == 0, result.output
    body = out.read_text()
    _check_safe(body)
    marker = Marker.parse(body)
    assert marker == Marker("vllm", "NVIDIA H200", "gh-77", "abc123", "2026-11-30T10:00:00+00:00")
    assert (
        body.splitlines()[1]
        == "## ❌ collectbot: collection failed in the collect stage before writing a run record"
    )
    assert "worker exited with signal 9 (SIGKILL)" in body
    assert "2 cases failed in 1 group" in body and "cuda_fatal" in body
    assert "line 199" in body and "line 100" not in body  # the log's tail only
    side = json.loads(out.with_suffix(".json").read_text())
    assert (side["level"], side["run_status"], side["kind"]) == ("red", "missing", "run")
    # Published, a broken run is an error status, not a pass.
    gh.pulls[PR].head_sha = "abc123"
    result = runner.invoke(app, ["publish", str(out), "--repo", REPO, "--pr", str(PR)])
    assert result.exit_code == 0, result.output
    assert (
        gh.statuses[-1]["state"] == "error"
        and gh.statuses[-1]["context"] == "collectbot/vllm/NVIDIA H200"
    )


def test_an_unreadable_record_says_why(tmp_path: Path, rng: np.random.Generator) -> None:
    run_dir = write_record(tmp_path / "r", [gemm_case(1)], lambda c: simulated_runs(rng, 1.0))
    (run_dir / "gemm_perf.parquet").write_bytes(b"tampered")
    out = tmp_path / "r.md"
    assert runner.invoke(app, ["render", "--run", str(run_dir), "--out", str(out)]).exit_code == 0
    body = out.read_text()
    assert "the run record is unreadable" in body and "checksum mismatch" in body


def test_a_complete_run_without_baseline(tmp_path: Path, rng: np.random.Generator) -> None:
    cases = [gemm_case(m) for m in (1, 2)]
    run_dir = write_record(tmp_path / "r", cases, lambda c: simulated_runs(rng, 1.0))
    out = tmp_path / "r.md"
    assert runner.invoke(app, ["render", "--run", str(run_dir), "--out", str(out)]).exit_code == 0
    assert (
        out.read_text().splitlines()[1]
        == "## ⚠️ collectbot: 2 cases measured; no baseline to compare with"
    )


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def test_html_report_is_self_contained_sortable_and_escaped(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    cases = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32)]
    base = write_record(tmp_path / "b", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp_path / "c",
        cases,
        lambda c: (
            None if c.params["m"] == 1 else simulated_runs(rng, 1.3 if c.params["m"] == 32 else 1.0)
        ),
        failures=[failure(cases[0], HOSTILE[1] + HOSTILE[2])],
        kernel_for=lambda c: "<b>sm90_kernel</b>",
    )
    # Through compare_runs, as `collectbot compare` does: every case lands in cases.parquet and
    # the report must plot all of them, not only the JSON's notable ones.
    cmp_dir = write_comparison(
        compare_runs(read_record(base), read_record(cand)), tmp_path / "cmp"
    ).parent
    html = tmp_path / "report.html"
    result = runner.invoke(app, ["render", str(cmp_dir), "--html", str(html)])
    assert result.exit_code == 0, result.output
    text = html.read_text()
    parser = _Html()
    parser.feed(text)
    tags = [t for t, _ in parser.tags]
    # No fetches: no external script, style, image or frame; one inline script (ours).
    for tag, attrs in parser.tags:
        assert "src" not in attrs and tag != "link", (tag, attrs)
    assert tags.count("script") == 1 and "alert" not in "".join(parser.scripts)
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;sm90_kernel&lt;/b&gt;" in text and "<b>sm90" not in text
    assert "<!--" not in text  # the forged marker is escaped text, not a comment
    # Sortable tables with numeric sort keys, and the three plots as inline SVG.
    assert (
        len([1 for t, a in parser.tags if t == "table" and "sortable" in (a.get("class") or "")])
        >= 3
    )
    assert tags.count("svg") == 3 and tags.count("circle") >= 5
    rows = re.findall(
        r'<td class="num" data-v="([0-9.e-]+)">\+30|<td class="num" data-v="(1\.[23][0-9]*)"', text
    )
    assert rows
    assert "regressed" in text
    # The run-only report works on a broken run too.
    html2 = tmp_path / "run.html"
    result = runner.invoke(
        app, ["render", "--run", str(cand), "--html", str(html2), "--error", "<img src=x>"]
    )
    assert result.exit_code == 0, result.output
    assert "&lt;img src=x&gt;" in html2.read_text() and "<img" not in html2.read_text()
