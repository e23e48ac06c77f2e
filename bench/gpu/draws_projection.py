"""Project the A/A spread if every run timed several independent memory-system states.

    python -m bench.gpu.draws_projection SESSION_DIR [--draws 1,2,4] [--repeats 20]

Noise probe 10 showed that a small GEMM's level is a state of the GPU's memory system, set
when a run allocates and shared by every buffer set alive, so a run measures one draw of it.
This simulation takes the run medians of collections A and B of a session as the draws of
each case's states, and replays pairs of collections with the collector's adaptive rule
(`relative_halfwidth` after each run from `min_runs` on, cap `runs`) and its estimator (the
median of run medians), a run being the median of `draws` random states. One draw per run is
what the collector does now, and calibrates the simulation against the live result. Prints
one JSON document: per draw count, p99 of |A/A difference| (mean and range over the repeats)
and runs per case. A projection, not a measurement: whether sets built between samples
(`placement_order="between"`) get independent states is what noise probe 11 must show.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from collector.engine import relative_halfwidth
from collector.timing import Protocol

OPS = ("gemm", "context_attention", "generation_attention")


def run_medians(session: Path) -> dict[str, list[float]]:
    """Every case's run medians (ms) over collections A and B of the session."""
    out: dict[str, list[float]] = {}
    for name in "AB":
        for op in OPS:
            path = session / name / f"{op}_samples.parquet"
            if not path.exists():
                continue
            table = pq.read_table(path, columns=["case_key", "run", "ms"]).to_pydict()
            runs: dict[tuple[str, int], list[float]] = {}
            for key, run, ms in zip(table["case_key"], table["run"], table["ms"], strict=True):
                runs.setdefault((key, run), []).append(ms)
            for (key, _), samples in runs.items():
                out.setdefault(key, []).append(float(np.median(samples)))
    return out


def collect(
    states: np.ndarray, draws: int, protocol: Protocol, rng: np.random.Generator
) -> tuple[float, int]:
    """One simulated collection of one case: its latency and the runs it took."""
    runs: list[list[float]] = []
    while len(runs) < protocol.runs:
        runs.append([float(np.median(rng.choice(states, size=draws)))])
        if len(runs) >= protocol.min_runs and relative_halfwidth(runs) <= protocol.target_ci:
            break
    return float(np.median([r[0] for r in runs])), len(runs)


def project(
    medians: dict[str, list[float]], draws: int, repeats: int, protocol: Protocol, seed: int
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    p99s, runs = [], []
    for _ in range(repeats):
        diffs = []
        for values in medians.values():
            states = np.asarray(values)
            a, runs_a = collect(states, draws, protocol, rng)
            b, runs_b = collect(states, draws, protocol, rng)
            diffs.append(abs(b / a - 1) * 100)
            runs += [runs_a, runs_b]
        p99s.append(float(np.percentile(diffs, 99)))
    return {
        "p99_pct_mean": round(float(np.mean(p99s)), 2),
        "p99_pct_min": round(min(p99s), 2),
        "p99_pct_max": round(max(p99s), 2),
        "runs_per_case": round(float(np.mean(runs)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("session", type=Path)
    parser.add_argument("--draws", default="1,2,4")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    medians = run_medians(args.session)
    protocol = Protocol()
    report = {
        f"{k} draws per run": project(medians, int(k), args.repeats, protocol, args.seed)
        for k in args.draws.split(",")
    }
    print(json.dumps({"cases": len(medians), **report}, indent=1))


if __name__ == "__main__":
    main()
