"""The change-point rule on simulated histories: few false steps, real steps found in place.

The full figures (more histories, more scenarios) are in docs/history.md, from
bench/history_simulation.py.
"""

from __future__ import annotations

import numpy as np

from bench.history_simulation import Scenario, simulate


def test_noise_alone_is_rarely_flagged() -> None:
    rng = np.random.default_rng(11)
    for scenario in (Scenario("noise"), Scenario("t4", tails="t4"), Scenario("short", runs=8)):
        assert simulate(scenario, 1500, rng)["flagged"] <= 0.005, scenario


def test_steps_of_six_sd_are_found_at_their_run() -> None:
    rng = np.random.default_rng(12)
    for step in (0.03, -0.03):
        result = simulate(Scenario("step", step=step), 400, rng)
        assert result["found_at_run"] >= 0.95
        assert result["other_steps"] <= 0.01


def test_a_small_step_is_found_less_often_than_a_large_one() -> None:
    rng = np.random.default_rng(13)
    small = simulate(Scenario("small", step=0.015), 400, rng)["found_within_1"]
    large = simulate(Scenario("large", step=0.05), 400, rng)["found_within_1"]
    assert small < 0.8 and large == 1.0
