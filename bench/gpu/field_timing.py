"""How the field's vLLM collectors time a call (aiconfigurator's `benchmark_with_power`), for
the gap scripts to set beside the collector's own timing: warm up, capture `calls` calls in
one CUDA graph, replay it a few times, then `replays` replays back to back under one event
pair, with no idle time and no launch spin; the mean per call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WARMUPS = 3
REPLAYS = 6  # the field's num_runs


def field_timing_ms(call: Callable[[int], Any], calls: int, replays: int = REPLAYS) -> float:
    import torch

    for i in range(WARMUPS):
        call(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            call(i)
    torch.cuda.synchronize()
    for _ in range(WARMUPS):
        graph.replay()
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / (calls * replays)
