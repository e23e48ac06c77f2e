"""Time `compare` + `render` on simulated run records of a given size.

Usage: python -m bench.bench_compare --cases 2000 [--runs 6 --samples 8]
Prints one JSON line: machine, sizes and seconds per stage.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import number_options
from bot.compare.comparison import compare_runs
from bot.render.comment import render_comment
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record


def main() -> None:
    args = number_options(__doc__, cases=2000, runs=6, samples=8)
    rng = np.random.default_rng(0)
    cases = [
        Case.build("gemm", {"gemm_dtype": "bfloat16", "m": i + 1, "n": 4096, "k": 4096})
        for i in range(args.cases)
    ]
    true = {c.key: float(rng.uniform(0.01, 5)) for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def runs(c: Case, f: float) -> list[list[float]]:
            return simulated_runs(rng, true[c.key] * f, runs=args.runs, samples=args.samples)

        write_record(root / "base", cases, lambda c: runs(c, 1.0))
        write_record(root / "cand", cases, lambda c: runs(c, 1.0))
        t0 = time.perf_counter()
        base, cand = read_record(root / "base"), read_record(root / "cand")
        t1 = time.perf_counter()
        result = compare_runs(base, cand)
        result.write(root / "cmp")
        t2 = time.perf_counter()
        body = render_comment(result.data)
        t3 = time.perf_counter()
    print(
        json.dumps(
            {
                "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
                "cases": args.cases,
                "runs": args.runs,
                "samples": args.samples,
                "read_s": round(t1 - t0, 3),
                "compare_s": round(t2 - t1, 3),
                "render_s": round(t3 - t2, 3),
                "comment_chars": len(body),
            }
        )
    )


if __name__ == "__main__":
    main()
