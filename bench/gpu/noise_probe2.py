"""Second noise probe: does rotating activations and outputs too remove run-to-run noise?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe2

Each variant re-prepares its tensors every run (the engine's behaviour) and rotates a
different set of buffers over `copies` copies: weights only (the default), weights and
activations, weights, activations and outputs; optionally after emptying the allocator.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F

from bench.gpu.noise_probe import rcv
from collector.backends.base import Prepared
from collector.device import ClockReader
from collector.timing import Protocol, measure_cuda

SHAPES = [(16, 1024, 1024), (128, 4096, 1024), (512, 1024, 8192), (1, 8192, 4096), (64, 8192, 1024)]
RUNS = 10
COPIES = 8


def prep(m: int, n: int, k: int, rotate_x: bool, rotate_out: bool) -> Prepared:
    dev = "cuda:0"
    g = torch.Generator(device=dev).manual_seed(0)
    ws = [torch.randn(n, k, generator=g, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
    xs = [
        torch.randn(m, k, generator=g, device=dev).to(torch.bfloat16)
        for _ in range(COPIES if rotate_x else 1)
    ]
    outs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    call: Callable[[int], object]
    if rotate_out:

        def call(i: int) -> object:
            return torch.matmul(xs[i % len(xs)], ws[i % COPIES].t(), out=outs[i % COPIES])
    else:

        def call(i: int) -> object:
            return F.linear(xs[i % len(xs)], ws[i % COPIES])

    return Prepared(call=call, copies=COPIES, kernel_source="probe")


def main() -> None:
    clocks = ClockReader("cuda:0")
    protocol = Protocol(runs=RUNS, samples=8, target_sample_ms=1.0, idle_ratio=1.0, target_ci=0.0)
    variants = {
        "w": (False, False, False),
        "w+x": (True, False, False),
        "w+x+out": (True, True, False),
        "w+x+out+empty": (True, True, True),
    }
    for m, n, k in SHAPES:
        result = {}
        for name, (rx, ro, empty) in variants.items():
            medians = []
            for _ in range(RUNS):
                if empty:
                    torch.cuda.empty_cache()
                prepared = prep(m, n, k, rx, ro)
                medians.append(statistics.median(measure_cuda(prepared, protocol, clocks, None).ms))
                del prepared
            result[name] = {
                "us": round(statistics.median(medians) * 1e3, 3),
                "rcv_pct": round(rcv(medians) * 100, 2),
                "range_pct": round((max(medians) / min(medians) - 1) * 100, 2),
            }
        print(f"bf16 m={m} n={n} k={k}", json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
