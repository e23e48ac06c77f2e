"""Verdicts of an `aa` step under two intervals: the comparison's bootstrap and a Welch t-interval.

    python -m bench.gpu.interval_check DIR [DIR ...]

DIR holds `precision_session aa`'s returned files (its records tarball), or a protocol
session's folders A, B and C (`bench/gpu/analyse.py`'s layout and canary). The comparison's
interval resamples runs, then samples inside each run; the collector stops a case on a 95%
t-interval on its log per-run trimmed means. Where a run's samples come from 8 buffer sets
whose levels differ, the bootstrap's second level resamples that spread though every run
averages it alike, and its interval widens. This prints, per DIR, A vs B (flags) and C vs A
(canary found, false flags) with each interval, the verdict rule and q-values unchanged;
docs/benchmarks.md, the run of 2026-12-02 (fourth lease). Runs on a CPU.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from bench.gpu.analyse import case_rows
from bench.gpu.precision_session import load_step
from bench.gpu.protocol_session import CANARY
from bot.compare.comparison import Baseline, compare_runs
from bot.compare.stats import Settings, verdicts
from collector.aggregate import trimmed_mean
from collector.caseplan import Case, CaseSelector
from collector.record import RunRecord, read_record

FLAGS = ("regressed", "improved")


def log_run_means(record: RunRecord) -> dict[str, np.ndarray]:
    """Each case's log per-run trimmed means (what the collector's stopping rule reads)."""
    runs: dict[str, dict[int, list[float]]] = {}
    for table in record.samples.values():
        for row in table.to_pylist():
            runs.setdefault(row["case_key"], {}).setdefault(row["run"], []).append(row["ms"])
    return {
        key: np.log([trimmed_mean(np.asarray(v)) for _, v in sorted(by_run.items())])
        for key, by_run in runs.items()
    }


def welch_interval(base: np.ndarray, cand: np.ndarray, confidence: float) -> tuple[float, float]:
    """cand / base: a Welch t-interval on the difference of mean log run means."""
    vb, vc = base.var(ddof=1) / base.size, cand.var(ddof=1) / cand.size
    se = float(np.sqrt(vb + vc))
    if se == 0:
        diff = float(cand.mean() - base.mean())
        return float(np.exp(diff)), float(np.exp(diff))
    dof = (vb + vc) ** 2 / (vb**2 / (base.size - 1) + vc**2 / (cand.size - 1))
    t = float(sps.t.ppf(0.5 + confidence / 2, dof))
    diff = float(cand.mean() - base.mean())
    return float(np.exp(diff - t * se)), float(np.exp(diff + t * se))


def both_verdicts(base: RunRecord, cand: RunRecord) -> dict[str, Any]:
    """Each case's verdict under both intervals, and the comparison's rows."""
    settings = Settings()
    comparison = compare_runs(base, cand, settings, Baseline(kind="explicit-run"))
    table = comparison.cases
    logs_b, logs_c = log_run_means(base), log_run_means(cand)
    bounds = [welch_interval(logs_b[k], logs_c[k], settings.confidence) for k in table["key"]]
    welch = verdicts(
        np.asarray(table["ratio"], dtype=float),
        np.array([lo for lo, _ in bounds]),
        np.array([hi for _, hi in bounds]),
        np.asarray(table["q"], dtype=float),
        np.asarray(table["threshold"], dtype=float),
        settings.alpha,
        settings.min_effect,
    )
    bootstrap = np.asarray(table["verdict"], dtype=object)
    return {"rows": case_rows(comparison), "bootstrap": bootstrap, "welch": welch}


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


def summary(directory: Path) -> dict[str, Any]:
    records, is_slowed = session_records(directory)
    out: dict[str, Any] = {"dir": str(directory)}
    aa = both_verdicts(records["A"], records["B"])
    out["aa_flagged"] = {m: int(np.isin(aa[m], FLAGS).sum()) for m in ("bootstrap", "welch")}
    if "C" in records:
        found = both_verdicts(records["A"], records["C"])
        slowed = np.array([is_slowed(row) for row in found["rows"]], dtype=bool)
        out["canary"] = {
            m: {
                "found": int((found[m][slowed] == "regressed").sum()),
                "slowed": int(slowed.sum()),
                "false": int(np.isin(found[m][~slowed], FLAGS).sum()),
            }
            for m in ("bootstrap", "welch")
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
