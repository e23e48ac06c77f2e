"""The HTML report for thousands of cases: small, every case present, hostile names inert.

Changed cases are table rows; the others travel in one JSON block that the page's script
makes into rows. The browser tests open the report in headless Chromium (skipped when there is none): as
`report.html#all`, comparing every row the script made with what the Python side formats,
and inside a page that sorts, pages and filters it as a reader would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.compare.comparison import compare_runs
from bot.render.comment import case_label, fmt_change, fmt_ms, verdict_word
from bot.render.html import MAX_SHOWN_ROWS, PAGE_ROWS, render_html_report
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
HOSTILE_KERNEL = "</script><script>alert(1)</script><!--"
DATA = re.compile(r'<script type="application/json" id="cases-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def small_comparison(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real comparison (its verdict, coverage and provenance) to hang many cases on."""
    root = tmp_path_factory.mktemp("cmp")
    rng = np.random.default_rng(3)
    cases = [gemm_case(m) for m in (1, 2)]
    base = write_record(root / "b", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(root / "c", cases, lambda c: simulated_runs(rng, 1.0))
    return compare_runs(read_record(base), read_record(cand)).data


def _dump_dom(url: str, *flags: str) -> str:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *flags, "--dump-dom", url],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout


def many_cases(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` cases as cases.parquet gives them: 2% regressed, 1% improved, the rest unchanged;
    one unchanged case has a hostile kernel name, one has no interval."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        verdict = str(rng.choice(["same", "regressed", "improved"], p=[0.97, 0.02, 0.01]))
        ratio = {"same": 1.0, "regressed": 1.2, "improved": 0.85}[verdict] * rng.normal(1, 0.004)
        base = float(rng.uniform(0.01, 5))
        dtype = ("bfloat16", "float16", "float32")[i % 3]
        out.append(
            {
                "key": f"gemm:gemm_dtype={dtype},m={i + 1},n=4096,k=4096",
                "op": "gemm",
                "dtype": dtype,
                "params": {"gemm_dtype": dtype, "m": i + 1, "n": 4096, "k": 4096},
                "kernel_cand": HOSTILE_KERNEL if i == 7 else "torch.nn.functional.linear",
                "base_ms": base,
                "cand_ms": base * ratio,
                "ratio": ratio,
                "lo": None if i == 11 else ratio * 0.99,
                "hi": None if i == 11 else ratio * 1.01,
                "q": float(rng.uniform(0, 1)) if verdict == "same" else 1e-9,
                "verdict": verdict,
                "confirmed": False,
            }
        )
    out[7]["verdict"] = out[11]["verdict"] = "same"
    return out


def test_a_report_of_6000_cases_is_under_1_mb_and_holds_every_case(
    small_comparison: dict[str, Any],
) -> None:
    cases = many_cases(6000)
    html = render_html_report(small_comparison, cases)
    assert len(html.encode()) < 1_000_000
    changed = [c for c in cases if c["verdict"] != "same"]
    # Every changed case is a row; the JSON block holds every case, exactly once.
    rows = re.findall(r"<tr><td><code>(gemm [^<]*)</code>", html)
    assert sorted(rows) == sorted(case_label(c) for c in changed)
    block = DATA.search(html)
    assert block is not None
    data = json.loads(block.group(1))
    labels = [r[0] for r in data["rows"]]
    assert sorted(labels) == sorted(case_label(c) for c in cases)
    # The hostile kernel name cannot end the data block or open a comment, and reads back.
    assert HOSTILE_KERNEL not in html and "<!--" not in html
    assert HOSTILE_KERNEL in data["strings"]
    assert html.count("<script>") == 1  # ours; the data block is not executable


def test_changed_cases_come_first_largest_change_first(small_comparison: dict[str, Any]) -> None:
    cases = many_cases(2 * MAX_SHOWN_ROWS)
    html = render_html_report(small_comparison, cases)
    shown = re.findall(
        r'data-v="(-?[0-9.e+-]+)">[+-][0-9.]+%</td><td class="num"[^>]*>[^<]*'
        r'</td><td class="num"[^>]*>[^<]*</td><td class="num"[^>]*>[^<]*</td>'
        r'<td class="v-(\w+)">',
        html,
    )
    verdicts = [v for _, v in shown]
    assert verdicts == sorted(verdicts, key=["regressed", "improved"].index)
    for verdict in ("regressed", "improved"):
        sizes = [abs(float(x)) for x, v in shown if v == verdict]
        assert sizes == sorted(sizes, reverse=True) and sizes


def test_a_small_report_lists_every_case_as_rows(small_comparison: dict[str, Any]) -> None:
    cases = many_cases(MAX_SHOWN_ROWS)
    html = render_html_report(small_comparison, cases)
    assert DATA.search(html) is None and 'id="cases-more"' not in html
    assert len(re.findall(r"<tr><td><code>gemm ", html)) == len(cases)


def test_the_scatter_plot_costs_a_few_bytes_a_point(small_comparison: dict[str, Any]) -> None:
    cases = many_cases(6000)
    html = render_html_report(small_comparison, cases)
    scatter = re.search(r'<svg[^>]*aria-label="Change against baseline latency">.*?</svg>', html)
    assert scatter is not None
    assert len(scatter.group(0)) < 20 * len(cases)
    # Changed cases keep a marker with a tooltip; unchanged ones are dots in one path.
    assert scatter.group(0).count("<title>") == sum(c["verdict"] != "same" for c in cases)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs headless Chromium")
def test_the_browser_makes_every_row_as_python_formats_it(
    small_comparison: dict[str, Any], tmp_path: Path
) -> None:
    cases = many_cases(1500, seed=1)
    page = tmp_path / "report.html"
    page.write_text(render_html_report(small_comparison, cases))
    dom = _dump_dom(page.as_uri() + "#all")
    table = re.search(r'<table[^>]* id="cases-table">.*?</table>', dom, re.S)
    assert table is not None
    made = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S)[1:]:
        cells = [
            unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)
        ]
        made[cells[0]] = cells
    assert len(made) == len(cases)
    for c in cases:
        cells = made[case_label(c)]
        q = f"{c['q']:.2g}"
        assert cells[3:] == [
            c["kernel_cand"],
            fmt_ms(c["base_ms"]),
            fmt_ms(c["cand_ms"]),
            fmt_change(c["ratio"]),
            fmt_change(c["lo"]),
            fmt_change(c["hi"]),
            q,
            verdict_word(c["verdict"]),
        ], cells
    # The hostile kernel name is text in a cell, never markup or a second script.
    assert dom.count("<script") == 2 and "alert(1)</script><!--" not in dom.split("</table>")[0]


# Sorts by change both ways, shows a page more, filters; writes what the table showed.
HARNESS = """<!doctype html><meta charset="utf-8"><pre id="out"></pre>
<iframe id="f" src="report.html"></iframe>
<script>
document.getElementById("f").onload = function () {
  var doc = this.contentDocument, out = {};
  var table = doc.querySelector("table"), ths = table.tHead.rows[0].cells;
  function col(c) {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[c].textContent; });
  }
  out.initial = col(0);
  ths[6].click(); out.asc = col(6);
  ths[6].click(); out.desc = col(6);
  doc.getElementById("cases-more").click(); out.more = col(0).length;
  var input = doc.querySelector("input[type=search]");
  input.value = "m=7 n"; input.dispatchEvent(new Event("input"));
  out.filtered = col(0);
  out.status = doc.getElementById("cases-status").textContent;
  document.getElementById("out").textContent = JSON.stringify(out);
};
</script>"""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs headless Chromium")
def test_a_reader_sorts_pages_and_filters_every_case(
    small_comparison: dict[str, Any], tmp_path: Path
) -> None:
    cases = many_cases(1500, seed=2)
    (tmp_path / "report.html").write_text(render_html_report(small_comparison, cases))
    (tmp_path / "harness.html").write_text(HARNESS)
    dom = _dump_dom((tmp_path / "harness.html").as_uri(), "--allow-file-access-from-files")
    found = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert found is not None and found.group(1), dom[:2000]
    out = json.loads(unescape(found.group(1)))
    changed = [c for c in cases if c["verdict"] != "same"]
    assert len(out["initial"]) == len(changed)
    # Sorting covers every case, not only the rows on the page; a page is PAGE_ROWS long.
    by_change = sorted(cases, key=lambda c: c["ratio"])
    assert out["asc"] == [fmt_change(c["ratio"]) for c in by_change[:PAGE_ROWS]]
    assert out["desc"] == [fmt_change(c["ratio"]) for c in by_change[::-1][:PAGE_ROWS]]
    assert out["more"] == 2 * PAGE_ROWS
    matching = sorted(case_label(c) for c in cases if "m=7 n" in case_label(c))
    assert sorted(out["filtered"]) == matching and matching
    assert out["status"] == f"{len(matching)} of {len(matching)} matching cases listed."
