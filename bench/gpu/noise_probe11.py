"""Eleventh noise probe: placements built between samples against all built up front.

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe11 [--runs 16] [--out FILE]

Probe 10 found that graphs captured once keep one level from run to run until a run that
allocates and captures intervenes, and then move to another: the level is a state that
building buffer sets sets for the whole GPU. The collector can now build each placement when
sampling first reaches it with `placement_order="between"` (`LazySets`), so that each
might be timed under its own state; `upfront` (the shipped order) builds all before the
first sample; `lazy8` builds eight sets lazily, one per sample. Interleaved run by
run. (A first attempt dropped the buffers of sets built later while their graphs still
used them: an illegal memory access on the third case.)
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from .noise_probe10 import CASES
from .probe_kit import DEVICE, cases_by_key, l2_bytes, probe_args, save, summarise


def main() -> None:
    from collector.backends.torch_backend import TorchBackend
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    args = probe_args(runs=16)
    dev, l2, cases = DEVICE, l2_bytes(), cases_by_key(CASES)
    base = Protocol(target_ci=0.0)
    clocks = ClockReader(dev)
    # name -> (placement order, placements per run); lazy8 gives every sample its own set.
    variants = {"lazy": ("between", 4), "upfront": ("upfront", 4), "lazy8": ("between", 8)}
    ctx = {
        name: MeasureContext(
            TorchBackend(), dev, replace(base, placement_order=o, placements=n), l2, clocks
        )
        for name, (o, n) in variants.items()
    }
    report: list[dict[str, Any]] = []
    for case in cases:
        runs: dict[str, list[list[float]]] = {name: [] for name in variants}
        names = list(variants)
        for run in range(args.runs):
            # Rotate which variant goes first, so none always follows the same one.
            for name in names[run % len(names) :] + names[: run % len(names)]:
                s, _, _ = _measure_once(ctx[name], case)
                runs[name].append([round(x * 1e3, 3) for x in s.ms])
        summary: dict[str, Any] = {"case": case.key}
        summary.update(summarise(runs))
        print(json.dumps(summary), flush=True)
        report.append({"summary": summary, "runs": runs})
        save(report, args.out)


if __name__ == "__main__":
    main()
