"""Time `collectbot compare --baseline-from-store` with and without the history window.

Usage: python -m bench.bench_compare_history --cases 2000 --runs 20 [--store DIR] [--repeat 2]
The store is the one bench/bench_site.py generates (same cases, steps and seed; kept in
--store for reruns); the candidate is a fresh record of the same cases, 3% slower on every
tenth. Each compare runs as its own process; the load average is recorded, since a shared
machine makes the figure noisy. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.common import ensure_store, machine, store_options
from tests.factories import simulated_runs, write_record
from tests.history_store import grid_cases, true_ms


def main() -> None:
    args, store = store_options(__doc__, "bench-history-")
    cases = grid_cases(args.cases)
    ensure_store(store, cases, args.runs)
    rng = np.random.default_rng(7)
    timings: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cand = write_record(
            Path(tmp) / "cand",
            cases,
            lambda c: simulated_runs(
                rng, true_ms(c) * (1.03 if cases.index(c) % 10 == 3 else 1.0), runs=6
            ),
            meta_extra={"git_sha": "f" * 40, "case_set": "synthetic"},
        )
        for _ in range(args.repeat):
            for history in (0, args.runs):
                out = Path(tmp) / f"cmp-{history}-{len(timings)}"
                command = [
                    *(sys.executable, "-m", "bot", "compare", str(cand)),
                    *("--baseline-from-store", str(store), "--baseline-ref", "main"),
                    *("--history-runs", str(history), "--out", str(out)),
                ]
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True, text=True)
                seconds = time.perf_counter() - t0
                data = json.loads((out / "comparison.json").read_text())
                annotated = data.get("history", {}).get("cases", {})
                timings.append(
                    {
                        "history_runs": history,
                        "compare_s": round(seconds, 2),
                        "load_before": round(load, 2),
                        "json_bytes": (out / "comparison.json").stat().st_size,
                        "annotated": len(annotated),
                        "within": sum(1 for c in annotated.values() if c["within"]),
                    }
                )
    print(
        json.dumps(
            {
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "command": "collectbot compare CAND --baseline-from-store STORE "
                "--baseline-ref main --history-runs N --out OUT",
                "cases": args.cases,
                "runs": args.runs,
                "store": str(store),
                "timings": timings,
            }
        )
    )


if __name__ == "__main__":
    main()
