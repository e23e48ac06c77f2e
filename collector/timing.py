"""The timing protocol: warm up, then several samples per run, each of many calls.

On CUDA a sample is one replay of a CUDA graph holding `inner` calls over rotated buffers,
timed by one event pair, followed by idle time as long as the sample (it keeps the SM clock
up: docs/statistics.md). A short spin kernel is queued before the start event, so the graph
is already submitted when the GPU reaches it: without it the host's launch latency lands
inside the sample, and as `inner` differs between runs, so does that share (a few % of a
5-20 us kernel on the H200). On a CPU a sample is `inner` calls timed by a monotonic clock.

Short kernels are timed over several placements per run: their speed follows where their
buffers land in memory (up to several % for 3-30 us GEMMs on the H200), so a run prepares
`placements` independent buffer sets and its samples cycle over them. A sample that saw the
GPU throttle (its SM clock, measured on the GPU right after it, under `clock_floor` of the
case's fastest) is retaken after a short cool-down, up to `max_retakes` times per run.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar
from typing import Protocol as Protocol_

from collector.backends.base import Prepared
from collector.device import ClockReader, ClockReading
from collector.settings import setting

T = TypeVar("T")
PLACEMENT_ORDERS = ("upfront", "between")
FRESH_WORKERS = ("gpu", "always", "never")
WORKER_STARTS = ("spawn", "forkserver")
CPU_CLOCKS = ("process", "wall")
CLOCK_READS = ("sample", "run")


@dataclass(frozen=True)
class Protocol:
    """How each case is timed. Each field's help says what it does; docs/statistics.md says
    why it has its value, CHANGELOG.md what it was before."""

    # The cap: with adaptive stopping most cases stop at 3-5 runs, the noisiest take more.
    runs: int = setting(
        16,
        min=1,
        unit="runs",
        help="Runs per case, the unit of the statistics (the cap when adaptive).",
    )
    samples: int = setting(8, min=1, unit="samples", help="Timed samples per run.")
    warmup: int = setting(3, min=0, unit="calls", help="Warm-up calls before timing.")
    # Rounded up to a power of two, so that runs of one case mostly get the same count.
    target_sample_ms: float = setting(
        1.0,
        min=0.001,
        unit="ms",
        help="Calls per sample are chosen so a sample lasts this long.",
    )
    # A run over several buffer sets captures one graph per set, and capture costs 60-110 us
    # of host time a call: shorter samples there cut a short kernel's run to about a third.
    placement_sample_ms: float = setting(
        0.25,
        min=0.001,
        unit="ms",
        help="CUDA: like --target-sample-ms, for runs over several buffer sets (one "
        "sample a set, each set's graph captured).",
    )
    max_inner: int = setting(256, min=1, unit="calls", help="Most calls in one sample.")
    # Keeps the host's launch latency, whose share varies with the calls per sample, out.
    launch_block_us: float = setting(
        100.0,
        min=0.0,
        unit="us",
        help="CUDA: spin this long before each timed region so that launches are queued (0: off).",
    )
    # NVML's clock is too stale to judge one sample, so the clock is measured on the GPU; the
    # floor is per case because heavy GEMMs sustain about 5% less clock than light kernels.
    clock_probe_us: float = setting(
        50.0,
        min=0.0,
        unit="us",
        help="CUDA: length of the spin after each sample that measures the SM clock (0: off).",
    )
    clock_floor: float = setting(
        0.95,
        min=0.0,
        max=1.0,
        unit="fraction",
        help="Retake a sample whose SM clock, measured on the GPU right after it, fell "
        "below this fraction of the fastest measured for its case (0: no floor; NVML's "
        "throttle reasons then decide only with --clock-reads sample).",
    )
    # Keeps the SM clock up between samples.
    idle_ratio: float = setting(
        1.0,
        min=0.0,
        unit="x sample",
        help="Idle time after each sample, as a multiple of its duration.",
    )
    use_graphs: bool = setting(True, cli="graphs", help="Time CUDA ops inside CUDA graphs.")
    # torch.cuda.graph empties the allocator's caches before every capture: 8 flushes in a
    # short kernel's run on top of the run's own, each set already behind its own spacer.
    capture_flush: bool = setting(
        False,
        help="CUDA: empty the allocator's caches before each buffer set's graph capture, as "
        "torch.cuda.graph does (the run's own flush, before its first set, stays either way).",
    )
    # NVML's SM clock lags a sample by far (it read 1980 MHz through every clock dip the GPU
    # measured on the H200), each read cost about 1.5 ms of a 0.1 s run, and its throttle
    # reasons flickered on short kernels whose measured clock was the clean cases' own
    # (docs/statistics.md, the `clock_reads` row).
    clock_reads: str = setting(
        "run",
        choices=CLOCK_READS,
        help="CUDA: read NVML's clock, power and throttle reasons after every sample, its "
        "throttle reasons deciding retakes ('sample'), or once after a run's samples for "
        "the record ('run', where the clock measured on the GPU after each sample decides: "
        "see --clock-floor).",
    )
    # Throttled samples are retaken; a run is redone only when its median would still be a
    # throttled sample (half or more of its samples throttled after the retakes).
    max_retakes: int = setting(
        8,
        min=0,
        unit="samples",
        help="Retake at most this many throttled samples per run (after a cool-down).",
    )
    retake_cooldown_s: float = setting(
        0.05, min=0.0, unit="s", help="Cool-down before a throttled sample is retaken."
    )
    max_redos: int = setting(
        2,
        min=0,
        unit="runs",
        help="Redo a run this many times at most when half or more of its samples "
        "stayed throttled after retakes (its median would be a throttled sample).",
    )
    # 0.5 s: at 2 s, redo cool-downs were half the device time of kernels from 1 ms; an A/A of
    # 210 shapes at 0.5 s stayed within p99 0.88% (docs/benchmarks.md, 2026-12-02e).
    cooldown_s: float = setting(
        0.5, min=0.0, unit="s", help="Cool-down before a throttled run is redone."
    )
    # Short kernels' speed follows where their buffers land: several sets per run, each
    # behind a random spacer, so that runs in one process do not reuse one layout.
    placements: int = setting(
        8,
        min=1,
        unit="buffer sets",
        help="Buffer sets per run for kernels under --placement-max-us, samples visiting "
        "them in blocks (their speed follows a memory-system state: docs/statistics.md).",
    )
    # A run's value averages its sets; where they disagree widely (fp8 GEMMs of 50-200 us
    # sit on levels up to 25% apart), eight sets leave runs 1-4% apart and 2% unseen.
    max_placements: int = setting(
        32,
        min=1,
        unit="buffer sets",
        help="CUDA: a run whose --placements sets still disagree (the standard error of "
        "its mean over half --target-ci) takes more sets, one sample each, up to this many.",
    )
    # Per-run levels that follow placement were seen up to 1.1 ms (fp8 GEMMs 7-11% apart);
    # above, power throttling sets the spread, and eight sets would add heavy work to it.
    placement_max_us: float = setting(
        1200.0,
        min=0.0,
        unit="us",
        help="Kernels whose pilot call is shorter than this get --placements buffer sets.",
    )
    # Every set of a run stays allocated until the run ends (its graph reads it).
    placement_memory: float = setting(
        0.5,
        min=0.0,
        max=1.0,
        unit="fraction",
        help="CUDA: fewer buffer sets when --placements of them would take more than this "
        "fraction of the device's free memory.",
    )
    spacer_max_mib: int = setting(
        256,
        min=0,
        unit="MiB",
        help="Each buffer set is allocated behind a random spacer of up to this size.",
    )
    # Building a set moves a memory-system state for every set: built between samples,
    # each set is timed under its own draw of it; built up front, a run measures one.
    placement_order: str = setting(
        "between",
        choices=PLACEMENT_ORDERS,
        help="Build each buffer set when sampling reaches it ('between': one draw of "
        "the memory state per set) or all before the first sample ('upfront').",
    )
    # A process keeps one memory-system state its runs share; fresh processes make a case's
    # runs independent. Only with a worker pool ("always" serves the CPU tests).
    fresh_workers: str = setting(
        "gpu",
        choices=FRESH_WORKERS,
        help="Take each round after the first in fresh worker processes ('gpu': on CUDA "
        "devices only), so that a case's runs do not share one process's memory state.",
    )
    # The next round's processes import their backend while this round measures, so that a
    # recycle only waits for their CUDA contexts. Two H200 A/As with it measured alike.
    prestart_workers: str = setting(
        "gpu",
        choices=FRESH_WORKERS,
        help="Start the next round's fresh worker processes while the current round "
        "measures ('gpu': on CUDA devices only); they import their backend and wait, and "
        "make their CUDA context only once the current round's processes have exited.",
    )
    # A fresh vLLM worker's first block-FP8 case paid about 1.4 s on the H200 loading
    # FlashInfer's GEMM module; a spare loads it before its turn (vllm_standby.py).
    standby_warm: bool = setting(
        True,
        help="A spare worker (--prestart-workers) also loads what its backend's first cases "
        "would, without a CUDA context, while it waits (vLLM: FlashInfer's GEMM module and "
        "its block-FP8 library, where built).",
    )
    # A spawned worker imports its backend (vLLM: about 20 s on the H200); a forked one
    # starts from a server that imported it once. An H200 A/A of the two measured alike.
    worker_start: str = setting(
        "forkserver",
        choices=WORKER_STARTS,
        help="How worker processes start: 'spawn' (each imports its backend) or "
        "'forkserver' (forked from one server process that imported the backend once and "
        "made no CUDA context; a fresh worker then only makes its CUDA context).",
    )
    # Adaptive stopping: the half-width is over per-run trimmed means, the estimate's own
    # unit; a case still wider than the target goes on up to `runs`.
    min_runs: int = setting(
        3,
        min=2,
        unit="runs",
        help="Adaptive stopping: runs every case gets first (why 3: docs/statistics.md).",
    )
    target_ci: float = setting(
        0.008,
        min=0.0,
        unit="fraction",
        help="Adaptive stopping: a case stops once its 95% half-width is at most this "
        "(0.008 = 0.8%); 0 turns it off (every case takes --runs runs).",
    )
    # "Precise enough": the run median known to better than half of `target_ci`.
    min_samples: int = setting(
        4,
        min=0,
        unit="samples",
        help="Adaptive stopping: a run may stop after this many samples once its median is "
        "precise enough (0: always take --samples).",
    )
    # Process CPU time is robust to other processes on a shared machine; both are monotonic.
    cpu_clock: str = setting(
        "process",
        choices=CPU_CLOCKS,
        help="CPU: time the process's CPU time ('process') or elapsed time ('wall').",
    )
    # One thread keeps CPU timings reproducible on small, shared machines.
    cpu_threads: int = setting(
        1, min=0, unit="threads", help="CPU: torch's intra-op threads (0: torch's default)."
    )

    def __post_init__(self) -> None:
        if self.placement_order not in PLACEMENT_ORDERS:
            raise ValueError(
                f"placement_order {self.placement_order!r} is not one of {PLACEMENT_ORDERS}"
            )
        if self.fresh_workers not in FRESH_WORKERS:
            raise ValueError(f"fresh_workers {self.fresh_workers!r} is not one of {FRESH_WORKERS}")
        if self.prestart_workers not in FRESH_WORKERS:
            raise ValueError(
                f"prestart_workers {self.prestart_workers!r} is not one of {FRESH_WORKERS}"
            )
        if self.worker_start not in WORKER_STARTS:
            raise ValueError(f"worker_start {self.worker_start!r} is not one of {WORKER_STARTS}")
        if self.clock_reads not in CLOCK_READS:
            raise ValueError(f"clock_reads {self.clock_reads!r} is not one of {CLOCK_READS}")
        if self.cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock {self.cpu_clock!r} is not one of {CPU_CLOCKS}")

    def fresh_workers_on(self, device: str) -> bool:
        """Whether rounds after the first take fresh worker processes on this device."""
        gpu = self.fresh_workers == "gpu" and device.startswith("cuda")
        return gpu or self.fresh_workers == "always"

    def prestart_workers_on(self, device: str) -> bool:
        """Whether fresh workers for the next round start while a round measures."""
        on = self.prestart_workers == "always" or (
            self.prestart_workers == "gpu" and device.startswith("cuda")
        )
        return on and self.fresh_workers_on(device)

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
    # Samples retaken because the GPU throttled while they were taken.
    retakes: int = 0
    # Buffer sets the samples cycled over.
    placements: int = 1
    # The SM clock measured on the GPU around each sample (None where not measured).
    clock_mhz: list[float | None] = field(default_factory=list)


class ClockSource(Protocol_):
    def read(self) -> ClockReading: ...


@dataclass(frozen=True)
class Slowdown:
    """A canary: extra time, as a fraction of the latency (on the CPU, of each sample's own
    calls, spun after them; on a GPU, of the pilot latency times the sample's calls, as one
    device-side sleep after them: `canary_sleep_cycles`)."""

    factor: float


def canary_sleep_cycles(
    slowdown: Slowdown | None, per_call_ms: float, inner: int, hz: float
) -> int:
    """SM cycles of the canary's sleep, one per sample after its `inner` calls.

    One sleep per call added its own kernel's gap inside the graph, about 0.8 us on the H200,
    so a +2% canary slowed 20 us GEMMs by 6% (docs/benchmarks.md, the run of 2026-12-02c).
    """
    if slowdown is None:
        return 0
    return max(0, int((slowdown.factor - 1.0) * per_call_ms * inner / 1e3 * hz))


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


def choose_inner(pilot_ms: float, protocol: Protocol, placements: int = 1) -> int:
    """Calls per sample: enough for `target_sample_ms` (`placement_sample_ms` over several
    buffer sets), rounded up to a power of two."""
    if pilot_ms <= 0:
        return protocol.max_inner
    target = protocol.placement_sample_ms if placements > 1 else protocol.target_sample_ms
    wanted = max(1, math.ceil(target / pilot_ms))
    return min(protocol.max_inner, 1 << (wanted - 1).bit_length())


# The pilot's spin grows to this at most (a host that takes longer to queue three calls
# is broken, not slow), and it is retried this many times to get two GPU-bound timings.
PILOT_SPIN_MAX_US = 20_000.0
PILOT_TRIES = 5


def gpu_pilot_ms(
    time_calls: Callable[[float], tuple[float, float]], launch_block_us: float
) -> float:
    """Milliseconds per call of the kernel, to size samples, placements and the canary.

    `time_calls(spin_us)` queues a spin of `spin_us`, then three eager calls between two
    events, and returns (GPU ms per call, host us spent queueing the calls). The events time
    the GPU only if the host queued the calls before the spin ended; else they time the host
    (vLLM's layers spend 60-110 us of host time a call, more than many of their kernels). So
    a pilot whose host time outlasted its spin is taken again behind a spin twice that host
    time. The fastest of two GPU-bound pilots is kept (the first calls may allocate); with
    `launch_block_us` 0 (no spin), the fastest of two pilots as they come.
    """
    timed: list[float] = []
    last = math.inf
    spin_us = launch_block_us
    for _ in range(PILOT_TRIES):
        ms, host_us = time_calls(spin_us)
        last = min(last, ms)
        if launch_block_us <= 0 or host_us < spin_us:
            timed.append(ms)
            if len(timed) == 2:
                break
        elif spin_us < PILOT_SPIN_MAX_US:
            spin_us = min(PILOT_SPIN_MAX_US, 2.0 * host_us)
    return min(timed) if timed else last


def placements_for(
    pilot_ms: float,
    protocol: Protocol,
    set_bytes: int = 0,
    free_bytes: int = 0,
    most: int | None = None,
) -> int:
    """Buffer sets for a run: several for kernels under `placement_max_us`, whose speed
    follows placement, as many as fit in `placement_memory` of the free memory (when the
    bytes of a set and the free bytes are known), at most `most` (`placements`)."""
    wanted = protocol.placements if most is None else most
    if protocol.placements <= 1 or pilot_ms * 1e3 >= protocol.placement_max_us:
        return 1
    if set_bytes <= 0 or free_bytes <= 0:
        return wanted
    fit = int(protocol.placement_memory * free_bytes) // set_bytes
    return max(1, min(wanted, fit))


def sets_agree(samples: list[float], protocol: Protocol) -> bool:
    """A run over several sets has enough of them once its mean's relative standard error
    (one sample per set) is at most half the adaptive target; always, without adaptivity."""
    if protocol.target_ci <= 0 or len(samples) < 2:
        return protocol.target_ci <= 0
    mean = statistics.fmean(samples)
    error = statistics.stdev(samples) / math.sqrt(len(samples))
    return mean > 0 and error / mean <= protocol.target_ci / 2


def take_samples(
    time_sample: Callable[[int], tuple[float, float | None]],
    clocks: ClockSource,
    protocol: Protocol,
    inner: int,
    timing_mode: str,
    placements: int = 1,
    sleep: Callable[[float], None] = time.sleep,
    reference_mhz: float | None = None,
    rewarm: Callable[[int], None] | None = None,
    most_placements: int | None = None,
) -> RunSamples:
    """The sampling loop shared by the CPU and CUDA paths.

    `time_sample(s)` times sample `s` (all `inner` calls, on placement `placement_of(s)`)
    and returns its elapsed ms and the SM clock measured right after it (None if not measured).
    Each sample is followed by idle time as long as itself. A sample taken while the GPU
    throttled (NVML's reasons, or a measured clock under `clock_floor` times the fastest
    clock measured for this case: `reference_mhz` from earlier runs, or an earlier sample of
    this run) is retaken after `retake_cooldown_s` instead of redoing the whole run, up to
    `max_retakes` times per run. `rewarm(s)` runs sample `s`'s calls once, untimed, after
    the cool-down: a sample timed straight after it ran cold (on the H200, a 4.5 us GEMM's
    retaken samples were up to 60% slow at a normal SM clock, and kept).

    A run over several sets whose samples still disagree after `protocol.samples` (not
    `sets_agree`) takes more, each on a set of its own, up to `most_placements` sets.
    """
    out = RunSamples([], [], [], [], inner, timing_mode, 0, placements)
    fastest = reference_mhz or 0.0
    unread = ClockReading(None, None, 0)
    most = max(placements, most_placements or placements)
    slot = 0
    while slot < protocol.samples or (
        placements > 1
        and placements + slot - protocol.samples < most
        and not sets_agree(out.ms, protocol)
    ):
        while True:
            elapsed_ms, measured = time_sample(slot)
            # With the clock measured on the GPU, NVML may be read once for the run (below).
            per_sample = protocol.clock_reads == "sample" or measured is None
            reading = clocks.read() if per_sample else unread
            reference = fastest
            if measured is not None:
                fastest = max(fastest, measured)
            slow_clock = bool(
                measured is not None
                and reference
                and protocol.clock_floor > 0
                and measured < protocol.clock_floor * reference
            )
            throttled = ClockReader.throttled(reading.throttle_reasons) or slow_clock
            if protocol.idle_ratio > 0:
                sleep(elapsed_ms / 1e3 * protocol.idle_ratio)
            if not throttled or out.retakes >= protocol.max_retakes:
                break
            out.retakes += 1
            sleep(protocol.retake_cooldown_s)
            if rewarm is not None:
                rewarm(slot)
        out.ms.append(elapsed_ms / inner)
        out.sm_mhz.append(reading.sm_mhz)
        out.power_w.append(reading.power_w)
        out.throttled.append(throttled)
        out.clock_mhz.append(measured)
        slot += 1
        # A run over several placements takes all its samples: its median is over them.
        if placements == 1 and precise_enough(out.ms, protocol):
            break
    out.placements = max(placements, placements + slot - protocol.samples)
    if protocol.clock_reads == "run" and any(m is not None for m in out.clock_mhz):
        _read_once(out, clocks.read())
    return out


def _read_once(out: RunSamples, reading: ClockReading) -> None:
    """NVML read once after the run: its clock and power stand for every sample that was not
    read. Its throttle reasons do not mark them: each one's clock was measured on the GPU,
    and a sample under `clock_floor` was retaken already."""
    for i, measured in enumerate(out.clock_mhz):
        if measured is not None:  # else read with its sample (no clock measured on the GPU)
            out.sm_mhz[i], out.power_w[i] = reading.sm_mhz, reading.power_w


def placement_of(slot: int, placements: int, samples: int) -> int:
    """Samples visit the placements in blocks (0 0 1 1 2 2 ...): one switch per placement.
    A sample past `samples` (a run whose sets disagree) has a set of its own."""
    if placements > 1 and slot >= samples:
        return placements + slot - samples
    return min(placements - 1, slot * placements // max(1, samples))


class LazySets(Generic[T]):
    """The buffer sets of a run: each built when sampling first reaches it (`between`, the
    default), or all before the first sample (`upfront`).

    Building a set (allocating behind a spacer, capturing its graph) moves a state of the
    GPU's memory system that sets the speed of small GEMMs for every set, graphs captured
    earlier included. Built up front, the sets of a run share the last state, so a run
    measures one draw of it; built between samples, each set is timed under its own.
    """

    def __init__(self, first: T, count: int, build: Callable[[], T], upfront: bool) -> None:
        self.count = count
        self._built = [first]
        self._build = build
        if upfront:
            self[count - 1]

    def __getitem__(self, which: int) -> T:
        while len(self._built) <= which:
            self._built.append(self._build())
        return self._built[which]


def _spin(clock: Callable[[], int], ns: int) -> None:
    end = clock() + ns
    while clock() < end:
        pass


def measure_cpu(
    prepared: Prepared,
    protocol: Protocol,
    slowdown: Slowdown | None,
    more: Callable[[], Prepared] | None = None,
) -> RunSamples:
    if protocol.cpu_threads > 0:
        import torch

        torch.set_num_threads(protocol.cpu_threads)
    clock = time.process_time_ns if protocol.cpu_clock == "process" else time.perf_counter_ns
    for i in range(protocol.warmup):
        prepared.call(i)
    t0 = clock()
    for i in range(3):
        prepared.call(i)
    pilot_ms = (clock() - t0) / 3e6
    count = placements_for(pilot_ms, protocol) if more is not None else 1
    # No graph to capture per set here: samples keep `target_sample_ms`.
    inner = choose_inner(pilot_ms, protocol)

    def another() -> Prepared:
        assert more is not None
        extra = more()
        for i in range(protocol.warmup):
            extra.call(i)
        return extra

    sets = LazySets(prepared, count, another, protocol.placement_order == "upfront")
    extra = slowdown.factor - 1.0 if slowdown else 0.0

    def time_sample(slot: int) -> tuple[float, float | None]:
        call = sets[placement_of(slot, sets.count, protocol.samples)].call
        start = clock()
        for i in range(inner):
            call(i)
        if extra <= 0:
            return (clock() - start) / 1e6, None
        # The canary: the sample lasts `factor` times its calls' own time, exactly. The calls
        # run back to back as without it, and one untimed call after the spin leaves the
        # caches as warm for the next sample as a sample without the canary would.
        _spin(clock, int(extra * (clock() - start)))
        elapsed = clock() - start
        call(0)
        return elapsed / 1e6, None

    mode = f"cpu-{protocol.cpu_clock}"
    return take_samples(time_sample, ClockReader("cpu"), protocol, inner, mode, sets.count)


@contextlib.contextmanager
def _flushes_off(torch: Any) -> Iterator[None]:
    """torch's allocator flushes as no-ops while it holds (the device cache's and the pinned
    host cache's, which torch.cuda.graph empties before each capture)."""
    owners = ((torch.cuda, "empty_cache"), (getattr(torch, "_C", None), "_host_emptyCache"))
    found = [(o, name) for o, name in owners if o is not None and hasattr(o, name)]
    # What each owner held itself (None: the name came from its class), to put back.
    saved = [(o, name, vars(o).get(name)) for o, name in found]
    for owner, name in found:
        setattr(owner, name, _no_flush)
    try:
        yield
    finally:
        for owner, name, own in saved:
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)


def _no_flush() -> None:
    return None


def _nominal_hz(torch: Any) -> float:
    """The SM clock when NVML cannot say: the device's rated clock, else 2 GHz."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    rate_khz = getattr(props, "clock_rate", 0)
    return float(rate_khz) * 1e3 if rate_khz else 2e9


def _pilot_timer(
    torch: Any, prepared: Prepared, hz: float
) -> Callable[[float], tuple[float, float]]:
    """`gpu_pilot_ms`'s `time_calls` on CUDA: a spin, then three eager calls between events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def time_calls(spin_us: float) -> tuple[float, float]:
        if spin_us > 0:
            torch.cuda._sleep(int(spin_us * 1e-6 * hz))
        start.record()
        queued = time.perf_counter()
        for i in range(3):
            prepared.call(i)
        host_us = (time.perf_counter() - queued) * 1e6
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 3, host_us

    return time_calls


def measure_cuda(
    prepared: Prepared,
    protocol: Protocol,
    clocks: ClockReader,
    slowdown: Slowdown | None,
    more: Callable[[], Prepared] | None = None,
    reference_mhz: float | None = None,
) -> RunSamples:
    import torch

    stream = torch.cuda.Stream()

    def warm_up(p: Prepared) -> None:
        # Every buffer set alike, before its graph is captured: the other sets once went
        # without, and in a quarter of 8-set runs the first set ran 3-10% apart from the rest.
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(protocol.warmup):
                p.call(i)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

    warm_up(prepared)

    sm = clocks.read().sm_mhz
    hz = sm * 1e6 if sm else _nominal_hz(torch)
    block_cycles = int(protocol.launch_block_us * 1e-6 * hz)

    def block() -> None:
        if block_cycles > 0:
            torch.cuda._sleep(block_cycles)

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call_ms = gpu_pilot_ms(_pilot_timer(torch, prepared, hz), protocol.launch_block_us)
    # What is allocated now bounds one set from above (the first set is in it).
    free_bytes, _ = torch.cuda.mem_get_info()
    set_bytes = torch.cuda.memory_allocated()
    count = placements_for(per_call_ms, protocol, set_bytes, free_bytes) if more else 1
    # Sets past `count` are each held behind a spacer of their own until the run ends.
    spacer_bytes = protocol.spacer_max_mib << 20
    most = placements_for(
        per_call_ms, protocol, set_bytes + spacer_bytes, free_bytes, protocol.max_placements
    )
    inner = choose_inner(per_call_ms, protocol, count)
    sleep_cycles = canary_sleep_cycles(slowdown, per_call_ms, inner, hz)

    def body_of(p: Prepared) -> Callable[[], None]:
        def body() -> None:
            for i in range(inner):
                p.call(i)
            if sleep_cycles:
                torch.cuda._sleep(sleep_cycles)

        return body

    graphed = protocol.use_graphs and prepared.graphable
    mode = "graph" if graphed else "eager"

    def replay_of(p: Prepared) -> Callable[[], None]:
        if not graphed:
            return body_of(p)
        graph = torch.cuda.CUDAGraph()
        flushes = contextlib.nullcontext() if protocol.capture_flush else _flushes_off(torch)
        with flushes, torch.cuda.graph(graph):
            body_of(p)()
        for _ in range(protocol.warmup):
            graph.replay()
        torch.cuda.synchronize()
        return graph.replay

    # A graph holds no reference to the tensors it reads and writes: keep every set's
    # buffers alive until the run ends, or a later set reuses their memory under it.
    held = [prepared]

    def another() -> Callable[[], None]:
        assert more is not None
        held.append(more())
        warm_up(held[-1])
        return replay_of(held[-1])

    upfront = protocol.placement_order == "upfront"
    replays = LazySets(replay_of(prepared), count, another, upfront)
    current = [0]
    # The clock probe: a spin of known SM cycles right after the sample, timed by events,
    # so cycles / elapsed us is the clock in MHz (about 1% low: the gap between two
    # kernels is inside it). Without it (`clock_probe_us` 0), the launch spin is timed
    # instead, behind a lead spin that keeps the GPU busy while the host queues it. The
    # probe after the sample is the one kept: the one before follows the host's idle time,
    # when clocks ramp, and flagged twice as many samples of light kernels.
    tail_cycles = int(protocol.clock_probe_us * 1e-6 * hz)
    lead_cycles = int(50e-6 * hz) if block_cycles > 0 and tail_cycles == 0 else 0
    before = torch.cuda.Event(enable_timing=True)
    after = torch.cuda.Event(enable_timing=True)

    def time_sample(slot: int) -> tuple[float, float | None]:
        which = placement_of(slot, replays.count, protocol.samples)
        replay = replays[which]
        if which != current[0]:
            # Another buffer set: one untimed replay first, so that it starts as warm in
            # the cache as a set sampled back to back would.
            replay()
            current[0] = which
        if lead_cycles > 0:
            torch.cuda._sleep(lead_cycles)
            before.record()
        block()
        start.record()
        replay()
        end.record()
        if tail_cycles > 0:
            torch.cuda._sleep(tail_cycles)
            after.record()
            after.synchronize()
        else:
            end.synchronize()
        elapsed = float(start.elapsed_time(end))
        if tail_cycles > 0:
            return elapsed, tail_cycles / (float(end.elapsed_time(after)) * 1e3)
        if lead_cycles > 0:
            return elapsed, block_cycles / (float(before.elapsed_time(start)) * 1e3)
        return elapsed, None

    return take_samples(
        time_sample,
        clocks,
        protocol,
        inner,
        mode,
        replays.count,
        reference_mhz=reference_mhz,
        rewarm=lambda slot: replays[placement_of(slot, replays.count, protocol.samples)](),
        most_placements=most,
    )
