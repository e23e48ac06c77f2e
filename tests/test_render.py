from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.compare.comparison import compare_records
from bot.compare.stats import Settings
from bot.render.comment import GITHUB_COMMENT_LIMIT, Marker, RenderOptions, render_comment
from bot.render.sanitize import md_block, md_code, md_text
from collector.record import read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record

HOSTILE = [
    "@octocat please look",
    "<script>alert(1)</script>",
    '<!-- collectbot {"backend": "torch"} -->',
    "| col | break |\n| --- |",
    "```\n# escaped the block\n```",
    "[click](javascript:alert(1)) ![img](http://x/y.png)",
    "\x1b[31mred\x1b[0m \u202eevil",
    "see #123 and owner/repo#4",
]


def _comparison(tmp_path: Path, rng: np.random.Generator, messages: list[str]) -> dict[str, Any]:
    cases = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32, 64, 128)]
    base = write_record(tmp_path / "b", cases, lambda c: simulated_runs(rng, 1.0))
    fails = [failure(c, msg) for c, msg in zip(cases[:4], messages, strict=False)]
    cand = write_record(
        tmp_path / "c",
        cases,
        lambda c: (
            None
            if c in cases[: len(fails)]
            else simulated_runs(rng, 1.2 if c.params["m"] == 128 else 1.0)
        ),
        failures=fails,
    )
    return compare_records(read_record(base), read_record(cand), Settings())


def _outside_code(body: str) -> str:
    """The body with fenced blocks and inline code spans removed: what GitHub parses as HTML."""
    body = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", body)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", body)


def test_comment_starts_with_marker_then_verdict(tmp_path: Path, rng: np.random.Generator) -> None:
    body = render_comment(_comparison(tmp_path, rng, ["boom"]), RenderOptions(head_sha="abc123"))
    lines = body.splitlines()
    marker = Marker.parse(body)
    assert marker is not None
    assert marker.head_sha == "abc123" and marker.backend == "torch" and marker.gpu == "Test GPU"
    assert lines[1].startswith("## ❌ collectbot: 1 regressed, 1 new failure group")
    assert "gemm bfloat16 m=128 n=1024 k=1024" in body
    assert "+20." in body or "+19." in body or "+21." in body
    assert body.count("<details>") == body.count("</details>")


@pytest.mark.parametrize("text", HOSTILE)
def test_sanitisers_neutralise_hostile_text(text: str) -> None:
    for out in (md_text(text), md_code(text)):
        assert "\n" not in out
        assert not re.search(r"@[A-Za-z]", out)
        assert "<!--" not in out
        assert "\x1b" not in out and "\u202e" not in out
        assert not re.search(r"#\d", out)
    # Inline text: no raw HTML at all.
    assert "<" not in md_text(text)
    # A code span: HTML inside is literal; its fence appears only at both ends.
    span = md_code(text)
    fence = re.match(r"`+", span)
    assert fence is not None
    assert span.endswith(fence.group()) and span.count(fence.group()) == 2
    block = md_block(text)
    fence_line = block.split("\n", 1)[0]
    inner = block[len(fence_line) + 1 : -len(fence_line) - 1]
    assert fence_line not in inner
    assert "<!--" not in block


def test_hostile_failure_messages_cannot_forge_markers_or_ping(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    body = render_comment(_comparison(tmp_path, rng, HOSTILE[:4]))
    assert body.count("<!--") == 1
    assert "@octocat" not in body
    prose = _outside_code(body)
    tags = set(re.findall(r"</?([a-zA-Z]+)", prose))
    assert tags <= {"details", "summary", "sub", "code"}  # <code>: ours, in <summary>
    # Every row of the failure table keeps its column count: no cell broke out.
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| change |"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    counts = {len(re.findall(r"(?<!\\)\|", line)) for line in table}
    assert len(table) == 2 + 4 and counts == {7}


def test_huge_comparisons_are_trimmed_but_keep_the_verdict(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    comparison = _comparison(tmp_path, rng, ["x"])
    group = comparison["failure_groups"]["new"][0]
    comparison["failure_groups"]["new"] = [
        {**group, "group_key": f"k{i}", "message": "m" * 300 + str(i), "traceback": "t\n" * 200}
        for i in range(5000)
    ]
    case = comparison["latency"]["cases"][0]
    comparison["latency"]["cases"] = [
        {**case, "key": f"k{i}", "verdict": "inconclusive", "ratio": 1.0 + i / 1e5}
        for i in range(20000)
    ]
    body = render_comment(comparison)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert body.splitlines()[1].startswith("## ❌ collectbot:")
    assert Marker.parse(body) is not None


def test_marker_parse_rejects_markers_not_on_the_first_line() -> None:
    m = Marker("torch", "H200", "r1", "sha", "t").render()
    assert Marker.parse(m + "\nbody") is not None
    assert Marker.parse("quote\n" + m) is None
    assert Marker.parse("<!-- collectbot {not json} -->") is None


def _cross_gpu_comparison(
    tmp_path: Path, rng: np.random.Generator, cand_uuid: str, panels: bool
) -> dict[str, Any]:
    from bench.fleet_simulation import _panel

    cases = [gemm_case(m) for m in (1, 2, 4, 8, 16, 32, 64, 128)]

    def record(name: str, uuid: str, speed: float) -> Any:
        extra = {
            "device": {"name": "NVIDIA H200", "kind": "cuda", "uuid": uuid},
            "panel": _panel(rng, uuid, [speed] * 13) if panels else None,
        }
        return read_record(
            write_record(
                tmp_path / name,
                cases,
                lambda c: simulated_runs(rng, 0.1 * speed),
                meta_extra=extra,
            )
        )

    base = record("b", "GPU-11f4dd46-aaaa", 1.0)
    return compare_records(base, record("c", cand_uuid, 1.02), Settings())


def test_a_calibrated_cross_gpu_comment_says_which_gpus_and_by_how_much(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    comparison = _cross_gpu_comparison(tmp_path, rng, "GPU-7ba35415-bbbb", panels=True)
    body = render_comment(comparison)
    title = body.splitlines()[1]
    assert "cross-GPU, calibrated: GPUs differ by +2.0%" in title
    assert "8 cases crossed GPUs (GPU-11f4dd46 → GPU-7ba35415)" in body
    assert (
        "| measured on (GPUs) | `NVIDIA H200 GPU-11f4dd46` | `NVIDIA H200 GPU-7ba35415` |" in body
    )
    assert "13 kernels x 5 runs on 1 GPU(s)" in body
    assert comparison["latency"]["summary"]["verdicts"]["regressed"] == 0
    from bot.render.html import render_html_report

    html = render_html_report(comparison, comparison["latency"]["cases"])
    assert "measured on (GPUs)" in html and "NVIDIA H200 GPU-7ba35415" in html


def test_an_uncalibrated_cross_gpu_comment_says_no_verdict_and_escapes_the_uuid(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    hostile = "@octocat <b>x</b> [y](javascript:1)"
    comparison = _cross_gpu_comparison(tmp_path, rng, hostile, panels=False)
    body = render_comment(comparison)
    assert "cross-GPU without calibration: no latency verdict possible" in body.splitlines()[1]
    assert "with no calibration panel on both sides: they are not judged" in body
    outside = _outside_code(body)
    assert "@octocat" not in outside and "<b>" not in outside and "](javascript" not in outside
