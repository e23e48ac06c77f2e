"""Synthetic run stores for the history: real records (the collector's writer) put in a
real store, so a test goes through the store's and the reader's checksums."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bot.store import RunStore
from collector.caseplan import Case
from tests.factories import attention_params, failure, gemm_case, simulated_runs, write_record


def grid_cases(count: int) -> list[Case]:
    """`count` distinct cases: GEMMs over two dtypes, and every 10th a generation attention."""
    out: list[Case] = []
    i = 0
    while len(out) < count:
        if i % 10 == 9:
            out.append(Case.build("generation_attention", attention_params(step=16 + i)))
        else:
            dtype = "bfloat16" if i % 2 else "float16"
            out.append(gemm_case(1 + i, n=1024 + 64 * (i % 7), dtype=dtype))
        i += 1
    return out


def true_ms(case: Case) -> float:
    """A stable, case-dependent level: 20 us to a few ms."""
    digest = hashlib.sha256(case.key.encode()).digest()
    return 0.02 * (1.0 + digest[0] + 0.01 * digest[1])


def commit_of(run: int) -> str:
    return hashlib.sha1(f"commit-{run}".encode()).hexdigest()


@dataclass
class SyntheticStore:
    url: str
    cases: list[Case]
    runs: int
    step_at: int  # 1-based: the first run at the new level
    steps: dict[str, float]  # case key -> factor
    failing: dict[str, set[int]] = field(default_factory=dict)  # case key -> runs it fails in


def make_store(
    root: Path,
    work: Path,
    cases: Sequence[Case],
    *,
    runs: int = 20,
    step_at: int = 12,
    steps: Sequence[float] = (1.08, 1.05, 0.94, 1.10, 0.95),
    run_noise: float = 0.005,
    failing: dict[int, set[int]] | None = None,
    samples: int = 8,
    collector_runs: int = 6,
    ref: str = "main",
    seed: int = 23,
) -> SyntheticStore:
    """`runs` stored runs of `cases`; the first len(steps) cases step by those factors from
    run `step_at` on. Every case's level also moves by `run_noise` (log sd) from run to run,
    on top of the samples' own run spread and noise. `failing` maps case positions to the
    runs (1-based) they fail in."""
    rng = np.random.default_rng(seed)
    cases = list(cases)
    step_of = {cases[i].key: f for i, f in enumerate(steps)}
    fails = {cases[i].key: set(r) for i, r in (failing or {}).items()}
    store = RunStore(str(root))
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for run in range(1, runs + 1):
        offsets = {c.key: float(np.exp(rng.normal(0.0, run_noise))) for c in cases}

        def samples_for(
            case: Case, run: int = run, offsets: dict[str, float] = offsets
        ) -> list[list[float]] | None:
            if run in fails.get(case.key, set()):
                return None
            level = true_ms(case) * offsets[case.key]
            if run >= step_at:
                level *= step_of.get(case.key, 1.0)
            return simulated_runs(rng, level, runs=collector_runs, samples=samples)

        bad = [
            failure(c, message=f"boom in run {run}")
            for c in cases
            if run in fails.get(c.key, set())
        ]
        record = write_record(
            work / f"run{run:03d}",
            cases,
            samples_for,
            failures=bad,
            status="partial" if bad else "complete",
            meta_extra={
                "git_sha": commit_of(run),
                "case_set": "synthetic",
                "started_at": (start + timedelta(days=run)).isoformat(),
                "image": {
                    "digest": f"sha256:{hashlib.sha256(str(run).encode()).hexdigest()}",
                    "ref": "ghcr.io/example/collector:main",
                },
                "versions": {"torch": "2.11.0", "collector": f"0.{run}"},
            },
        )
        store.put(record, ref=ref, keep=runs)
    return SyntheticStore(str(root), cases, runs, step_at, step_of, fails)
