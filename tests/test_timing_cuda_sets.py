"""`measure_cuda`'s order of work per buffer set, on a stand-in for torch's CUDA API.

Every set a run times is warmed up by eager calls before its graph is captured, as the
first set is: on the H200 the other sets once went without, and in a quarter of 8-set runs
the first set ran 3-10% faster than the rest (docs/benchmarks.md, the third run of
2026-12-02). A run takes only as many sets as fit in its share of free memory. The stand-in
logs what each set's calls run under; no GPU is needed.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from collector.backends.base import Prepared
from collector.device import ClockReading
from collector.timing import Protocol, RunSamples, choose_inner, measure_cuda

KERNEL_MS = 0.005  # a 5 us kernel: the pilot gives it 8 buffer sets


class FakeCuda:
    """What measure_cuda calls of torch.cuda; events time KERNEL_MS a call, no more."""

    def __init__(self, free_bytes: int = 100 << 30, allocated_bytes: int = 1 << 30) -> None:
        self.capturing = False
        self.log: list[tuple[int, str]] = []  # (set, "eager" | "capture" | "replay")
        self.free_bytes, self.allocated_bytes = free_bytes, allocated_bytes
        self.flushes = 0

    def mem_get_info(self) -> tuple[int, int]:
        return self.free_bytes, 141 << 30

    def memory_allocated(self) -> int:
        return self.allocated_bytes

    class Stream:
        def wait_stream(self, other: Any) -> None: ...

    def current_stream(self) -> FakeCuda.Stream:
        return FakeCuda.Stream()

    @contextlib.contextmanager
    def stream(self, s: Any) -> Iterator[None]:
        yield

    def synchronize(self) -> None: ...

    def empty_cache(self) -> None:
        self.flushes += 1

    def _sleep(self, cycles: int) -> None: ...

    class Event:
        def __init__(self, enable_timing: bool = False) -> None: ...

        def record(self) -> None: ...

        def synchronize(self) -> None: ...

        def elapsed_time(self, other: Any) -> float:
            return 3 * KERNEL_MS

    def CUDAGraph(self) -> Any:  # torch's name
        cuda = self

        class Graph:
            def __init__(self) -> None:
                self.body: list[int] = []

            def replay(self) -> None:
                cuda.log.extend((s, "replay") for s in self.body)

        return Graph()

    @contextlib.contextmanager
    def graph(self, g: Any) -> Iterator[None]:
        self.empty_cache()  # as torch.cuda.graph does before every capture
        self.capturing, start = True, len(self.log)
        yield
        self.capturing = False
        g.body = sorted({s for s, _ in self.log[start:]})


class Clocks:
    """NVML's readings: a steady clock, or (`throttle_from`) a throttle reason from that read."""

    def __init__(self, throttle_from: int | None = None) -> None:
        self.reads = 0
        self.throttle_from = throttle_from

    def read(self) -> ClockReading:
        self.reads += 1
        late = self.throttle_from is not None and self.reads >= self.throttle_from
        return ClockReading(sm_mhz=1980.0, power_w=300.0, throttle_reasons=0x4 if late else 0)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """The stand-in installed as torch.cuda for the test."""
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return cuda


def sets_of(cuda: FakeCuda) -> tuple[list[int], Callable[[], Prepared]]:
    """A list of the buffer sets built, and a `prepare` that builds and logs one."""
    built: list[int] = []

    def prepared_set() -> Prepared:
        number = len(built)
        built.append(number)

        def call(i: int) -> None:
            cuda.log.append((number, "capture" if cuda.capturing else "eager"))

        return Prepared(call=call, copies=1, kernel_source="fake")

    return built, prepared_set


def test_every_buffer_set_is_warmed_up_eagerly_before_its_graph_is_captured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    built, prepared_set = sets_of(cuda)
    protocol = Protocol(warmup=3)
    samples = measure_cuda(prepared_set(), protocol, Clocks(), None, prepared_set)  # type: ignore[arg-type]
    assert samples.placements == protocol.placements == len(built) == 8
    # One sample a set: the calls per sample follow `placement_sample_ms`, not the 1 ms.
    assert samples.inner == choose_inner(KERNEL_MS, protocol, 8) < choose_inner(KERNEL_MS, protocol)
    for number in built:
        mine = [kind for s, kind in cuda.log if s == number]
        assert "capture" in mine, f"set {number} was never captured"
        before = mine[: mine.index("capture")]
        assert before.count("eager") >= protocol.warmup, f"set {number}: {before}"


def test_a_run_takes_only_the_buffer_sets_that_fit_in_its_share_of_free_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10 GiB free, 2 GiB allocated with the first set: half the free memory holds 2 sets.
    cuda = FakeCuda(free_bytes=10 << 30, allocated_bytes=2 << 30)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    built, prepared_set = sets_of(cuda)
    protocol = Protocol(placement_memory=0.5)
    samples = measure_cuda(prepared_set(), protocol, Clocks(), None, prepared_set)  # type: ignore[arg-type]
    assert samples.placements == len(built) == 2


@pytest.mark.parametrize("flush", [False, True])
def test_graph_captures_flush_the_allocator_only_when_asked(
    fake_cuda: FakeCuda, flush: bool
) -> None:
    cuda = fake_cuda
    built, prepared_set = sets_of(cuda)
    samples = timed(prepared_set, Protocol(capture_flush=flush), Clocks())
    assert samples.placements == len(built) == 8
    assert cuda.flushes == (len(built) if flush else 0)
    # Restored after the captures: the instance's own method again, no stand-in left.
    assert "empty_cache" not in vars(cuda)


def test_nvml_is_read_once_a_run_where_the_gpu_measures_the_clock(fake_cuda: FakeCuda) -> None:
    runs = {}
    for reads in ("sample", "run"):
        clocks = Clocks()
        _, prepared_set = sets_of(fake_cuda)
        protocol = Protocol(clock_reads=reads)
        runs[reads] = timed(prepared_set, protocol, clocks)
        # One read sizes the spin before any sample; then one a sample, or one a run.
        assert clocks.reads == 1 + (protocol.samples if reads == "sample" else 1)
    assert runs["run"].sm_mhz == runs["sample"].sm_mhz == [1980.0] * 8
    assert not any(runs["run"].throttled)


@pytest.mark.parametrize("reads", ["sample", "run"])
def test_nvml_throttle_reasons_decide_retakes_only_when_read_with_each_sample(
    fake_cuda: FakeCuda, reads: str
) -> None:
    # On the H200 NVML's reasons flickered on 4-9 us kernels whose measured clock was the
    # clean cases' own; read once a run, they condemned whole runs (37 redos in 210 cases).
    _, prepared_set = sets_of(fake_cuda)
    protocol = Protocol(clock_reads=reads, max_retakes=3, retake_cooldown_s=0.0)
    # The first read (before the samples) is clean; every later one reports a power cap.
    samples = timed(prepared_set, protocol, Clocks(throttle_from=2))
    if reads == "sample":
        # Each read saw it: retaken up to the bound, then every sample marked (and the engine
        # redoes the run).
        assert samples.retakes == 3 and all(samples.throttled)
    else:
        assert samples.retakes == 0 and not any(samples.throttled)
        assert samples.sm_mhz == [1980.0] * 8  # the once-read still stands in the record


def timed(prepared_set: Callable[[], Prepared], protocol: Protocol, clocks: Any) -> RunSamples:
    """One run of `measure_cuda` over the stand-in's buffer sets."""
    return measure_cuda(prepared_set(), protocol, clocks, None, prepared_set)
