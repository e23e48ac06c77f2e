"""Seventh noise probe: is the A/A tail of session 5 the clock, seen too late by NVML?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe7 [--runs 8] [--out FILE]

Session 5's records show NVML's SM clock and power repeating the same value over several
consecutive samples (its readings refresh every few tens of ms): a 3.5 ms prefill whose
samples ranged 3.49-4.06 ms read 1980 MHz throughout. The collector now measures the clock
on the GPU around every sample: the spin kernel before the timed region, and one after it,
run a known number of SM cycles, and events time them. This probe times the session's
tail cases with the clock floor off (`clock_floor` 0: NVML alone decides throttling, as in
session 5) and on, interleaved run by run, and prints per run: the median, the measured
clocks, and whether samples were retaken. Offline: do slow samples have low clocks, and
does retaking them shrink the run-to-run spread?
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

TAIL = [
    "context_attention:batch_size=16,isl=4096,num_heads=32,num_key_value_heads=8,head_dim=128,"
    "beam_width=1,attn_dtype=bfloat16,kv_cache_dtype=bfloat16,step=0,window_size=0",
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=8192",
    "gemm:gemm_dtype=bfloat16,m=512,n=4096,k=8192",
    "gemm:gemm_dtype=bfloat16,m=1024,n=1024,k=8192",
    "gemm:gemm_dtype=bfloat16,m=512,n=1024,k=1024",
    "gemm:gemm_dtype=fp8_block,m=512,n=4096,k=8192",
    "gemm:gemm_dtype=bfloat16,m=64,n=8192,k=1024",
    "gemm:gemm_dtype=bfloat16,m=512,n=1024,k=4096",
    "gemm:gemm_dtype=bfloat16,m=4096,n=4096,k=4096",
]


def main() -> None:
    import torch

    from collector.backends.torch_backend import TorchBackend
    from collector.caseplan import build_plan
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    dev = "cuda:0"
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    plan = build_plan(("gemm", "context_attention"), case_set="default").cases
    by_key = {c.key: c for c in plan}
    cases = [by_key[k] for k in TAIL if k in by_key]
    base = Protocol(target_ci=0.0)  # every run takes all its samples
    variants = {"nvml": replace(base, clock_floor=0.0), "clock": base}
    backend = TorchBackend()
    clocks = ClockReader(dev)
    contexts = {n: MeasureContext(backend, dev, p, l2, clocks) for n, p in variants.items()}
    names = list(variants)
    report: list[dict[str, Any]] = []
    for case in cases:
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for run in range(args.runs):
            order = names[run % 2 :] + names[: run % 2]
            for name in order:
                s, _, _ = _measure_once(contexts[name], case)
                runs[name].append(
                    {
                        "median_us": round(statistics.median(s.ms) * 1e3, 3),
                        "us": [round(x * 1e3, 2) for x in s.ms],
                        "clock_mhz": [round(c) if c else None for c in s.clock_mhz],
                        "nvml_mhz": s.sm_mhz,
                        "retakes": s.retakes,
                    }
                )
        line = {
            "case": case.key,
            **{
                n: {
                    "run_medians_us": [r["median_us"] for r in runs[n]],
                    "spread_pct": round(
                        (
                            max(r["median_us"] for r in runs[n])
                            / min(r["median_us"] for r in runs[n])
                            - 1
                        )
                        * 100,
                        2,
                    ),
                    "retakes": sum(r["retakes"] for r in runs[n]),
                    "min_clock_mhz": min(
                        (c for r in runs[n] for c in r["clock_mhz"] if c), default=None
                    ),
                }
                for n in names
            },
        }
        print(json.dumps(line), flush=True)
        report.append({"summary": line, "runs": runs})
        if args.out:  # after every case: a probe cut short keeps what it measured
            args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
