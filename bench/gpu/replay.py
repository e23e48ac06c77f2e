"""Replay shorter protocols on an H200 A/A session's records: fixed run counts and the
collector's adaptive stopping rule, on the very runs the session took.

    python -m bench.gpu.replay SESSION_DIR [--runs 5,6,8] [--adaptive 5:0.01,4:0.015]

Runs are taken in rounds (round r measures run r of every case), so the first k runs of a
case are exactly what a k-run collection would have measured, and the adaptive rule
(`collector.engine.relative_halfwidth`, checked after each round from `min_runs` on) stops
a case at the same run as it would in a live collection. The replay does not stop sampling
inside a run unless asked to (MIN_RUNS:TARGET_CI:MIN_SAMPLES): then a run keeps the samples
taken up to the point where the collector would have stopped it, and its device time loses
the samples (and idle gaps) it would not have taken. Prints one JSON
document: per policy, the A/A flags and spread, and device seconds per case.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.compare.comparison import compare_runs
from collector.aggregate import RunResult
from collector.caseplan import build_plan
from collector.engine import relative_halfwidth
from collector.record import CHECKPOINT, RUN_JSON, CheckpointState, finalize, read_record
from collector.timing import Protocol, precise_enough

from .analyse import _cost, _flags

Policy = Callable[[list[RunResult]], list[RunResult]]


def first(k: int) -> Policy:
    return lambda runs: runs[:k]


def stop_sampling(run: RunResult, protocol: Protocol) -> RunResult:
    """The run as it would have ended with in-run stopping (`min_samples`): the samples up
    to the first point where its median is tight enough, and its device time less the
    samples and idle gaps it would not have taken. Runs over several placements take all
    their samples, as in the collector."""
    if run.placements > 1:
        return run
    for n in range(1, len(run.ms) + 1):
        if precise_enough(run.ms[:n], protocol):
            dropped = sum(run.ms[n:]) * run.inner / 1e3 * (1 + protocol.idle_ratio)
            return replace(
                run,
                ms=run.ms[:n],
                sm_mhz=run.sm_mhz[:n],
                power_w=run.power_w[:n],
                throttled=run.throttled[:n],
                wall_s=max(0.0, run.wall_s - dropped),
            )
    return run


def adaptive(min_runs: int, target_ci: float, min_samples: int = 0) -> Policy:
    protocol = Protocol(target_ci=target_ci, min_samples=min_samples)

    def stop(runs: list[RunResult]) -> list[RunResult]:
        runs = [stop_sampling(r, protocol) for r in runs]
        for n in range(min_runs, len(runs) + 1):
            if relative_halfwidth([r.ms for r in runs[:n]]) <= target_ci:
                return runs[:n]
        return runs

    return stop


def replay(src: Path, dst: Path, policy: Policy) -> Path:
    """A run record holding, per case, the runs the policy keeps."""
    meta = json.loads((src / RUN_JSON).read_text())
    state = CheckpointState.load(src / CHECKPOINT)
    kept = CheckpointState(failures=state.failures)
    for key, runs in state.runs.items():
        kept.runs[key] = policy(sorted(runs, key=lambda r: r.run))
    plan = build_plan(tuple(meta["ops"]), case_set=meta["case_set"])
    known = set(state.runs) | state.failed_keys
    cases = [c for c in plan.cases if c.key in known]
    dst.mkdir(parents=True)
    return finalize(dst, meta, cases, kept, "complete")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("session", type=Path)
    parser.add_argument("--runs", default="5,6,8")
    # Adaptive rules to replay: MIN_RUNS:TARGET_CI or MIN_RUNS:TARGET_CI:MIN_SAMPLES.
    parser.add_argument("--adaptive", default="5:0.01")
    args = parser.parse_args()
    runs = [k for k in args.runs.split(",") if k]
    policies: dict[str, Policy] = {f"first {k}": first(int(k)) for k in runs}
    policies["all"] = lambda runs: runs
    for rule in args.adaptive.split(","):
        min_runs, target, *samples = rule.split(":")
        per_run = int(samples[0]) if samples else 0
        policies[f"adaptive {rule}"] = adaptive(int(min_runs), float(target), per_run)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, policy) in enumerate(policies.items()):
            a = read_record(replay(args.session / "A", Path(tmp) / f"{i}A", policy).parent)
            b = read_record(replay(args.session / "B", Path(tmp) / f"{i}B", policy).parent)
            flags = _flags(compare_runs(a, b))
            report[name] = {
                "changed_pct": flags["changed_pct"],
                "verdicts": flags["verdicts"],
                "abs_diff_pct": flags["abs_diff_pct"],
                "beyond_2pct": flags["beyond_2pct"],
                "cost": {"A": _cost(a), "B": _cost(b)},
            }
            print(name, json.dumps(report[name]), flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
