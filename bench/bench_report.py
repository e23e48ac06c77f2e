"""Size and render time of the HTML report for a comparison of N cases.

Usage: python -m bench.bench_report --cases 6000 [--keep DIR] [--chromium /usr/bin/chromium]
Builds two simulated run records (most cases unchanged, ~2% regressed, ~1% improved, a few
noisy), compares them, renders the report and prints one JSON line: machine, bytes (raw and
gzip), seconds to render in Python and, with --chromium, the milliseconds headless Chromium
takes (timed inside the page, median of three fresh browsers) to load the report, to sort it
by change twice and to filter it.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import machine
from bot.compare.comparison import compare_runs, load_cases
from bot.render.html import render_html_report
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record

# Opens the report in a frame and times, inside the browser, what a reader waits for: the
# page's load, the first sort by change (the script parses the JSON then), a second sort and
# a filter, each with the layout it causes.
HARNESS = """<!doctype html><meta charset="utf-8"><pre id="out"></pre>
<iframe id="f" src="{report}" width="1300" height="900"></iframe>
<script>
function timed(out, name, step, doc) {
  var t0 = performance.now();
  step();
  void doc.body.offsetHeight;  // the layout the step caused
  out[name] = Math.round(performance.now() - t0);
}
document.getElementById("f").onload = function () {
  var doc = this.contentDocument, out = {};
  out.load_ms = Math.round(this.contentWindow.performance.getEntriesByType("navigation")[0]
    .loadEventStart);
  var ths = doc.querySelector("table").tHead.rows[0].cells;
  var input = doc.querySelector("input[type=search]");
  timed(out, "first_sort_ms", function () { ths[6].click(); }, doc);
  timed(out, "second_sort_ms", function () { ths[6].click(); }, doc);
  timed(out, "filter_ms", function () {
    input.value = "m=7"; input.dispatchEvent(new Event("input"));
  }, doc);
  document.getElementById("out").textContent = JSON.stringify(out);
};
</script>"""


def _chromium_timings(chromium: str, page: Path, repeat: int = 3) -> dict[str, int]:
    """Median milliseconds over `repeat` fresh browsers, for each step of HARNESS."""
    harness = page.with_name("harness.html")
    harness.write_text(HARNESS.replace("{report}", page.name))
    runs = []
    for _ in range(repeat):
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--allow-file-access-from-files",
                "--dump-dom",
                harness.as_uri(),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
        found = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
        if not found:
            raise SystemExit(f"the harness wrote nothing: {dom[:500]}")
        runs.append(json.loads(html.unescape(found.group(1))))
    return {k: int(statistics.median(r[k] for r in runs)) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=6000)
    parser.add_argument("--keep", type=Path, help="write the comparison and report here")
    parser.add_argument("--chromium", help="time the page in this browser too")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    dtypes = ("bfloat16", "float16", "float32")
    cases = [
        Case.build("gemm", {"gemm_dtype": dtypes[i % 3], "m": 1 + i // 3, "n": 4096, "k": 4096})
        for i in range(args.cases)
    ]
    true = {c.key: float(rng.uniform(0.01, 5)) for c in cases}
    factor = {c.key: float(rng.choice([1.0, 1.2, 0.85], p=[0.97, 0.02, 0.01])) for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        write_record(root / "base", cases, lambda c: simulated_runs(rng, true[c.key]))
        write_record(
            root / "cand", cases, lambda c: simulated_runs(rng, true[c.key] * factor[c.key])
        )
        cmp_dir = root / "cmp"
        compare_runs(read_record(root / "base"), read_record(root / "cand")).write(cmp_dir)
        comparison = json.loads((cmp_dir / "comparison.json").read_text())
        all_cases = load_cases(cmp_dir, comparison)
        t0 = time.perf_counter()
        report = render_html_report(comparison, all_cases)
        render_s = time.perf_counter() - t0
        page = root / "report.html"
        page.write_text(report)
        result: dict[str, object] = {
            "machine": machine(),
            "cases": len(all_cases),
            "bytes": len(report.encode()),
            "gzip_bytes": len(gzip.compress(report.encode())),
            "python_render_s": round(render_s, 3),
        }
        if args.chromium:
            result["chromium_ms"] = _chromium_timings(args.chromium, page)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
