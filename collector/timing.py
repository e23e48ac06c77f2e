"""The timing protocol: warm up, then several samples per run, each of many calls.

On CUDA a sample is one replay of a CUDA graph holding `inner` calls over rotated buffers,
timed by one event pair, followed by idle time as long as the sample (it keeps the SM clock
up: DESIGN.md section 6). A short spin kernel is queued before the start event, so the graph
is already submitted when the GPU reaches it: without it the host's launch latency lands
inside the sample, and as `inner` differs between runs, so does that share (a few % of a
5-20 us kernel on the H200). On a CPU a sample is `inner` calls timed by a monotonic clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from collector.backends.base import Prepared
from collector.device import ClockReader


@dataclass(frozen=True)
class Protocol:
    runs: int = 6
    samples: int = 8
    warmup: int = 3
    # Calls per sample are chosen so that a sample lasts about this long (rounded up to a
    # power of two, so that runs and collections of one case mostly get the same count).
    target_sample_ms: float = 1.0
    max_inner: int = 256
    # CUDA: spin this long before each timed region so that launches are queued before the
    # clock starts (0 disables it, the protocol before 2026-11-30).
    launch_block_us: float = 100.0
    # Idle time after each sample, as a multiple of the sample's duration.
    idle_ratio: float = 1.0
    use_graphs: bool = True
    # A run that saw throttling is redone after a cool-down, at most this many times.
    max_redos: int = 2
    cooldown_s: float = 2.0
    # Adaptive stopping: after `min_runs`, a case leaves play once the relative half-width
    # of its 95% interval (over per-run medians) is at most `target_ci`. 0 disables it.
    # At least 5: with 3 runs a side the comparison's interval over run medians is too
    # narrow (an H200 A/A flagged 2.2% of unchanged cases; docs/benchmarks.md, session 3).
    min_runs: int = 5
    target_ci: float = 0.0
    # With adaptive stopping, a run may also stop sampling after this many samples once its
    # median is known to better than half the target (0: always take `samples`).
    min_samples: int = 0
    # CPU path: "process" times CPU time of this process (robust to other processes on a
    # shared machine), "wall" times elapsed time. Both clocks are monotonic.
    cpu_clock: str = "process"
    # Intra-op threads on the CPU path (0: torch's default). One thread keeps CPU timings
    # reproducible on small, shared machines.
    cpu_threads: int = 1

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


def precise_enough(samples: list[float], protocol: Protocol) -> bool:
    """Adaptive sampling within a run: stop once the run median's relative standard error
    (about 1.25 sigma / sqrt(n) for a median) is under half the adaptive target."""
    n = len(samples)
    if protocol.min_samples <= 0 or protocol.target_ci <= 0 or n < protocol.min_samples:
        return False
    ordered = sorted(samples)
    med = ordered[n // 2]
    mad = sorted(abs(s - med) for s in samples)[n // 2]
    if med <= 0:
        return False
    return 1.25 * 1.4826 * mad / med / math.sqrt(n) <= protocol.target_ci / 2


def choose_inner(pilot_ms: float, protocol: Protocol) -> int:
    """Calls per sample: enough for `target_sample_ms`, rounded up to a power of two."""
    if pilot_ms <= 0:
        return protocol.max_inner
    wanted = max(1, math.ceil(protocol.target_sample_ms / pilot_ms))
    return min(protocol.max_inner, 1 << (wanted - 1).bit_length())


def _spin(clock: Callable[[], int], ns: int) -> None:
    end = clock() + ns
    while clock() < end:
        pass


def measure_cpu(prepared: Prepared, protocol: Protocol, slowdown: Slowdown | None) -> RunSamples:
    if protocol.cpu_threads > 0:
        import torch

        torch.set_num_threads(protocol.cpu_threads)
    clock = time.process_time_ns if protocol.cpu_clock == "process" else time.perf_counter_ns
    call = prepared.call
    for i in range(protocol.warmup):
        call(i)
    t0 = clock()
    for i in range(3):
        call(i)
    pilot_ms = (clock() - t0) / 3e6
    inner = choose_inner(pilot_ms, protocol)
    delay_ns = int((slowdown.factor - 1.0) * pilot_ms * 1e6) if slowdown else 0
    samples: list[float] = []
    for _ in range(protocol.samples):
        wall = time.perf_counter_ns()
        start = clock()
        for i in range(inner):
            call(i)
            if delay_ns > 0:
                _spin(clock, delay_ns)
        elapsed = clock() - start
        samples.append(elapsed / 1e6 / inner)
        if protocol.idle_ratio > 0:
            time.sleep((time.perf_counter_ns() - wall) / 1e9 * protocol.idle_ratio)
        if precise_enough(samples, protocol):
            break
    n = len(samples)
    mode = f"cpu-{protocol.cpu_clock}"
    return RunSamples(samples, [None] * n, [None] * n, [False] * n, inner, mode)


def _nominal_hz(torch: Any) -> float:
    """The SM clock when NVML cannot say: the device's rated clock, else 2 GHz."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    rate_khz = getattr(props, "clock_rate", 0)
    return float(rate_khz) * 1e3 if rate_khz else 2e9


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

    sm = clocks.read().sm_mhz
    hz = sm * 1e6 if sm else _nominal_hz(torch)
    block_cycles = int(protocol.launch_block_us * 1e-6 * hz)

    def block() -> None:
        if block_cycles > 0:
            torch.cuda._sleep(block_cycles)

    # Pilot: three eager calls behind the spin, only to size the graph.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    block()
    start.record()
    for i in range(3):
        call(i)
    end.record()
    end.synchronize()
    pilot_ms = float(start.elapsed_time(end)) / 3
    inner = choose_inner(pilot_ms, protocol)
    sleep_cycles = 0
    if slowdown is not None:
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
        block()
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
        if precise_enough(ms, protocol):
            break
    return RunSamples(ms, sm_mhz, power, throttled, inner, mode)
