"""Time `collectbot site` on a synthetic store of N cases x R stored runs.

Usage: python -m bench.bench_site --cases 2000 --runs 20 [--store DIR] [--repeat 2]
The store is generated once (real records through the collector's writer, put in a real
store) and kept in --store for reruns. `collectbot site` runs as its own process; the load
average before and after is recorded, since a shared machine makes the figure noisy.
Prints one JSON line: machine, date, command, sizes, seconds, page sizes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import ensure_store, machine, store_options
from tests.history_store import grid_cases

PAGE_LIMIT = 2 * 1024 * 1024


def main() -> None:
    args, store = store_options(__doc__, "bench-site-")
    generate_s = ensure_store(store, grid_cases(args.cases), args.runs)
    timings = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "site"
            command = [
                sys.executable,
                "-m",
                "bot",
                "site",
                "--store",
                str(store),
                "--out",
                str(out),
            ]
            load_before = os.getloadavg()[0]
            cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU seconds of the command: less sensitive than wall time to a shared machine.
            cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (
                cpu_after.ru_stime - cpu_before.ru_stime
            )
            summary = json.loads(done.stdout)
            sizes = sorted(p.stat().st_size for p in out.rglob("*.html"))
            timings.append(
                {
                    "site_s": round(seconds, 2),
                    "cpu_s": round(cpu, 2),
                    "load_before": round(load_before, 2),
                    "load_after": round(os.getloadavg()[0], 2),
                    "pages": len(sizes),
                    "site_bytes": sum(sizes),
                    "largest_page_bytes": sizes[-1],
                    "median_page_bytes": sizes[len(sizes) // 2],
                    "pages_over_2mb": sum(1 for s in sizes if s > PAGE_LIMIT),
                    "change_points": summary["change_points"],
                }
            )
    print(
        json.dumps(
            {
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "command": "collectbot site --store STORE --out OUT",
                "cases": args.cases,
                "runs": args.runs,
                "generate_s": round(generate_s, 1),
                "store": str(store),
                "timings": timings,
            }
        )
    )


if __name__ == "__main__":
    main()
