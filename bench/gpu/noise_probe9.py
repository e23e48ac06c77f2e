"""Ninth noise probe: cheap protocol changes against the A/A tail, interleaved run by run.

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe9 [--runs 12] [--out FILE]

Probe 8 showed that the tail's levels follow neither the kernel (one cuBLAS kernel per
case), nor heat, nor the buffer layout alone: reusing one layout for every run left the
spread as it was. One sample per placement with an untimed replay before each (`p8`) cut
the spread of bf16 m=512 n=1024 k=1024 from 2.05% to 0.34% and moved its level down 4.5%,
but made the power-heavy m=1024 n=1024 k=8192 worse. Probe 7 showed power-capped cases
fixed by a clock floor that used up all its retakes. Variants here, each a Protocol:

- `default`: the shipped protocol;
- `prewarm`: an untimed replay before every sample (is it the replay, or the placements?);
- `spin500`: a 500 us launch spin (keeps the GPU busy before the sample, at low power);
- `floor_min` / `floor_tail`: clock floor 0.95 with 50 ms retake cool-down, the clock read
  as the lower of the probes before and after the sample, or after it only;
- `p8`: 8 placements, one sample each.

Per variant and case: run medians, their spread and sd, retakes and wall seconds per run.

The record (bench/results/h200-2026-11-30/noise-probe9.json) was taken with two knobs the
collector has since dropped, because the probe decided them: `warm_replay="every"`
(`prewarm`) and `clock_reading="min"` (`floor_min`); the floor variants then judged clocks
against the fastest clock of the whole process. This script now runs the variants that
still exist; `floor_tail` is the shipped floor apart from its per-case reference.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from typing import Any

from .noise_probe7 import TAIL
from .probe_kit import DEVICE, cases_by_key, l2_bytes, probe_args, run_spread, save


def main() -> None:
    from collector.backends.torch_backend import TorchBackend
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    args = probe_args(runs=12)
    dev, l2 = DEVICE, l2_bytes()
    cases = cases_by_key(TAIL, ("gemm", "context_attention"))
    base = Protocol(target_ci=0.0)  # every run takes all its samples
    floor = replace(base, clock_floor=0.95, retake_cooldown_s=0.05)
    variants = {
        "default": base,
        "spin500": replace(base, launch_block_us=500.0),
        "floor_tail": floor,
        "p8": replace(base, placements=8),
    }
    backend = TorchBackend()
    clocks = ClockReader(dev)
    contexts = {n: MeasureContext(backend, dev, p, l2, clocks) for n, p in variants.items()}
    names = list(variants)
    report: list[dict[str, Any]] = []
    for case in cases:
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for run in range(args.runs):
            k = run % len(names)
            for name in names[k:] + names[:k]:
                t0 = time.perf_counter()
                s, _, _ = _measure_once(contexts[name], case)
                runs[name].append(
                    {
                        "median_us": round(statistics.median(s.ms) * 1e3, 3),
                        "us": [round(x * 1e3, 2) for x in s.ms],
                        "clock_mhz": [round(c) if c else None for c in s.clock_mhz],
                        "retakes": s.retakes,
                        "wall_s": round(time.perf_counter() - t0, 4),
                        "inner": s.inner,
                    }
                )
        summary: dict[str, Any] = {"case": case.key}
        for n in names:
            meds = [r["median_us"] for r in runs[n]]
            summary[n] = {
                **run_spread(meds),
                "retakes": sum(r["retakes"] for r in runs[n]),
                "wall_s_per_run": round(statistics.mean(r["wall_s"] for r in runs[n]), 4),
            }
        print(json.dumps(summary), flush=True)
        report.append({"summary": summary, "runs": runs})
        save(report, args.out)


if __name__ == "__main__":
    main()
