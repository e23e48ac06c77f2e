"""The timing protocol: calls per sample, early stops, throttle retakes and placements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.backends.base import Prepared
from collector.device import ClockReading
from collector.measure import mostly_throttled
from collector.timing import (
    PILOT_SPIN_MAX_US,
    PILOT_TRIES,
    Protocol,
    RunSamples,
    Slowdown,
    canary_sleep_cycles,
    choose_inner,
    gpu_pilot_ms,
    measure_cpu,
    placement_of,
    placements_for,
    precise_enough,
    sets_agree,
    take_samples,
)

P = Protocol(target_sample_ms=1.0, max_inner=256)


@given(st.floats(min_value=1e-4, max_value=50.0))
def test_inner_is_a_power_of_two_that_fills_the_sample(pilot_ms: float) -> None:
    inner = choose_inner(pilot_ms, P)
    assert inner & (inner - 1) == 0 and 1 <= inner <= P.max_inner
    if inner < P.max_inner:
        assert inner * pilot_ms >= P.target_sample_ms  # long enough...
        assert inner == 1 or (inner // 2) * pilot_ms < P.target_sample_ms  # ...not longer


def test_pilot_jitter_does_not_change_the_calls_per_sample() -> None:
    # A 10 us kernel whose pilot reads 10.5-15 us (launch jitter) gets one count, where a
    # plain ceil(target / pilot) would give 67..96 and move the per-call overhead with it.
    counts = {choose_inner(us / 1e3, P) for us in (10.5, 11.0, 12.5, 14.0, 15.0)}
    assert counts == {128}
    assert choose_inner(0.0, P) == P.max_inner
    assert choose_inner(0.001, P) == P.max_inner  # capped


def test_the_gpu_canary_sleeps_once_per_sample_for_its_share_of_all_the_calls() -> None:
    hz = 1.98e9
    # A 20 us kernel, 64 calls a sample, +2%: one sleep of 2% of the 1.28 ms sample.
    cycles = canary_sleep_cycles(Slowdown(1.02), 0.020, 64, hz)
    assert cycles / hz == pytest.approx(0.02 * 64 * 20e-6, rel=1e-6)
    # Sized by the sample, not the call: twice the calls, twice the sleep.
    assert canary_sleep_cycles(Slowdown(1.02), 0.020, 128, hz) == pytest.approx(2 * cycles, abs=1)
    assert canary_sleep_cycles(None, 0.020, 64, hz) == 0
    assert canary_sleep_cycles(Slowdown(1.0), 0.020, 64, hz) == 0


def test_a_run_stops_early_only_when_its_median_is_tight_and_adaptive_is_on() -> None:
    adaptive = Protocol(target_ci=0.01, min_samples=4)
    tight = [1.0, 1.001, 0.999, 1.0]
    loose = [1.0, 1.2, 0.8, 1.1]
    assert precise_enough(tight, adaptive)
    assert not precise_enough(loose, adaptive)
    assert not precise_enough(tight[:3], adaptive)  # below min_samples
    assert not precise_enough(tight, Protocol(target_ci=0.0))  # adaptive off


# --- the sampling loop: throttle retakes and placements (the CPU and CUDA paths share it) ---

SW_POWER_CAP = 0x4


class ScriptedClocks:
    """NVML readings in a given order: True marks a reading taken while the GPU throttled."""

    def __init__(self, throttled: list[bool]) -> None:
        self.script = list(throttled)
        self.reads = 0

    def read(self) -> ClockReading:
        flag = self.script[self.reads] if self.reads < len(self.script) else False
        self.reads += 1
        return ClockReading(1980.0 if not flag else 1500.0, 500.0, SW_POWER_CAP if flag else 0)


def _timer(
    values: list[float], clocks_mhz: list[float] | None = None
) -> tuple[list[int], Callable[[int], tuple[float, float | None]]]:
    """Sample times in order, each with the SM clock measured around it (if given)."""
    slots: list[int] = []

    def time_sample(slot: int) -> tuple[float, float | None]:
        slots.append(slot)
        i = len(slots) - 1
        return values[i], clocks_mhz[i] if clocks_mhz else None

    return slots, time_sample


def test_a_throttled_sample_is_retaken_after_a_cool_down_not_averaged_in() -> None:
    protocol = Protocol(samples=3, max_retakes=8, retake_cooldown_s=0.25, idle_ratio=0.0)
    clocks = ScriptedClocks([False, True, True, False, False])
    slots, time_sample = _timer([1.0, 9.0, 8.0, 2.0, 3.0])
    sleeps: list[float] = []
    run = take_samples(time_sample, clocks, protocol, 1, "graph", sleep=sleeps.append)
    assert run.ms == [1.0, 2.0, 3.0]  # 9 and 8 ms were taken while throttled
    assert run.retakes == 2 and run.throttled == [False, False, False]
    assert slots == [0, 1, 1, 1, 2]  # the retake times the same sample slot again
    assert sleeps == [0.25, 0.25]
    assert run.sm_mhz == [1980.0, 1980.0, 1980.0]


def test_a_retaken_sample_follows_one_untimed_pass_after_its_cool_down() -> None:
    # After a cool-down the GPU and the launch path are cold: the retake is timed warm.
    protocol = Protocol(samples=3, max_retakes=8, retake_cooldown_s=0.25, idle_ratio=0.0)
    clocks = ScriptedClocks([False, True, True, False, False])
    events: list[str] = []
    _, timer = _timer([1.0, 9.0, 8.0, 2.0, 3.0])

    def time_sample(slot: int) -> tuple[float, float | None]:
        events.append(f"time {slot}")
        return timer(slot)

    def sleep(seconds: float) -> None:
        events.append(f"sleep {seconds}")

    run = take_samples(
        time_sample,
        clocks,
        protocol,
        1,
        "graph",
        sleep=sleep,
        rewarm=lambda s: events.append(f"warm {s}"),
    )
    assert run.ms == [1.0, 2.0, 3.0]
    assert events == [
        "time 0",
        "time 1",
        "sleep 0.25",
        "warm 1",
        "time 1",
        "sleep 0.25",
        "warm 1",
        "time 1",
        "time 2",
    ]


def test_retakes_are_bounded_per_run_and_what_stays_throttled_is_marked() -> None:
    protocol = Protocol(samples=4, max_retakes=2, idle_ratio=0.0)
    clocks = ScriptedClocks([True] * 20)
    _, time_sample = _timer([float(i) for i in range(20)])
    run = take_samples(time_sample, clocks, protocol, 2, "graph", sleep=lambda s: None)
    assert run.retakes == 2
    assert len(run.ms) == 4 and all(run.throttled)  # the engine redoes such a run
    assert run.ms[0] == 1.0  # the third try (index 2) of the first slot, per call (inner 2)


def test_idle_time_follows_each_sample_in_proportion() -> None:
    protocol = Protocol(samples=2, idle_ratio=1.5)
    _, time_sample = _timer([2.0, 4.0])
    sleeps: list[float] = []
    take_samples(time_sample, ScriptedClocks([]), protocol, 1, "graph", sleep=sleeps.append)
    assert sleeps == [0.003, 0.006]


def test_placements_are_visited_in_blocks_and_all_of_them_are_sampled() -> None:
    assert [placement_of(s, 4, 8) for s in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [placement_of(s, 1, 8) for s in range(8)] == [0] * 8
    for p in range(1, 9):
        assert {placement_of(s, p, 8) for s in range(8)} == set(range(p))


def test_only_short_kernels_get_several_placements() -> None:
    protocol = Protocol(placements=4, placement_max_us=50.0)
    assert placements_for(0.010, protocol) == 4  # 10 us
    assert placements_for(0.050, protocol) == 1  # 50 us and longer: placement-stable
    assert placements_for(0.010, Protocol(placements=1)) == 1


def test_a_run_over_several_placements_takes_all_its_samples() -> None:
    adaptive = Protocol(samples=8, target_ci=0.05, min_samples=2, idle_ratio=0.0)
    _, time_sample = _timer([1.0] * 8)
    run = take_samples(time_sample, ScriptedClocks([]), adaptive, 1, "graph", 4, lambda s: None)
    assert len(run.ms) == 8 and run.placements == 4
    _, time_sample = _timer([1.0] * 8)
    single = take_samples(time_sample, ScriptedClocks([]), adaptive, 1, "graph", 1, lambda s: None)
    assert len(single.ms) == 2  # one buffer set: may stop once its median is tight


def _bimodal(n: int, slow_every: int = 3) -> list[float]:
    """Set levels on two modes 25% apart (fp8 GEMMs on the H200), every third set slow."""
    return [1.25 if i % slow_every == 0 else 1.0 for i in range(n)]


def _extended(
    time_sample: Callable[[int], tuple[float, float | None]], protocol: Protocol
) -> RunSamples:
    """A run over 8 sets that may take up to 32."""
    return take_samples(
        time_sample, ScriptedClocks([]), protocol, 1, "graph", 8, lambda s: None, most_placements=32
    )


def test_a_run_whose_sets_disagree_takes_more_sets_one_sample_each() -> None:
    protocol = Protocol(samples=8, placements=8, max_placements=32, target_ci=0.008)
    slots, time_sample = _timer(_bimodal(64))
    run = _extended(time_sample, protocol)
    # 12% apart sample to sample never agree to 0.4%: the run takes every set it may.
    assert len(run.ms) == 32 and run.placements == 32
    assert [placement_of(s, 8, 8) for s in slots] == list(range(32))
    assert not sets_agree(run.ms, protocol)


def test_sets_that_agree_stop_at_the_placements_and_the_fixed_protocol_never_extends() -> None:
    calm = [1.0 + 0.001 * (i % 2) for i in range(64)]
    for protocol in (
        Protocol(samples=8, placements=8, max_placements=32),  # agree: 0.05% apart
        Protocol(samples=8, placements=8, max_placements=32, target_ci=0.0),  # fixed runs
    ):
        values = calm if protocol.target_ci else _bimodal(64)
        _, time_sample = _timer(values)
        run = _extended(time_sample, protocol)
        assert len(run.ms) == 8 and run.placements == 8
    # Sets that come to agree stop there: the standard error falls under half the target.
    mixed = _bimodal(12, slow_every=12) + [1.0] * 52
    protocol = Protocol(samples=8, placements=8, max_placements=32, target_ci=0.05)
    _, time_sample = _timer(mixed)
    run = _extended(time_sample, protocol)
    assert 8 < len(run.ms) < 32 and sets_agree(run.ms, protocol)
    assert not sets_agree(run.ms[:-1], protocol)  # it stopped at the first set that did


def test_extra_sets_fit_in_memory_with_a_spacer_each_and_a_single_set_never_extends() -> None:
    protocol = Protocol(placements=8, max_placements=32, placement_memory=0.5)
    gib = 1 << 30
    assert placements_for(0.010, protocol, gib, 100 * gib, protocol.max_placements) == 32
    assert placements_for(0.010, protocol, 4 * gib, 100 * gib, protocol.max_placements) == 12
    assert placements_for(5.0, protocol, gib, 100 * gib, protocol.max_placements) == 1
    _, time_sample = _timer(_bimodal(64))
    one = take_samples(
        time_sample,
        ScriptedClocks([]),
        Protocol(samples=8),
        1,
        "graph",
        1,
        lambda s: None,
        most_placements=32,
    )
    assert one.placements == 1 and len(one.ms) <= 8


def test_the_cpu_path_prepares_and_samples_every_placement() -> None:
    used: list[int] = []

    def prepared(tag: int) -> Prepared:
        return Prepared(call=lambda i: used.append(tag), copies=1, kernel_source="probe")

    made = [0]

    def more() -> Prepared:
        made[0] += 1
        return prepared(made[0])

    protocol = Protocol(
        samples=8, warmup=1, placements=4, placement_max_us=1e12, idle_ratio=0.0, max_inner=2
    )
    run = measure_cpu(prepared(0), protocol, None, more)
    assert made[0] == 3 and run.placements == 4 and len(run.ms) == 8
    assert set(used) == {0, 1, 2, 3}
    # Short-kernel rule off (a CPU call is not under 1 ns): one buffer set, `more` unused.
    made[0] = 0
    run = measure_cpu(prepared(0), replace(protocol, placement_max_us=0.001), None, more)
    assert made[0] == 0 and run.placements == 1


def test_a_sample_whose_measured_clock_fell_is_retaken_though_nvml_saw_nothing() -> None:
    # On the H200 a 3.5 ms prefill ran 10-15% slow while NVML's stale readings said 1980 MHz.
    protocol = Protocol(samples=3, clock_floor=0.95, idle_ratio=0.0)
    _, time_sample = _timer([3.5, 4.0, 3.5, 3.5], [1960.0, 1700.0, 1955.0, 1962.0])
    run = take_samples(time_sample, ScriptedClocks([]), protocol, 1, "graph", sleep=lambda s: None)
    # No earlier run: the first sample sets the reference, the second falls under it.
    assert run.ms == [3.5, 3.5, 3.5] and run.retakes == 1
    assert run.clock_mhz == [1960.0, 1955.0, 1962.0]
    # With the floor off, NVML alone decides.
    _, time_sample = _timer([3.5, 4.0, 3.5], [1960.0, 1700.0, 1955.0])
    off = replace(protocol, clock_floor=0.0)
    run = take_samples(time_sample, ScriptedClocks([]), off, 1, "graph", sleep=lambda s: None)
    assert run.retakes == 0 and run.ms == [3.5, 4.0, 3.5]


def test_the_clock_floor_is_relative_to_the_cases_own_fastest_clock() -> None:
    # A heavy GEMM sustains ~1790 MHz where light kernels reach 1875; judged
    # against 1875, every one of its samples was retaken. Against its own best, none is.
    protocol = Protocol(samples=4, clock_floor=0.95, idle_ratio=0.0)
    heavy = [1790.0, 1781.0, 1798.0, 1786.0]

    def sampled(times: list[float], clocks_mhz: list[float]) -> RunSamples:
        _, time_sample = _timer(times, clocks_mhz)
        return take_samples(
            time_sample,
            ScriptedClocks([]),
            protocol,
            1,
            "graph",
            sleep=lambda s: None,
            reference_mhz=1798.0,
        )

    assert sampled([46.1] * 4, heavy).retakes == 0
    # A power-capped sample of the same case (1550 MHz) is retaken; the reference from
    # earlier runs counts from the first sample on.
    run = sampled([47.6, 46.1, 46.0, 46.1, 46.2], [1550.0, *heavy])
    assert run.retakes == 1 and run.ms == [46.1, 46.0, 46.1, 46.2]


def test_a_run_is_redone_only_when_its_median_is_a_throttled_sample() -> None:
    def run_with(flags: list[bool]) -> RunSamples:
        n = len(flags)
        return RunSamples([1.0] * n, [None] * n, [None] * n, flags, 1, "graph")

    assert not mostly_throttled(run_with([False] * 8))
    # Three of eight left throttled once retakes ran out: the median is among the others.
    assert not mostly_throttled(run_with([True] * 3 + [False] * 5))
    assert mostly_throttled(run_with([True] * 4 + [False] * 4))
    assert mostly_throttled(run_with([True]))


def _order_of_builds(order: str) -> list[str]:
    events: list[str] = []

    def prepared(tag: int) -> Prepared:
        return Prepared(call=lambda i: events.append(f"call {tag}"), copies=1, kernel_source="p")

    built = [0]

    def more() -> Prepared:
        built[0] += 1
        events.append(f"build {built[0]}")
        return prepared(built[0])

    protocol = Protocol(
        samples=8,
        warmup=1,
        placements=4,
        placement_max_us=1e12,
        idle_ratio=0.0,
        max_inner=1,
        placement_order=order,
    )
    run = measure_cpu(prepared(0), protocol, None, more)
    assert run.placements == 4 and len(run.ms) == 8 and built[0] == 3
    return events


def test_placements_are_built_before_sampling_or_when_sampling_reaches_them() -> None:
    # Upfront: every set exists before the first sample, so set 0 is sampled
    # after the last build. Between: set 0's samples come before set 1 is built, and
    # each later set is built right before its own samples.
    upfront = _order_of_builds("upfront")
    last_build = upfront.index("build 3")
    assert "call 0" in upfront[last_build:]
    between = _order_of_builds("between")
    first_build = between.index("build 1")
    assert between[first_build - 2 : first_build] == ["call 0", "call 0"]
    assert "call 0" not in between[first_build:]
    assert between.index("build 2") > max(i for i, e in enumerate(between) if e == "call 1")


@pytest.mark.parametrize(
    ("setting", "on_cuda", "on_cpu"),
    [("gpu", True, False), ("always", True, True), ("never", False, False)],
)
def test_fresh_workers_setting_says_where_rounds_take_fresh_processes(
    setting: str, on_cuda: bool, on_cpu: bool
) -> None:
    protocol = Protocol(fresh_workers=setting)
    assert protocol.fresh_workers_on("cuda:3") is on_cuda
    assert protocol.fresh_workers_on("cpu") is on_cpu


def test_an_unknown_fresh_workers_setting_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="fresh_workers 'sometimes' is not one of"):
        Protocol(fresh_workers="sometimes")


# --- the CUDA pilot: it must time the GPU, not the host that queues the calls ---


def _pilots(
    script: list[tuple[float, float]],
) -> tuple[list[float], Callable[[float], tuple[float, float]]]:
    """Pilots in order: (GPU ms per call as the events saw it, host us to queue the calls)."""
    spins: list[float] = []

    def time_calls(spin_us: float) -> tuple[float, float]:
        spins.append(spin_us)
        return script[len(spins) - 1]

    return spins, time_calls


def test_a_pilot_whose_host_outlasted_its_spin_is_retaken_behind_a_longer_spin() -> None:
    # vLLM's eager layer: 240 us of host time for three calls of a 5 us kernel. Behind a
    # 100 us spin the events time the host (80 us a call); behind 480 us, the kernel.
    spins, time_calls = _pilots([(0.080, 240.0), (0.0052, 250.0), (0.0050, 230.0)])
    assert gpu_pilot_ms(time_calls, 100.0) == 0.0050
    assert spins == [100.0, 480.0, 480.0]


def test_a_pilot_the_host_queued_in_time_is_taken_as_it_is() -> None:
    # torch's eager GEMM: 30 us of host time fits in the 100 us spin; two pilots, no more.
    spins, time_calls = _pilots([(0.0061, 30.0), (0.0050, 28.0), (0.0040, 28.0)])
    assert gpu_pilot_ms(time_calls, 100.0) == 0.0050
    assert spins == [100.0, 100.0]


def test_a_host_that_never_keeps_up_gives_its_fastest_pilot_not_an_endless_spin() -> None:
    spins, time_calls = _pilots([(0.5, 30_000.0)] * 4 + [(0.4, 30_000.0)])
    assert gpu_pilot_ms(time_calls, 100.0) == 0.4
    assert len(spins) == PILOT_TRIES and max(spins) == PILOT_SPIN_MAX_US


def test_without_a_launch_spin_the_pilot_is_the_fastest_of_two_as_before() -> None:
    spins, time_calls = _pilots([(0.080, 240.0), (0.070, 240.0)])
    assert gpu_pilot_ms(time_calls, 0.0) == 0.070
    assert spins == [0.0, 0.0]
