"""Is a GEMM's per-process level set by where its buffers land, or by the process? (GPU)

    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):$PWD \\
        python3 -m bench.gpu.level_probe --out $OUT/level-probe.json

The second A/A run of 2026-12-02 (docs/benchmarks.md) found cases whose runs each sit on
one level: fp8 m=769 n=16384 k=768 at 27.7 or 32.9 us, fp8 m=2305 n=12288 k=768 at 48 or
52.5 us, fp8 m=2049 n=16384 k=7168 at 421 or 454-488 us; runs with 8 buffer sets showed
several levels among their samples, so placement is the suspect. Each of `--processes`
fresh processes (spawned, as a collection's rounds are) times every case below on
`--placements` buffer sets, each built behind a random spacer and timed alone by the shipped
protocol with one set. If the levels show among one process's sets, they follow placement,
and more sets per run (a higher `placement_max_us`) average them inside a run; if each
process keeps one level over all its sets, they follow the process, and only more runs
average them. Prints, per case, the spread of the set medians within each process and the
spread of the process medians; `--out` gets every set's median.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.gpu.process_init import gemm_case

# The bimodal cases of that run, and a steady one of two dtypes as the control.
CASES = (
    "fp8 769x16384x768",
    "fp8 2305x12288x768",
    "fp8 2049x16384x7168",
    "bfloat16 192x3584x7168",
    "fp8_block 33x768x6144",
    "bfloat16 1025x8192x12288",
    "fp8 8192x32x2048",
)


def one_process(
    backend_name: str, device: str, placements: int, specs: tuple[str, ...] = CASES
) -> dict[str, list[float]]:
    """Every case of `specs` on `placements` buffer sets in this process: each set's median
    ms."""
    import torch

    from collector.backends import get_backend
    from collector.device import ClockReader, fingerprint
    from collector.timing import Protocol, measure_cuda

    torch.cuda.set_device(device)
    info = fingerprint(device, 0)
    clocks = ClockReader(device, 0)
    backend = get_backend(backend_name)
    protocol = replace(Protocol(), placements=1)
    rng = random.Random()
    out: dict[str, list[float]] = {}
    for spec in specs:
        case = gemm_case(spec)
        medians = []
        for _ in range(placements):
            torch.cuda.empty_cache()
            mib = rng.randrange(0, protocol.spacer_max_mib + 1, 2)
            spacer = torch.empty(mib << 20, dtype=torch.uint8, device=device) if mib else None
            prepared = backend.prepare(case, device, int(info.get("l2_bytes") or 0))
            samples = measure_cuda(prepared, protocol, clocks, None)
            medians.append(statistics.median(samples.ms))
            del prepared, spacer
        out[case.key] = medians
    print(json.dumps({"uuid": info.get("uuid"), "sets": out}), flush=True)
    return out


def spread(values: list[float]) -> float:
    """(max - min) / median, in %."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def summary(processes: list[dict[str, list[float]]]) -> list[dict[str, Any]]:
    rows = []
    for key in processes[0]:
        per = [p[key] for p in processes]
        rows.append(
            {
                "case": key,
                "process_medians_us": [round(statistics.median(s) * 1e3, 2) for s in per],
                "within_process_spread_pct": [round(spread(s), 2) for s in per],
                "between_process_spread_pct": round(spread([statistics.median(s) for s in per]), 2),
            }
        )
    return rows


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--placements", type=int, default=12)
    parser.add_argument(
        "--case",
        action="append",
        dest="cases",
        metavar="SPEC",
        help='a case to probe instead of the built-in set, e.g. "fp8 769x65536x12288" (repeatable)',
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser


def child_command(args: argparse.Namespace) -> list[str]:
    """The command of one fresh process, probing what this one was asked to."""
    cases = [arg for spec in args.cases or () for arg in ("--case", spec)]
    return [
        sys.executable, "-m", "bench.gpu.level_probe", "--child", "--out", str(args.out),
        "--backend", args.backend, "--device", args.device,
        "--placements", str(args.placements), *cases,
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for spec in args.cases or ():
        try:
            gemm_case(spec)
        except ValueError:
            print(f'error: --case {spec!r}: not "DTYPE MxNxK"', file=sys.stderr)
            return 2
    if args.child:
        one_process(args.backend, args.device, args.placements, tuple(args.cases or CASES))
        return 0
    results = []
    for _ in range(args.processes):
        done = subprocess.run(child_command(args), capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = summary([r["sets"] for r in results])
    args.out.write_text(json.dumps({"runs": results, "summary": rows}, indent=1))
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
