"""The demo's canary is exact: the slowdown it injects lands inside the measured intervals.

A dedicated collection of the canary's cases only (the demo's protocol and process-time
clock, more runs), baseline and candidate alternating as in the demo, then compared: each
canary case's measured ratio must hold the demo's factor within its interval (widened on a
loaded machine, below); the fake-clock test checks the mechanism itself exactly."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import pytest
from rich.console import Console

from bot.demo import DEMO_FACTOR, DEMO_PROTOCOL, DEMO_SLOW, collect_paired
from collector import timing
from collector.backends.base import Prepared
from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, Collection
from collector.timing import Slowdown

RUNS = 8
# How many interval half-widths the measured ratio may miss the factor by.
TOLERANCE = 2.0


@pytest.mark.slow
def test_the_canary_slows_its_cases_by_exactly_its_factor(tmp_path: Path) -> None:
    protocol = dataclasses.replace(DEMO_PROTOCOL, runs=RUNS)
    assert protocol.cpu_clock == "process"  # busy neighbours do not count against a case
    only = CaseSelector.parse(DEMO_SLOW, option="--case-filter")

    def config(name: str, canary: Canary | None) -> CollectConfig:
        return CollectConfig(
            out=tmp_path / name,
            case_set="demo",
            case_filter=only,
            protocol=protocol,
            canary=canary,
            quiet=True,
        )

    base = Collection(config("base", None))
    cand = Collection(config("cand", Canary(slow=only, factor=DEMO_FACTOR)))
    result = collect_paired(base, cand, RUNS, Console(quiet=True), "canary")
    cases = result.data["latency"]["cases"]
    assert len(cases) == len(base.plan.cases) >= 2
    for case in cases:
        # Within the interval, widened to twice its half-width on the log scale: on a quiet
        # machine the intervals are a few percent wide, so this is tight; on a shared 2-core
        # machine whose neighbours move even process time by tens of percent, the bootstrap
        # intervals cover less than they claim and a strict check would fail by chance.
        half = (math.log(case["hi"]) - math.log(case["lo"])) / 2
        miss = abs(math.log(case["ratio"] / DEMO_FACTOR))
        assert miss <= TOLERANCE * half, (case["key"], case["ratio"], case["lo"], case["hi"])


class _Clock:
    """A process clock that moves only when read (by `tick` ns) or when a call runs."""

    def __init__(self, tick: int) -> None:
        self.now = 0
        self.tick = tick

    def __call__(self) -> int:
        self.now += self.tick
        return self.now


def _measure(monkeypatch: pytest.MonkeyPatch, slowdown: Slowdown | None) -> float:
    """Mean ms per call of a fake op whose first calls (warm-up, pilot) take twice as long as
    the rest and whose later calls vary by +-20%: a canary that scales a pilot would be off."""
    clock = _Clock(tick=50)
    monkeypatch.setattr(time, "process_time_ns", clock)
    calls = iter(range(10**6))

    def call(i: int) -> None:
        n = next(calls)
        clock.now += 2_000_000 if n < 8 else 1_000_000 + 200_000 * ((i % 5) - 2)

    protocol = dataclasses.replace(DEMO_PROTOCOL, cpu_threads=0, warmup=5, samples=7)
    samples = timing.measure_cpu(Prepared(call, 1, "fake"), protocol, slowdown)
    return sum(samples.ms) / len(samples.ms)


def test_the_canary_adds_factor_minus_one_times_each_samples_own_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = _measure(monkeypatch, None)
    slowed = _measure(monkeypatch, Slowdown(DEMO_FACTOR))
    # Exact up to the clock reads around each call (50 ns of about 1 ms).
    assert slowed / base == pytest.approx(DEMO_FACTOR, rel=1e-3)
