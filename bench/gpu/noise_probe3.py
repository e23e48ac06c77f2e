"""Third noise probe: is the host's launch latency inside the sample the run-to-run noise?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe3 [--out FILE]

For small kernels that were noisy between runs in the A/A sessions, take 12 runs each
through the engine's own path (`measure_case`: re-prepared tensors, the torch backend's
rotation) with the spin before the start event off (`launch_block_us=0`, the protocol
before 2026-11-30) and on (the default), interleaved run by run. Prints per variant the
robust CV and range of the run medians and the calls per sample each run chose.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from bench.gpu.noise_probe import rcv
from collector.aggregate import RunResult
from collector.backends.torch_backend import TorchBackend
from collector.caseplan import Case
from collector.device import ClockReader
from collector.measure import MeasureContext, measure_case
from collector.timing import Protocol

CASES: list[tuple[str, dict[str, Any]]] = [
    ("gemm", {"gemm_dtype": "fp8", "m": 16, "n": 1024, "k": 1024}),
    ("gemm", {"gemm_dtype": "bfloat16", "m": 128, "n": 4096, "k": 1024}),
    ("gemm", {"gemm_dtype": "bfloat16", "m": 512, "n": 1024, "k": 8192}),
    ("gemm", {"gemm_dtype": "bfloat16", "m": 64, "n": 8192, "k": 1024}),
    ("gemm", {"gemm_dtype": "bfloat16", "m": 1, "n": 4096, "k": 4096}),
    ("gemm", {"gemm_dtype": "fp8", "m": 256, "n": 4096, "k": 1024}),
    ("gemm", {"gemm_dtype": "bfloat16", "m": 4096, "n": 4096, "k": 4096}),
]
RUNS = 12


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    base = Protocol(runs=RUNS, samples=8, target_sample_ms=1.0, idle_ratio=1.0, target_ci=0.0)
    variants = {"no_block": dataclasses.replace(base, launch_block_us=0.0), "block": base}
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    clocks = ClockReader("cuda:0")
    report = []
    for op, params in CASES:
        case = Case.build(op, params)
        medians: dict[str, list[float]] = {v: [] for v in variants}
        inners: dict[str, list[int]] = {v: [] for v in variants}
        for run in range(RUNS):
            order = list(variants) if run % 2 == 0 else list(reversed(variants))
            for name in order:
                ctx = MeasureContext(TorchBackend(), "cuda:0", variants[name], l2, clocks)
                result = measure_case(ctx, case, run)
                assert isinstance(result, RunResult), result
                medians[name].append(statistics.median(result.ms))
                inners[name].append(result.inner)
        line = {
            "case": case.key,
            **{
                name: {
                    "us": round(statistics.median(vals) * 1e3, 3),
                    "rcv_pct": round(rcv(vals) * 100, 2),
                    "range_pct": round((max(vals) / min(vals) - 1) * 100, 2),
                    "inner": sorted(set(inners[name])),
                }
                for name, vals in medians.items()
            },
        }
        report.append(line)
        print(json.dumps(line), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
