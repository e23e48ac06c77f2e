"""Simulate history in the verdict: false flags and detection on synthetic histories.

Each case has 20 stored baselines and one candidate, each a collection of `runs` runs of
`samples` samples: a collection's level = the case's level (with the history's drift or
past step) x its own between-collection offset (sd `between`: what the runs of one process
cannot see, docs/statistics.md) x each run's offset (0.5%) x within-run noise (1% CV). The
candidate's true level is the last baseline's level moved by `shift`. The verdict is the
comparison's own rule (`bot.compare.stats`: Welch's test and interval on the log run values,
each run's trimmed mean; Benjamini-Hochberg over the scenario's cases as one comparison; the
noise threshold).

Per scenario it reports the share of cases the rule calls changed (regressed or improved;
for a shift, in its direction), the share of those the annotation labels "within its
history" (bot/compare/history_verdict.py: the candidate inside the range of the 20 stored points),
and, for comparison, the share a widening rule would call changed: threshold at least
`noise_mult` x the case's history sigma (bot/history/changepoints.py `noise_sigma`, robust
to past steps).

Usage: python -m bench.history_verdict_simulation [--cases 2000] [--seed 1] [--bootstrap 400]
Prints one JSON object.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

import numpy as np

from bench.common import number_options
from bot.compare import stats
from bot.history.changepoints import PENALTY, noise_sigma

HISTORY = 20


@dataclass(frozen=True)
class Scenario:
    name: str
    shift: float = 0.0  # the candidate's true change from the last baseline's level
    between: float = 0.005  # sd (log) of a collection's own level
    drift: float = 0.0  # the history's linear drift, first to last stored run
    past_step: float = 0.0  # a step in the history, from run 11 on


SCENARIOS = (
    Scenario("no change, collections agree (between 0)", between=0.0),
    Scenario("no change, between-collection sd 0.5%"),
    Scenario("no change, between-collection sd 1%", between=0.01),
    Scenario("no change, history drifted 4%", drift=0.04),
    Scenario("no change, history stepped +4% at run 11", past_step=0.04),
    Scenario("+2%, between 0.5%", shift=0.02),
    Scenario("+2% on a case that drifted 4%", shift=0.02, drift=-0.04),
    Scenario("+2%, between 1%", shift=0.02, between=0.01),
    Scenario("+3%, between 0.5%", shift=0.03),
    Scenario("+3% undoing a -3% step at run 11", shift=0.03, past_step=-0.03),
    Scenario("-3%, between 0.5%", shift=-0.03),
    Scenario("+5%, between 1%", shift=0.05, between=0.01),
)


def collections(
    levels: np.ndarray, runs: int, samples: int, rng: np.random.Generator
) -> np.ndarray:
    """Samples (cases, collections, runs, samples) around `levels` (cases, collections)."""
    run_level = levels[..., None] * np.exp(rng.normal(0.0, 0.005, size=(*levels.shape, runs)))
    noise = np.exp(rng.normal(0.0, 0.01, size=(*levels.shape, runs, samples)))
    out: np.ndarray = run_level[..., None] * noise
    return out


def pooled(values: np.ndarray, trim: float) -> np.ndarray:
    """The comparison's estimate: trimmed mean of every sample, over the last two axes."""
    flat = np.sort(values.reshape(*values.shape[:-2], -1), axis=-1)
    cut = int(trim * flat.shape[-1])
    out: np.ndarray = flat[..., cut : flat.shape[-1] - cut].mean(axis=-1)
    return out


def simulate(
    s: Scenario,
    cases: int,
    rng: np.random.Generator,
    settings: stats.Settings,
    runs: int = 6,
    samples: int = 8,
) -> dict[str, float]:
    trend = np.linspace(0.0, math.log1p(s.drift), HISTORY)
    trend[HISTORY // 2 :] += math.log1p(s.past_step)
    between = rng.normal(0.0, s.between, size=(cases, HISTORY + 1))
    log_level = np.concatenate([trend, [trend[-1] + math.log1p(s.shift)]])[None, :] + between
    data = collections(np.exp(log_level), runs, samples, rng)
    points = pooled(data, settings.trim)  # (cases, HISTORY + 1)
    history, cand_point = points[:, :HISTORY], points[:, HISTORY]
    base, cand = data[:, HISTORY - 1], data[:, HISTORY]
    pairs = [(list(base[i]), list(cand[i])) for i in range(cases)]
    values = [
        (stats.run_values(b, settings.trim), stats.run_values(c, settings.trim)) for b, c in pairs
    ]
    lohi = np.array(stats.ratio_intervals(pairs, settings, rng, values))
    p = stats.run_test_pvalues(values)
    q = stats.bh_qvalues(p)
    noise = np.array([stats.noise_of(b, c) for b, c in values])
    threshold = np.maximum(settings.min_effect, settings.noise_mult * noise)
    ratio = cand_point / history[:, -1]

    def changed(th: np.ndarray) -> np.ndarray:
        v = stats.verdicts(
            ratio, lohi[:, 0], lohi[:, 1], q, th, settings.alpha, settings.min_effect
        )
        if s.shift > 0:
            return np.asarray(v == stats.REGRESSED)
        if s.shift < 0:
            return np.asarray(v == stats.IMPROVED)
        return np.asarray((v == stats.REGRESSED) | (v == stats.IMPROVED))

    flagged = changed(threshold)
    within = (history.min(axis=1) <= cand_point) & (cand_point <= history.max(axis=1))
    nan = np.full(HISTORY, np.nan)
    sigma = np.array([noise_sigma(np.log(h), nan, nan, PENALTY) for h in history])
    widened = changed(np.maximum(threshold, settings.noise_mult * sigma))
    wandered = history.max(axis=1) / history.min(axis=1) - 1.0
    n_flagged = int(flagged.sum())
    return {
        "changed": flagged.mean(),
        "changed_within_history": (flagged & within).sum() / max(1, n_flagged),
        "changed_outside_history": (flagged & ~within).mean(),
        "changed_if_widened": widened.mean(),
        "median_wandered": float(np.median(wandered)),
    }


def run(cases: int, seed: int, bootstrap: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    settings = replace(stats.Settings(), bootstrap=bootstrap)
    return {
        "cases": cases,
        "seed": seed,
        "bootstrap": bootstrap,
        "scenarios": {
            s.name: {k: round(float(v), 4) for k, v in simulate(s, cases, rng, settings).items()}
            for s in SCENARIOS
        },
    }


def main() -> None:
    args = number_options(__doc__, cases=2000, seed=1, bootstrap=400)
    print(json.dumps(run(args.cases, args.seed, args.bootstrap), indent=1))


if __name__ == "__main__":
    main()
