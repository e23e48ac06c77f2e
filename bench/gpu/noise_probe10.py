"""Tenth noise probe: is the per-run level of small GEMMs set by the run, or by the time?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe10 [--runs 16] [--out FILE]

Session 6 (the shipped protocol) left an A/A tail of GEMMs under 20 us whose runs sit at
two levels ~4% apart, all 4 placements of a run at one level. Probe 8 showed that reusing
the buffers does not remove it. Variants, interleaved run by run:

- `default`: the shipped run (new buffers, new CUDA graphs, new stream);
- `fixedgraph`: 4 placements allocated and captured once, and each run only replays them
  (8 samples in blocks, launch spin, idle time as in the protocol). If its runs still sit
  at two levels, the level is the GPU's state at the time, not anything a run builds.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .probe_kit import DEVICE, cases_by_key, l2_bytes, probe_args, save, summarise

CASES = [
    "gemm:gemm_dtype=fp8,m=64,n=8192,k=4096",
    "gemm:gemm_dtype=fp8,m=256,n=4096,k=1024",
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=4096",
    "gemm:gemm_dtype=bfloat16,m=256,n=4096,k=8192",
    "gemm:gemm_dtype=fp8_block,m=1024,n=1024,k=1024",
]


def fixed_run(graphs: list[Any], inner: int, spin: int, samples: int) -> list[float]:
    """One run over graphs captured once: the protocol's sampling, nothing rebuilt."""
    import torch

    from collector.timing import placement_of

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    ms, current = [], -1
    for slot in range(samples):
        which = placement_of(slot, len(graphs), samples)
        if which != current:
            graphs[which].replay()
            current = which
        torch.cuda._sleep(spin)  # type: ignore[no-untyped-call]
        start.record()
        graphs[which].replay()
        end.record()
        end.synchronize()
        elapsed = float(start.elapsed_time(end))
        time.sleep(elapsed / 1e3)
        ms.append(elapsed / inner * 1e3)
    return ms


def main() -> None:
    import torch

    from collector.backends.torch_backend import TorchBackend
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    args = probe_args(runs=16)
    dev, l2, cases = DEVICE, l2_bytes(), cases_by_key(CASES)
    base = Protocol(target_ci=0.0)
    backend = TorchBackend()
    ctx = MeasureContext(backend, dev, base, l2, ClockReader(dev))
    spin = int(base.launch_block_us * 1e-6 * 1.98e9)
    report: list[dict[str, Any]] = []
    for case in cases:
        # One run of the shipped protocol sizes the graphs the fixed variant replays.
        first, _, _ = _measure_once(ctx, case)
        inner = first.inner
        sets = [backend.prepare(case, dev, l2) for _ in range(4)]
        graphs = []
        for p in sets:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(inner):
                    p.call(i)
            graphs.append(g)
            for _ in range(3):
                g.replay()
        torch.cuda.synchronize()

        runs: dict[str, list[list[float]]] = {"default": [], "fixedgraph": []}
        for run in range(args.runs):
            for name in ["default", "fixedgraph"] if run % 2 == 0 else ["fixedgraph", "default"]:
                if name == "default":
                    s, _, _ = _measure_once(ctx, case)
                    runs[name].append([round(x * 1e3, 3) for x in s.ms])
                else:
                    ms = fixed_run(graphs, inner, spin, base.samples)
                    runs[name].append([round(x, 3) for x in ms])
        summary: dict[str, Any] = {"case": case.key, "inner": inner}
        summary.update(summarise(runs))
        print(json.dumps(summary), flush=True)
        report.append({"summary": summary, "runs": runs})
        save(report, args.out)
        del graphs, sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
