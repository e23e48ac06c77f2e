"""Verdicts of an `aa` step under the shipped comparison and under its former rule.

    python -m bench.gpu.interval_check DIR [DIR ...]

DIR holds `precision_session aa`'s returned files (its records tarball), or a protocol
session's folders A, B and C (`bench/gpu/analyse.py`'s layout and canary). The shipped
comparison takes each run's trimmed mean as its value (the quantity the collector's stopping
rule reads) and, where both sides have two runs or more, a Welch t-interval on the mean log
run values. Its former rule took each run's median, and a two-level bootstrap (resample runs,
then samples inside each run) as its interval. Where a run's samples come from 8 buffer sets
whose levels differ, a median jumps between levels where a mean averages them, and the
bootstrap's second level resamples a spread that every run averages alike, so its interval
widens. The former rule is the comparison itself with those two pieces swapped back in
(`rule`); two more rules swap in one each, and `without_levels` is the shipped comparison
with placement levels off (`RULES`). This prints, per DIR, A vs B (flags, cases significant
after Benjamini-Hochberg, p99 and max of the |difference|) and C vs A (canary found, false
flags) under each rule; docs/statistics.md, "The estimate and its interval" and "Placement
levels". Runs on a CPU.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.gpu.analyse import case_rows
from bench.gpu.precision_session import load_step
from bench.gpu.protocol_session import CANARY
from bot.compare import stats
from bot.compare.comparison import Baseline, compare_runs
from collector import levels
from collector.caseplan import Case, CaseSelector
from collector.record import RunRecord, read_record

FLAGS = ("regressed", "improved")


def run_medians(runs: Sequence[np.ndarray], trim: float = 0.0) -> np.ndarray:
    """The former run value: each run's median (`trim` is not used)."""
    return np.array([stats.median(r) for r in runs], dtype=float)


def bootstrap_only(
    pairs: Sequence[stats.RunPair],
    settings: stats.Settings,
    rng: np.random.Generator,
    values: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[tuple[float, float]]:
    """The former interval: the two-level bootstrap for every case."""
    return stats.bootstrap_intervals(pairs, settings, rng)


def no_levels(*args: Any, **kwargs: Any) -> None:
    """Before placement levels: every case on its plain run values."""
    return None


# Each rule is the comparison with these pieces swapped in (module, attribute); the middle
# two change one each, and the last turns placement levels off (collector/levels.py).
RULES: dict[str, dict[tuple[Any, str], Callable[..., Any]]] = {
    "former": {
        (stats, "run_values"): run_medians,
        (stats, "ratio_intervals"): bootstrap_only,
        (levels, "match"): no_levels,
    },
    "trimmed_mean_bootstrap": {
        (stats, "ratio_intervals"): bootstrap_only,
        (levels, "match"): no_levels,
    },
    "median_welch": {(stats, "run_values"): run_medians, (levels, "match"): no_levels},
    "without_levels": {(levels, "match"): no_levels},
    "shipped": {},
}


@contextmanager
def rule(name: str) -> Iterator[None]:
    """Inside, the comparison runs rule `name` (RULES): "former" takes per-run medians (test,
    noise, drift, calibrated pairs) and the two-level bootstrap interval; all else is the
    shipped code."""
    with ExitStack() as stack:
        for (module, attr), replacement in RULES[name].items():
            stack.enter_context(mock.patch.object(module, attr, replacement))
        yield


def rule_verdicts(base: RunRecord, cand: RunRecord) -> dict[str, Any]:
    """Each case's verdict and q-value under every rule, and the shipped comparison's rows."""
    settings = stats.Settings()
    out: dict[str, Any] = {}
    for name in RULES:
        with rule(name):
            comparison = compare_runs(base, cand, settings, Baseline(kind="explicit-run"))
        rows = case_rows(comparison)
        assert [r["key"] for r in rows] == [r["key"] for r in out.get("rows", rows)]
        out["rows"] = rows
        out[name] = np.asarray(comparison.cases["verdict"], dtype=object)
        out[f"{name}_q"] = np.asarray(comparison.cases["q"], dtype=float)
        out[f"{name}_ratio"] = np.asarray(comparison.cases["ratio"], dtype=float)
    return out


Slowed = Callable[[dict[str, Any]], bool]


def session_records(directory: Path) -> tuple[dict[str, RunRecord], Slowed]:
    """Records A, B (and C) and which compared cases the canary slowed: from
    `precision_session aa`'s tarball (its canary.json), or from a protocol session's
    folders (`bench/gpu/analyse.py`'s layout and canary selector)."""
    loaded = load_step(directory, "aa")
    if loaded is not None:
        records, _, canary = loaded
        keys = set(canary["keys"]) if canary else set()
        return records, lambda row: row["key"] in keys
    if not (directory / "A").is_dir():
        raise SystemExit(f"error: {directory}: neither aa records nor folders A and B")
    records = {n: read_record(directory / n) for n in "ABC" if (directory / n).is_dir()}
    selector = CaseSelector.parse(CANARY)
    return records, lambda row: selector.matches(Case.build(row["op"], row["params"]))


def abs_diff_tail(ratio: np.ndarray) -> list[float]:
    """p99 and max of |A/A difference| in % over the cases with a ratio (log scale)."""
    diff = 100 * np.abs(np.log(ratio[np.isfinite(ratio)]))
    return [round(float(np.percentile(diff, q)), 2) for q in (99, 100)]


def summary(directory: Path) -> dict[str, Any]:
    records, is_slowed = session_records(directory)
    out: dict[str, Any] = {"dir": str(directory)}
    aa = rule_verdicts(records["A"], records["B"])
    out["aa_flagged"] = {m: int(np.isin(aa[m], FLAGS).sum()) for m in RULES}
    out["aa_abs_pct"] = {m: abs_diff_tail(aa[f"{m}_ratio"]) for m in RULES}
    alpha = stats.Settings().alpha
    with np.errstate(invalid="ignore"):
        out["aa_significant"] = {m: int((aa[f"{m}_q"] < alpha).sum()) for m in RULES}
    if "C" in records:
        found = rule_verdicts(records["A"], records["C"])
        slowed = np.array([is_slowed(row) for row in found["rows"]], dtype=bool)
        out["canary"] = {
            m: {
                "found": int((found[m][slowed] == "regressed").sum()),
                "slowed": int(slowed.sum()),
                "false": int(np.isin(found[m][~slowed], FLAGS).sum()),
            }
            for m in RULES
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", type=Path, nargs="+")
    for directory in parser.parse_args().dirs:
        print(json.dumps(summary(directory)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
