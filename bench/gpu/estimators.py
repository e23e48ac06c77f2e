"""Re-estimate an A/A session's |A/B difference| with other per-case estimators, offline.

    python -m bench.gpu.estimators SESSION_DIR [SESSION_DIR ...]

For each session (run records A and B), every case's samples are read back and the A/B
ratio is recomputed with each estimator below; prints the |difference| quantiles in %.
Used to choose the comparison's estimate on recorded data (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

from bot.compare import stats as compare_stats
from bot.compare.latency import Runs, runs_by_case
from collector.record import read_record


def load_runs(record: Path) -> dict[str, Runs]:
    """Per case key, its samples (ms) run by run, as the comparison groups them."""
    out: dict[str, Runs] = {}
    for samples in read_record(record).samples.values():
        out.update(runs_by_case(samples))
    return out


def _pooled(f: Callable[[np.ndarray], float]) -> Callable[[Runs], float]:
    return lambda runs: f(np.concatenate(runs))


def _without_gross(cut: float) -> Callable[[Runs], float]:
    """The shipped estimate after dropping each run's samples over `cut` x its median (a
    first sample slowed after a heavy predecessor, say), never a level a few % off."""
    return lambda runs: compare_stats.pooled_estimate([r[r <= cut * np.median(r)] for r in runs])


ESTIMATORS: dict[str, Callable[[Runs], float]] = {
    "pooled_median": _pooled(compare_stats.median),
    "pooled_mean": _pooled(lambda x: float(np.mean(x))),
    "trimmed_mean_10 (shipped)": compare_stats.pooled_estimate,
    "trimmed_mean_20": _pooled(lambda x: float(stats.trim_mean(x, 0.2))),
    "harrell_davis_median": _pooled(lambda x: float(stats.mstats.hdquantiles(x, prob=[0.5])[0])),
    "mean_of_run_medians": lambda runs: float(np.mean([np.median(r) for r in runs])),
    "median_of_run_medians": lambda runs: float(np.median([np.median(r) for r in runs])),
    **{f"shipped, drop >{cut}x run median": _without_gross(cut) for cut in (1.1, 1.2, 1.3)},
}


def abs_diffs(a: dict[str, Runs], b: dict[str, Runs], f: Callable[[Runs], float]) -> np.ndarray:
    keys = sorted(set(a) & set(b))
    return np.array([abs(f(b[k]) / f(a[k]) - 1) * 100 for k in keys])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sessions", type=Path, nargs="+")
    args = parser.parse_args()
    for session in args.sessions:
        a, b = load_runs(session / "A"), load_runs(session / "B")
        print(f"{session}: {len(set(a) & set(b))} cases")
        for name, f in ESTIMATORS.items():
            d = abs_diffs(a, b, f)
            print(
                f"  {name:32s} median {np.median(d):.2f} p90 {np.percentile(d, 90):.2f} "
                f"p99 {np.percentile(d, 99):.2f} max {d.max():.2f} >1.5% {(d > 1.5).sum()}"
            )


if __name__ == "__main__":
    main()
