"""Golden files: what maintainers read, rendered from fixed inputs and kept in tests/golden/.

A test compares a rendering with its file; `pytest --update-golden` (or
COLLECTBOT_UPDATE_GOLDEN=1) rewrites the files instead, so every change to a comment or
report shows up as a diff for review.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
from pathlib import Path

import numpy as np

from bot.render.html import PAGE_ROWS, html_environment
from collector.caseplan import Case
from collector.failures import FailureRecord
from tests.factories import failure, gemm_case, simulated_runs, write_record

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_ENV = "COLLECTBOT_UPDATE_GOLDEN"
# Every rendering is pinned to these, so a golden file changes only with the renderer.
STAMP = "2026-11-30T00:00:00+00:00"
# A report's inlined stylesheet and script: a bare <style> or <script> tag on its own line to
# its closing tag (the cases' JSON block, <script type=...>, is data and stays in the golden).
ASSET_BLOCK = re.compile(r"^<(style|script)>\n.*?^</\1>$", re.S | re.M)
# A report's fixed head, the same in every report: the doctype to the line before <title>.
HEAD_BLOCK = re.compile(r"\A<!doctype html>\n.*?(?=^<title>)", re.S | re.M)


def check_golden(name: str, text: str, update: bool) -> None:
    """Compare `text` with tests/golden/NAME, or (re)write it when updating."""
    path = GOLDEN / name
    if update or os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"{path} missing: run pytest --update-golden and review the diff"
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"golden/{name}",
                "rendered",
            )
        )
        raise AssertionError(f"{name} differs from its golden file:\n{diff[:6000]}")


def inlined_assets(html: str) -> list[str]:
    """The inlined asset blocks of a report (or of its template), in order."""
    return [m.group(0) for m in ASSET_BLOCK.finditer(html)]


def _template() -> str:
    env = html_environment()
    return env.loader.get_source(env, "report.html.j2")[0]  # type: ignore[union-attr]


def shipped_assets() -> list[str]:
    """The report template's asset blocks, rendered with what the renderers give them."""
    env = html_environment()
    return [env.from_string(block).render(page=PAGE_ROWS) for block in inlined_assets(_template())]


def report_head(html: str) -> str:
    """The fixed head of a report (or of its template); empty where it has none."""
    m = HEAD_BLOCK.search(html)
    return m.group(0) if m else ""


def shipped_head() -> str:
    """The report template's fixed head (no template syntax in it: it is its own rendering)."""
    return report_head(_template())


def fold_assets(html: str) -> str:
    """`html` with its fixed head cut to one comment line with its sha256, and each inlined
    asset block to its tags round one such line: a golden report still changes with any byte
    of them, yet holds only what its inputs change (test_golden.py checks they are the
    template's)."""

    def marker(m: re.Match[str]) -> str:
        block, tag = m.group(0), m.group(1)
        digest = hashlib.sha256(block.encode()).hexdigest()
        lines = block.count("\n") + 1
        return f"<{tag}>\n/* the template's {tag}: {lines} lines, sha256 {digest} */\n</{tag}>"

    def head_marker(m: re.Match[str]) -> str:
        block = m.group(0)
        digest = hashlib.sha256(block.encode()).hexdigest()
        return f"<!-- the template's head: {block.count(chr(10))} lines, sha256 {digest} -->\n"

    return ASSET_BLOCK.sub(marker, HEAD_BLOCK.sub(head_marker, html, count=1))


def stamped_failure(case: Case, message: str, exc: str = "RuntimeError") -> FailureRecord:
    return dataclasses.replace(failure(case, message, exc), timestamp=STAMP)


def golden_runs(root: Path) -> tuple[Path, Path]:
    """A baseline and a candidate: two regressions, one improvement, unchanged cases, one
    noisy case, a new failure group and a resolved one; fixed seed and provenance."""
    rng = np.random.default_rng(20)
    cases = [gemm_case(m, dtype=d) for d in ("bfloat16", "float32") for m in (1, 16, 128, 1024)]
    new_fail, old_fail = cases[3], cases[7]
    cand_ms = {cases[0].key: 1.30, cases[1].key: 1.12, cases[4].key: 0.8}

    def base_samples(c: Case) -> list[list[float]] | None:
        return simulated_runs(rng, 0.05 * (1 + cases.index(c)))

    def cand_samples(c: Case) -> list[list[float]] | None:
        true = 0.05 * (1 + cases.index(c)) * cand_ms.get(c.key, 1.0)
        spread = 0.2 if c is cases[2] else 0.005
        return None if c is new_fail else simulated_runs(rng, true, run_spread=spread)

    def meta(sha: str, run: str) -> dict[str, object]:
        return {"git_sha": sha, "run_id": run, "branch": "main" if run == "base" else "pr-42"}

    base = write_record(
        root / "base",
        cases,
        lambda c: None if c is old_fail else base_samples(c),
        failures=[stamped_failure(old_fail, "CUBLAS_STATUS_EXECUTION_FAILED")],
        meta_extra=meta("b7d83e9764ca0000000000000000000000000000", "base"),
    )
    cand = write_record(
        root / "cand",
        cases,
        cand_samples,
        failures=[
            stamped_failure(new_fail, "CUDA error: an illegal memory access", "AcceleratorError")
        ],
        meta_extra=meta("841efd6666790000000000000000000000000000", "cand"),
    )
    return base, cand
