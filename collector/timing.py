"""The timing protocol: warm up, then several samples per run, each of many calls.

On CUDA a sample is one replay of a CUDA graph holding `inner` calls over rotated buffers,
timed by one event pair, followed by idle time as long as the sample (it keeps the SM clock
up: DESIGN.md section 6). On a CPU a sample is `inner` calls timed by a monotonic clock.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from collector.backends.base import Prepared
from collector.device import ClockReader


@dataclass(frozen=True)
class Protocol:
    runs: int = 6
    samples: int = 8
    warmup: int = 3
    # Calls per sample are chosen so that a sample lasts about this long.
    target_sample_ms: float = 1.0
    max_inner: int = 200
    # Idle time after each sample, as a multiple of the sample's duration.
    idle_ratio: float = 1.0
    use_graphs: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunSamples:
    """One run of one case: its samples (ms per call) and what was seen while taking them."""

    ms: list[float]
    sm_mhz: list[float | None]
    power_w: list[float | None]
    throttled: list[bool]
    inner: int
    timing_mode: str


@dataclass(frozen=True)
class Slowdown:
    """A canary: extra time after each call, as a fraction of the call's pilot latency."""

    factor: float


def choose_inner(pilot_ms: float, protocol: Protocol) -> int:
    if pilot_ms <= 0:
        return protocol.max_inner
    return max(1, min(protocol.max_inner, math.ceil(protocol.target_sample_ms / pilot_ms)))


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def measure_cpu(prepared: Prepared, protocol: Protocol, slowdown: Slowdown | None) -> RunSamples:
    call = prepared.call
    for i in range(protocol.warmup):
        call(i)
    t0 = time.perf_counter()
    call(protocol.warmup)
    pilot_ms = (time.perf_counter() - t0) * 1e3
    inner = choose_inner(pilot_ms, protocol)
    delay_s = (slowdown.factor - 1.0) * pilot_ms / 1e3 if slowdown else 0.0
    samples: list[float] = []
    for _ in range(protocol.samples):
        start = time.perf_counter_ns()
        for i in range(inner):
            call(i)
            if delay_s > 0:
                _spin(delay_s)
        elapsed = time.perf_counter_ns() - start
        samples.append(elapsed / 1e6 / inner)
        if protocol.idle_ratio > 0:
            time.sleep(elapsed / 1e9 * protocol.idle_ratio)
    n = len(samples)
    return RunSamples(samples, [None] * n, [None] * n, [False] * n, inner, "cpu")


def measure_cuda(
    prepared: Prepared,
    protocol: Protocol,
    clocks: ClockReader,
    slowdown: Slowdown | None,
) -> RunSamples:
    import torch

    call = prepared.call
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(protocol.warmup):
            call(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    # Pilot: one eager call, only to size the graph.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call(0)
    end.record()
    end.synchronize()
    pilot_ms = float(start.elapsed_time(end))
    inner = choose_inner(pilot_ms, protocol)
    sleep_cycles = 0
    if slowdown is not None:
        rate_khz = torch.cuda.clock_rate() * 1000 if hasattr(torch.cuda, "clock_rate") else 0
        sm = clocks.read().sm_mhz
        hz = sm * 1e6 if sm else rate_khz * 1e3
        sleep_cycles = int((slowdown.factor - 1.0) * pilot_ms / 1e3 * hz)

    def body() -> None:
        for i in range(inner):
            call(i)
            if sleep_cycles:
                torch.cuda._sleep(sleep_cycles)

    replay = body
    mode = "eager"
    if protocol.use_graphs and prepared.graphable:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        replay = graph.replay
        mode = "graph"
        for _ in range(protocol.warmup):
            replay()
        torch.cuda.synchronize()

    ms: list[float] = []
    sm_mhz: list[float | None] = []
    power: list[float | None] = []
    throttled: list[bool] = []
    for _ in range(protocol.samples):
        start.record()
        replay()
        end.record()
        end.synchronize()
        elapsed_ms = float(start.elapsed_time(end))
        reading = clocks.read()
        ms.append(elapsed_ms / inner)
        sm_mhz.append(reading.sm_mhz)
        power.append(reading.power_w)
        throttled.append(ClockReader.throttled(reading.throttle_reasons))
        if protocol.idle_ratio > 0:
            time.sleep(elapsed_ms / 1e3 * protocol.idle_ratio)
    return RunSamples(ms, sm_mhz, power, throttled, inner, mode)
