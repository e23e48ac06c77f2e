"""Size and render time of the HTML report for a comparison of N cases.

Usage: python -m bench.bench_report --cases 6000 [--keep DIR] [--chromium /usr/bin/chromium]
Builds two simulated run records (most cases unchanged, ~2% regressed, ~1% improved, a few
noisy), compares them, renders the report and prints one JSON line: machine, bytes (raw and
gzip), seconds to render in Python and, with --chromium, seconds for headless Chromium to load
the page and run its script, as opened and as `report.html#all` (every case made into a row),
each minus an empty page's time (best of three).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bot.compare.comparison import compare_runs, load_cases
from bot.render.html import render_html_report
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record


def _chromium_seconds(chromium: str, page: str, repeat: int = 3) -> float:
    """Best-of-`repeat` wall time of `chromium --dump-dom` (load, parse, run the script)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page],
            check=True,
            capture_output=True,
            timeout=300,
        )
        best = min(best, time.perf_counter() - t0)
    return best


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
        html = render_html_report(comparison, all_cases)
        render_s = time.perf_counter() - t0
        page = root / "report.html"
        page.write_text(html)
        result: dict[str, object] = {
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
            "cases": len(all_cases),
            "bytes": len(html.encode()),
            "gzip_bytes": len(gzip.compress(html.encode())),
            "python_render_s": round(render_s, 3),
        }
        if args.chromium:
            empty = root / "empty.html"
            empty.write_text("<!doctype html><title>empty</title>")
            base_s = _chromium_seconds(args.chromium, empty.as_uri())
            for name, url in (("load", page.as_uri()), ("all_rows", page.as_uri() + "#all")):
                seconds = _chromium_seconds(args.chromium, url) - base_s
                result[f"chromium_{name}_s"] = round(seconds, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
