"""Twelfth noise probe: is there a per-process level that runs in one process share?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe12 [--processes 8] [--runs 8] [--out FILE]

Session 9's A/A tail (docs/benchmarks.md) came from the same memory-sensitive GEMMs as
before, with 10 runs of 8 placements each, and their A/B differences were larger than the
spread of their runs within each collection predicts (z of the run means: sd 1.9). If the
runs of one process share a level, more runs in one process cannot remove it, and running
a collection's rounds in several processes would. Each of `--processes` child processes,
one after another, measures every case `--runs` times (interleaved, the default protocol,
every sample kept); the report gives per case the run medians of each process, and the
parent's summary the between-process and within-process spreads of the pooled medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from .probe_kit import DEVICE, cases_by_key, l2_bytes

# Session 9's A/A tail, then cases of low sample spread as controls.
CASES = [
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=8192",
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=4096",
    "gemm:gemm_dtype=fp8,m=16,n=1024,k=8192",
    "gemm:gemm_dtype=fp8,m=1,n=1024,k=8192",
    "gemm:gemm_dtype=fp8,m=64,n=1024,k=8192",
    "gemm:gemm_dtype=fp8_block,m=8,n=8192,k=8192",
    "gemm:gemm_dtype=bfloat16,m=512,n=8192,k=1024",
    "gemm:gemm_dtype=fp8,m=256,n=4096,k=1024",
]


def child(runs: int) -> None:
    from collector.backends.torch_backend import TorchBackend
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    cases = cases_by_key(CASES)
    ctx = MeasureContext(
        TorchBackend(), DEVICE, Protocol(target_ci=0.0), l2_bytes(), ClockReader(DEVICE)
    )
    out: dict[str, list[list[float]]] = {c.key: [] for c in cases}
    for _ in range(runs):
        for case in cases:
            s, _, _ = _measure_once(ctx, case)
            out[case.key].append([round(x * 1e3, 3) for x in s.ms])
    print(json.dumps(out), flush=True)


def summary(processes: list[dict[str, list[list[float]]]]) -> list[dict[str, Any]]:
    rows = []
    for key in processes[0]:
        pooled = [statistics.median([x for r in p[key] for x in r]) for p in processes]
        within = [
            statistics.stdev([statistics.median(r) for r in p[key]]) / len(p[key]) ** 0.5
            for p in processes
        ]
        centre = statistics.median(pooled)
        rows.append(
            {
                "case": key,
                "process_pooled_us": [round(v, 3) for v in pooled],
                # sd of the per-process pooled medians, and what the runs' spread inside
                # each process predicts for it (sd of run medians / sqrt(runs)).
                "between_sd_pct": round(statistics.stdev(pooled) / centre * 100, 2),
                "within_se_pct": round(statistics.fmean(within) / centre * 100, 2),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.runs)
        return
    processes: list[dict[str, list[list[float]]]] = []
    for i in range(args.processes):
        cmd = [sys.executable, "-m", "bench.gpu.noise_probe12", "--child", "--runs", str(args.runs)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"process {i} failed ({done.returncode}): {done.stderr[-2000:]}")
        processes.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {i} done", flush=True)
        report = {"processes": processes, "summary": summary(processes) if i else []}
        if args.out:
            args.out.write_text(json.dumps(report))
    for row in summary(processes):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
