"""Simulate the change-point rule on synthetic histories: false flags and detection.

Each history is `runs` points of one case: log latency = level + Gaussian (or Student t,
heavy tails) noise of sd `sigma`, plus a step and/or a linear drift. The rule is the one
`collectbot history` runs (`bot.history.changepoints.case_steps`), with no intervals given
(the noise then comes from the points alone: the harder case).

Usage: python -m bench.history_simulation [--histories 4000] [--seed 1] [--penalty P]
Prints one JSON object: per scenario, the share of histories flagged, of steps found at the
right run (and within one run), and of histories with a step found elsewhere.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from bench.common import number_options
from bot.history.changepoints import PENALTY, case_steps


@dataclass(frozen=True)
class Scenario:
    name: str
    step: float = 0.0  # relative size, e.g. 0.03
    at: int = 12  # 1-based first run at the new level
    drift: float = 0.0  # relative change from first to last run, linear in log
    sigma: float = 0.005
    runs: int = 20
    tails: str = "normal"  # or "t4"


SCENARIOS = (
    Scenario("noise"),
    Scenario("noise, 8 runs", runs=8, at=5),
    Scenario("noise, heavy tails (t4)", tails="t4"),
    Scenario("noise sd 1%", sigma=0.01),
    Scenario("drift 2% over the window", drift=0.02),
    Scenario("drift 5% over the window", drift=0.05),
    Scenario("step 1.5% (3 sd)", step=0.015),
    Scenario("step 2% (4 sd)", step=0.02),
    Scenario("step 3% (6 sd)", step=0.03),
    Scenario("step 5% (10 sd)", step=0.05),
    Scenario("step -3% (6 sd)", step=-0.03),
    Scenario("step 3% at run 19 (2 runs after)", step=0.03, at=19),
    Scenario("step 3% with drift 2%", step=0.03, drift=0.02),
)


def simulate(
    s: Scenario, histories: int, rng: np.random.Generator, penalty: float = PENALTY
) -> dict[str, float]:
    if s.tails == "t4":  # scaled so that its sd is sigma
        noise = rng.standard_t(4, size=(histories, s.runs)) * s.sigma / math.sqrt(2.0)
    else:
        noise = rng.normal(0.0, s.sigma, size=(histories, s.runs))
    series = noise + np.linspace(0.0, math.log1p(s.drift), s.runs)[None, :]
    if s.step:
        series[:, s.at - 1 :] += math.log1p(s.step)
    nan = np.full(s.runs, np.nan)
    flagged = exact = near = elsewhere = 0
    for row in series:
        steps, _ = case_steps(row, nan, nan, penalty)
        runs = [pos + 1 for pos, _, _ in steps]
        flagged += bool(runs)
        if s.step:
            exact += s.at in runs
            near += any(abs(r - s.at) <= 1 for r in runs)
            elsewhere += any(abs(r - s.at) > 1 for r in runs)
    out = {"flagged": flagged / histories}
    if s.step:
        out |= {
            "found_at_run": exact / histories,
            "found_within_1": near / histories,
            "other_steps": elsewhere / histories,
        }
    return out


def run(histories: int, seed: int, penalty: float = PENALTY) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    return {
        "penalty": penalty,
        "histories": histories,
        "seed": seed,
        "scenarios": {
            s.name: {k: round(v, 4) for k, v in simulate(s, histories, rng, penalty).items()}
            for s in SCENARIOS
        },
    }


def main() -> None:
    args = number_options(__doc__, histories=4000, seed=1, penalty=PENALTY)
    print(json.dumps(run(args.histories, args.seed, args.penalty), indent=1))


if __name__ == "__main__":
    main()
