"""The timing protocol's pure parts: how many calls make a sample, when a run may stop early."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from collector.timing import Protocol, choose_inner, precise_enough

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


def test_a_run_stops_early_only_when_its_median_is_tight_and_adaptive_is_on() -> None:
    adaptive = Protocol(target_ci=0.01, min_samples=4)
    tight = [1.0, 1.001, 0.999, 1.0]
    loose = [1.0, 1.2, 0.8, 1.1]
    assert precise_enough(tight, adaptive)
    assert not precise_enough(loose, adaptive)
    assert not precise_enough(tight[:3], adaptive)  # below min_samples
    assert not precise_enough(tight, Protocol())  # adaptive off
