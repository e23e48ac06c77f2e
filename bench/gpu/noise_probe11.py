"""Eleventh noise probe: placements built between samples against all built up front.

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe11 [--runs 16] [--out FILE]

Probe 10 found that graphs captured once keep one level from run to run until a run that
allocates and captures intervenes, and then move to another: the level is a state that
building buffer sets sets for the whole GPU. The collector can now build each placement when
sampling first reaches it with `placement_order="between"` (`LazySets`), so that each
might be timed under its own state; `upfront` (the shipped order) builds all before the
first sample. Interleaved run by run. (A first attempt dropped the buffers of sets built
later while their graphs still used them: an illegal memory access on the third case.)
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from .noise_probe10 import CASES


def main() -> None:
    import torch

    from collector.backends.torch_backend import TorchBackend
    from collector.caseplan import build_plan
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    dev = "cuda:0"
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    by_key = {c.key: c for c in build_plan(("gemm",), case_set="default").cases}
    cases = [by_key[k] for k in CASES if k in by_key]
    base = Protocol(target_ci=0.0)
    clocks = ClockReader(dev)
    ctx = {
        name: MeasureContext(TorchBackend(), dev, replace(base, placement_order=order), l2, clocks)
        for name, order in (("lazy", "between"), ("upfront", "upfront"))
    }
    report: list[dict[str, Any]] = []
    for case in cases:
        runs: dict[str, list[list[float]]] = {"lazy": [], "upfront": []}
        for run in range(args.runs):
            for name in ["lazy", "upfront"] if run % 2 == 0 else ["upfront", "lazy"]:
                s, _, _ = _measure_once(ctx[name], case)
                runs[name].append([round(x * 1e3, 3) for x in s.ms])
        summary: dict[str, Any] = {"case": case.key}
        for name, rs in runs.items():
            meds = [statistics.median(r) for r in rs]
            summary[name] = {
                "run_medians_us": [round(m, 3) for m in meds],
                "run_sd_pct": round(statistics.stdev(meds) / statistics.median(meds) * 100, 2),
            }
        print(json.dumps(summary), flush=True)
        report.append({"summary": summary, "runs": runs})
        if args.out:
            args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
