"""Eighth noise probe: what sets the level of the A/A tail's GEMMs, run by run?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe8 [--runs 16] [--out FILE]

Probe 7 left GEMMs whose runs sit at levels 3-9% apart with the SM clock unchanged. Two
patterns show in its samples: bf16 m=512 n=1024 k=4096 changes level with the buffer set
(samples come in equal pairs, one pair per placement), bf16 m=64 n=8192 k=1024 changes level
only between runs (all 8 samples of a run equal, across its 4 placements). This probe times
those cases with variants interleaved run by run:

- `default`: the shipped protocol (4 placements, new buffers and graphs every run);
- `p8`: 8 placements, one sample each (more independent layouts per run, same samples);
- `reuse`: one set of 4 placements allocated once and reused by every run (graphs are
  still captured per run): if the per-run levels stay, the layout is not what sets them.

Per run it also records GPU and HBM temperature (NVML) and, for `default`, the kernel names
of one eager call (torch.profiler), so that levels can be matched to a kernel or to heat.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from functools import partial
from typing import Any

from .probe_kit import DEVICE, cases_by_key, l2_bytes, probe_args, run_spread, save

CASES = [
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=8192",
    "gemm:gemm_dtype=bfloat16,m=1024,n=1024,k=8192",
    "gemm:gemm_dtype=bfloat16,m=512,n=1024,k=1024",
    "gemm:gemm_dtype=bfloat16,m=64,n=8192,k=1024",
    "gemm:gemm_dtype=bfloat16,m=512,n=1024,k=4096",
    "gemm:gemm_dtype=bfloat16,m=4096,n=4096,k=4096",
]


def _temps(handle: Any) -> dict[str, Any]:
    import pynvml

    out: dict[str, Any] = {}
    try:
        out["gpu_c"] = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    except pynvml.NVMLError:
        out["gpu_c"] = None
    try:
        field = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_MEMORY_TEMP])[0]
        out["hbm_c"] = field.value.uiVal if field.nvmlReturn == 0 else None
    except (pynvml.NVMLError, AttributeError):
        out["hbm_c"] = None
    return out


def _kernels(prepared: Any) -> list[str]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        prepared.call(0)
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages()})


def main() -> None:
    import pynvml
    import torch

    from collector.backends.torch_backend import TorchBackend
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol, measure_cuda

    args = probe_args(runs=16)
    dev, l2, cases = DEVICE, l2_bytes(), cases_by_key(CASES)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    base = Protocol(target_ci=0.0)  # every run takes all its samples
    backend = TorchBackend()
    clocks = ClockReader(dev)
    ctx = {
        "default": MeasureContext(backend, dev, base, l2, clocks),
        "p8": MeasureContext(backend, dev, replace(base, placements=8), l2, clocks),
    }
    names = ["default", "p8", "reuse"]
    report: list[dict[str, Any]] = []
    for case in cases:
        fixed = [backend.prepare(case, dev, l2) for _ in range(4)]
        pool: list[Any] = []

        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for run in range(args.runs):
            order = names[run % 3 :] + names[: run % 3]
            for name in order:
                info: dict[str, Any] = _temps(handle)
                if name == "reuse":
                    pool[:] = fixed[1:]
                    s = measure_cuda(fixed[0], base, clocks, None, partial(pool.pop, 0))
                else:
                    s, _, _ = _measure_once(ctx[name], case)
                if name == "default" and run < 4:
                    info["kernels"] = _kernels(backend.prepare(case, dev, l2))
                runs[name].append(
                    {
                        "median_us": round(statistics.median(s.ms) * 1e3, 3),
                        "us": [round(x * 1e3, 2) for x in s.ms],
                        "clock_mhz": [round(c) if c else None for c in s.clock_mhz],
                        "inner": s.inner,
                        **info,
                    }
                )
        summary: dict[str, Any] = {"case": case.key}
        for n in names:
            meds = [r["median_us"] for r in runs[n]]
            summary[n] = {"run_medians_us": meds, **run_spread(meds)}
        print(json.dumps(summary), flush=True)
        report.append({"summary": summary, "runs": runs})
        save(report, args.out)
        del fixed
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
